/**
 * `trajflow train --local` stopped as a process manager stops it (SIGTERM to the CLI's pid alone,
 * not to its process group): the CLI and the trainer child it started are gone within the grace
 * period, and the run resumes when `trajflow worker --role all` starts. And a trainer child whose
 * parent is SIGKILLed (so it could not stop it) notices and stops by itself.
 */
import { ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, openSync, closeSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { INTERRUPT_BACKSTOP_LINE, INTERRUPT_EXIT_LIMIT_MS } from '../client/launch';
import { stopWorker, WORKER_STOP_GRACE_MS } from '../client/workerProcess';
import { PROJECT_ROOT } from '../src/paths';
import { runLayout } from '../src/store/runLayout';
import { runningDevServer } from '../src/temporal/devServer';
import { trainingStatusQuery, type trainingWorkflow } from '../workflows/training';
import { testConfig, withClient } from './support/harness';
import { writeConfigFile } from './support/workerProcess';
import { activityAttempts, LoggedWorker, pendingWork, spawnLoggedWorker, tail, waitFor, within } from './support/faultKit';

const CLI = path.join(PROJECT_ROOT, 'bin', 'trajflow.js');
// Enough steps that the run is still going when the test has seen step 1 (a step takes ~1 s here).
const STEPS = 12;

/** Pids of live processes whose command line names `configFile`: the CLI and the workers it started. */
function processesOf(configFile: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let argv: string[];
    try {
      argv = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
    } catch {
      continue; // exited while we looked
    }
    if (argv.some((a) => a.endsWith('trajflow.js')) && argv.includes(configFile)) pids.push(Number(entry));
  }
  return pids;
}

/** Whether `pid` runs: it exists (signal 0 does not fail with ESRCH) and is not a zombie left unreaped. */
function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
    return false;
  }
  // An orphan's exit is reaped by whatever adopted it, which may take its time or never happen.
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
}

function exitOf(child: ChildProcess): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve({ code: child.exitCode, signal: child.signalCode });
    child.once('exit', (code, signal) => resolve({ code, signal }));
  });
}

/** `node bin/trajflow.js <args>` with its output in `logFile`. */
function spawnCli(args: string[], logFile: string): ChildProcess {
  const out = openSync(logFile, 'a');
  const child = spawn(process.execPath, [CLI, ...args], { stdio: ['ignore', out, out], env: { ...process.env, TRAJFLOW_LOG_LEVEL: 'info' } });
  closeSync(out);
  return child;
}

describe('trajflow train --local under SIGTERM', () => {
  it('stops the CLI and its trainer within the grace period; the run resumes on `trajflow worker --role all`', async () => {
    const config = testConfig('cli-sigterm', {
      model: { dModel: 32, nHeads: 2, dFF: 64, maxContext: 512 },
      agent: { maxTurns: 3 },
      sampling: { maxTokens: 12 },
      rollout: { groupSize: 4, maxConcurrency: 8 },
      // A train step whose attempt is lost with the stopped trainer is retried after this (the
      // default of 2 minutes is past the resume's budget); the test prints any retried step.
      trainer: { steps: STEPS, batchGroups: 1, maxStaleness: 1, formatWarmupSteps: 0, heartbeatTimeoutS: 20 },
      reward: { formatWeight: 0.5 },
    });
    // --local starts a dev server unless its data directory has one running: adopt the suite's.
    const suiteServer = runningDevServer(process.env.TRAJFLOW_TEST_DATA_DIR!);
    expect(suiteServer?.address).toBe(config.temporal.address);
    mkdirSync(path.join(config.dataDir, 'temporal'));
    writeFileSync(path.join(config.dataDir, 'temporal', 'temporal-server.json'), JSON.stringify(suiteServer));
    expect(runningDevServer(config.dataDir)?.pid).toBe(suiteServer!.pid);

    const configFile = writeConfigFile(config);
    const runId = 'cli-sigterm-run';
    const cliLog = path.join(config.dataDir, 'cli.log');
    const trainerLog = runLayout(config.dataDir, runId).trainerLog;
    const evidence = () => `CLI log:\n${tail(cliLog)}\ntrainer log:\n${tail(trainerLog)}`;
    let resumed: LoggedWorker | undefined;
    let cli: ChildProcess | undefined;
    try {
      cli = spawnCli(['train', configFile, '--local', '--run-id', runId], cliLog);
      const cliExit = exitOf(cli);
      await withClient((client) => {
        const handle = client.workflow.getHandle(runId);
        return within(
          Promise.race([
            waitFor(
              'train step 1 started',
              async () => ((await handle.query(trainingStatusQuery).catch(() => undefined))?.step ?? 0) >= 1 || undefined,
              120_000,
            ),
            cliExit.then((e) => Promise.reject(new Error(`the CLI exited early (${e.code ?? e.signal})`))),
          ]),
          130_000,
          'training under the CLI',
          evidence,
        );
      });
      const started = processesOf(configFile);
      expect(started).toContain(cli.pid);
      // The trainer child, besides the CLI itself.
      expect(started.length).toBe(2);

      const sentAt = Date.now();
      cli.kill('SIGTERM');
      // The CLI's own bound, plus time for its exit to reach this process on a loaded machine.
      const exit = await within(cliExit, INTERRUPT_EXIT_LIMIT_MS + 5_000, 'the CLI after SIGTERM', evidence);
      const backstop = readFileSync(cliLog, 'utf8').includes(INTERRUPT_BACKSTOP_LINE);
      console.log(`CLI exited ${Date.now() - sentAt} ms after SIGTERM (${exit.code ?? exit.signal})${backstop ? `, at its time limit:\n${evidence()}` : ''}`);
      expect(exit).toEqual({ code: 130, signal: null });
      // A CLI that exited at its time limit left the trainer to stop by itself (exitWithParent).
      await waitFor('the trainer gone', async () => started.every((pid) => !isAlive(pid)) || undefined, WORKER_STOP_GRACE_MS + 3_000, 100);
      expect(processesOf(configFile)).toEqual([]);

      resumed = await spawnLoggedWorker('all', configFile, path.join(config.dataDir, 'worker-all.log'));
      const result = await withClient((client) =>
        within(
          client.workflow.getHandle<typeof trainingWorkflow>(runId).result(),
          90_000,
          'the run after `trajflow worker --role all` started',
          async () => `${await pendingWork(client, runId)}\nworker log:\n${tail(resumed!.logFile)}`,
        ),
      );
      expect(result.steps).toBe(STEPS);
      expect(result.version).toBe(STEPS);
      const { trainStep } = await withClient(async (client) => activityAttempts(client.workflow.getHandle(runId)));
      console.log(`train step attempts: ${JSON.stringify(trainStep?.attempts)}`);
    } finally {
      if (cli && isAlive(cli.pid!)) cli.kill('SIGKILL');
      await stopWorker(resumed);
    }
  }, 300_000);

  it('a trainer child started with exitWithParent stops by itself when its parent is SIGKILLed', async () => {
    const configFile = writeConfigFile(testConfig('cli-orphan'));
    const orphanLog = path.join(path.dirname(configFile), 'orphan-trainer.log');
    // The parent: a node process that starts the trainer as `trajflow train --local` does.
    const parent = spawn(
      process.execPath,
      [
        '-e',
        `require(${JSON.stringify(path.join(PROJECT_ROOT, 'dist', 'client', 'workerProcess.js'))}).spawnLoggedWorker('trainer', process.argv[1], process.argv[2], { exitWithParent: true }).then((w) => { console.log('trainer pid ' + w.child.pid); setInterval(() => undefined, 1000); })`,
        configFile,
        orphanLog,
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    let output = '';
    parent.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    try {
      const trainerPid = await waitFor(
        'the trainer started by a parent process',
        async () => Number(/trainer pid (\d+)/.exec(output)?.[1]) || undefined,
        90_000,
      );
      parent.kill('SIGKILL');
      await exitOf(parent);
      const killedAt = Date.now();
      await waitFor(
        `trainer ${trainerPid} gone after its parent was SIGKILLed`,
        async () => !isAlive(trainerPid) || undefined,
        WORKER_STOP_GRACE_MS + 3_000,
        100,
      ).catch((err) => {
        throw new Error(`${(err as Error).message}\n${tail(orphanLog)}`);
      });
      console.log(`orphaned trainer exited ${Date.now() - killedAt} ms after its parent was SIGKILLed`);
      // Shut down by itself (not by the watch's SIGKILL backstop): it was idle.
      expect(readFileSync(orphanLog, 'utf8')).toContain('the process that started this worker is gone');
    } finally {
      if (parent.exitCode === null && parent.signalCode === null) parent.kill('SIGKILL');
      const trainerPid = Number(/trainer pid (\d+)/.exec(output)?.[1]);
      if (trainerPid && isAlive(trainerPid)) process.kill(trainerPid, 'SIGKILL');
    }
  }, 120_000);
});

/**
 * A real-model `trajflow train --local` run after a whole crash (issue 49, item 10): the CLI's
 * whole process group (the CLI with its in-process workers, the model server and the trainer it
 * started, the Python trainer) SIGKILLed in train step 1, then the resume the README documents,
 * `trajflow train CONFIG --local --run-id RUN_ID`: it starts the model server again and the run
 * reaches its last step. And a plain `trajflow worker`, which starts no model server, says in one
 * line which one does not answer and the command that starts it.
 */
import { ChildProcess, spawn } from 'node:child_process';
import { closeSync, mkdirSync, openSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { PROJECT_ROOT } from '../src/paths';
import { freePort } from '../src/ports';
import { runLayout } from '../src/store/runLayout';
import { runningDevServer } from '../src/temporal/devServer';
import type { RunConfig } from '../config/schema';
import { trainingStatusQuery, type trainingWorkflow } from '../workflows/training';
import { pendingWork, tail, waitFor, within } from './support/faultKit';
import { withClient } from './support/harness';
import { realModelConfig } from './support/realModel';
import { writeConfigFile } from './support/workerProcess';

const CLI = path.join(PROJECT_ROOT, 'bin', 'trajflow.js');
const STEPS = 2;

/** `node bin/trajflow.js <args>` as the leader of a process group of its own, output in `logFile`. */
function spawnCliGroup(args: string[], logFile: string): ChildProcess {
  const out = openSync(logFile, 'a');
  const child = spawn(process.execPath, [CLI, ...args], { stdio: ['ignore', out, out], detached: true, env: { ...process.env, TRAJFLOW_LOG_LEVEL: 'info' } });
  closeSync(out);
  return child;
}

/** Live processes (zombies aside) of process group `pgid`. */
function processGroup(pgid: number): number[] {
  const members: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
    } catch {
      continue; // exited while we looked
    }
    // Fields after the command name: state, ppid, pgrp, ...
    const [state, , pgrp] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (Number(pgrp) === pgid && state !== 'Z') members.push(Number(entry));
  }
  return members;
}

function killGroup(child: ChildProcess | undefined): void {
  if (child?.pid && processGroup(child.pid).length > 0) process.kill(-child.pid, 'SIGKILL');
}

function exitOf(child: ChildProcess): Promise<number | string> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve(child.exitCode ?? child.signalCode!);
    child.once('exit', (code, signal) => resolve(code ?? signal!));
  });
}

async function answers(port: number): Promise<boolean> {
  return fetch(`http://127.0.0.1:${port}/health`, { signal: AbortSignal.timeout(1_000) }).then(
    (response) => response.ok,
    () => false,
  );
}

/** `--local` starts a dev server unless its data directory has one running: this adopts the suite's. */
function adoptSuiteServer(config: RunConfig): void {
  const suiteServer = runningDevServer(process.env.TRAJFLOW_TEST_DATA_DIR!);
  mkdirSync(path.join(config.dataDir, 'temporal'), { recursive: true });
  writeFileSync(path.join(config.dataDir, 'temporal', 'temporal-server.json'), JSON.stringify(suiteServer));
}

describe('a real-model --local run after a whole crash', () => {
  it('comes back with `trajflow train CONFIG --local --run-id RUN_ID` and reaches its last step', async () => {
    const port = await freePort();
    // The Python trainer heartbeats every 5 s: the step the crash cut is retried after 15 s.
    const config = realModelConfig('real-resume', port, { heartbeatTimeoutS: 15, steps: STEPS });
    adoptSuiteServer(config);
    const configFile = writeConfigFile(config);
    const runId = 'real-resume-run';
    const layout = runLayout(config.dataDir, runId);
    const cliLog = path.join(config.dataDir, 'cli.log');
    const serverLog = layout.modelServerLog(port);
    const evidence = () => `CLI log:\n${tail(cliLog)}\ntrainer log:\n${tail(layout.trainerLog)}\nserver log:\n${tail(serverLog)}`;
    const args = ['train', configFile, '--local', '--run-id', runId];
    let first: ChildProcess | undefined;
    let resumed: ChildProcess | undefined;
    try {
      first = spawnCliGroup(args, cliLog);
      const firstExit = exitOf(first);
      await withClient((client) =>
        within(
          Promise.race([
            waitFor(
              'train step 1 under way',
              async () =>
                ((
                  await client.workflow
                    .getHandle(runId)
                    .query(trainingStatusQuery)
                    .catch(() => undefined)
                )?.step ?? 0) >= 1 || undefined,
              540_000,
              500,
            ),
            firstExit.then((how) => Promise.reject(new Error(`the CLI exited early (${how})`))),
          ]),
          550_000,
          'the first --local run',
          evidence,
        ),
      );
      const group = processGroup(first.pid!);
      // The CLI, the model server and the trainer worker it started, and the trainer worker's Python trainer.
      expect(group.length).toBeGreaterThanOrEqual(4);
      process.kill(-first.pid!, 'SIGKILL');
      await waitFor('the whole process group gone', async () => processGroup(first!.pid!).length === 0 || undefined, 10_000, 100);
      // vLLM runs in a group of its own under its supervisor, and stops when that dies: gone too, before the resume looks.
      await waitFor('the model server gone', async () => !(await answers(port)) || undefined, 30_000, 200);
      console.log(`SIGKILLed the process group of the --local run (${group.length} processes) in train step 1`);

      resumed = spawnCliGroup(args, cliLog);
      const exit = await within(
        exitOf(resumed),
        420_000,
        'the resumed --local run',
        async () => `${await withClient((c) => pendingWork(c, runId))}\n${evidence()}`,
      );
      expect(exit).toBe(0);
      const result = await withClient((client) => client.workflow.getHandle<typeof trainingWorkflow>(runId).result());
      expect(result.steps).toBe(STEPS);
      expect(result.version).toBe(STEPS);
      // The resume followed the open run, on a model server it started again.
      expect(readFileSync(cliLog, 'utf8')).toContain('following the open run: it resumes on these workers');
      expect(readFileSync(serverLog, 'utf8').match(/starts: model server :\d+/g)).toHaveLength(2);
    } finally {
      killGroup(first);
      killGroup(resumed);
    }
  }, 1_000_000);

  it('a plain worker says which local model server does not answer and the command that starts it', async () => {
    const port = await freePort();
    const config = realModelConfig('real-silent', port);
    const configFile = writeConfigFile(config);
    const log = path.join(config.dataDir, 'worker.log');
    const worker = spawnCliGroup(['worker', '--role', 'inference', '-c', configFile], log);
    try {
      const line = await waitFor(
        'the warning of the silent model server',
        async () =>
          readFileSync(log, 'utf8')
            .split('\n')
            .find((l) => l.includes('does not answer')),
        60_000,
      );
      expect(line).toContain(
        `model server http://127.0.0.1:${port} (sglang) does not answer and this worker does not start it: start it with \`trajflow model-servers -c ${configFile}\``,
      );
    } finally {
      killGroup(worker);
    }
  }, 90_000);
});

/**
 * Two projects on one Temporal server (issue 49, item 9): a run left open by one project is never
 * offered to the workers of another, although both use the same `temporal.taskQueuePrefix` (the
 * default, on a user's machine); the other project's `--local` run names it at start with the
 * commands that resume or end it; it resumes on its own config's workers (`--local --run-id`); a
 * run id of a run open on other queues is refused; `control terminate` ends a run without workers.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import pino from 'pino';
import { listOpenRuns, configFileMemo, terminateRun } from '../client/openRuns';
import { rolloutStartOptions, runRollout } from '../client/runRollout';
import { openWorkflowsQuery } from '../client/runWorkflows';
import type { RunConfig } from '../config/schema';
import { createLogger } from '../src/log';
import { runLayout } from '../src/store/runLayout';
import { runningDevServer } from '../src/temporal/devServer';
import { taskQueuesOf } from '../workers/taskQueues';
import { rolloutWorkflow } from '../workflows/rollout';
import { testConfig, withClient } from './support/harness';
import { writeConfigFile } from './support/workerProcess';

const ROLLOUT = { groups: 2, groupSize: 2, maxConcurrency: 4 };
const SMALL = { rollout: ROLLOUT, sampling: { maxTokens: 4 }, agent: { maxTurns: 2 } };

/** A project's config: its own data directory, the task queue prefix every project on the machine shares. */
function projectConfig(name: string, sharedPrefix: string, overrides: Record<string, Record<string, unknown>> = {}): RunConfig {
  const config = testConfig(name, { ...SMALL, ...overrides });
  return { ...config, temporal: { ...config.temporal, taskQueuePrefix: sharedPrefix } };
}

/** `--local` starts a dev server unless its data directory has one running: this adopts the suite's. */
function adoptSuiteServer(config: RunConfig): void {
  const suiteServer = runningDevServer(process.env.TRAJFLOW_TEST_DATA_DIR!);
  mkdirSync(path.join(config.dataDir, 'temporal'), { recursive: true });
  writeFileSync(path.join(config.dataDir, 'temporal', 'temporal-server.json'), JSON.stringify(suiteServer));
}

/** A logger writing JSON lines to `file`, and the messages it wrote. */
function fileLogger(file: string) {
  const logger = pino({ level: 'info' }, pino.destination({ dest: file, sync: true }));
  const messages = () =>
    readFileSync(file, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((line) => (JSON.parse(line) as { msg: string }).msg);
  return { logger, messages };
}

/** Starts a rollout as `trajflow run` does, with no worker polling: a run left open. */
async function leaveOpen(config: RunConfig, runId: string, configFile: string): Promise<void> {
  await withClient((client) => client.workflow.start(rolloutWorkflow, { ...rolloutStartOptions(config, runId), memo: configFileMemo(configFile) }));
}

/** Whether any worker ever took a workflow task of `workflowId`. */
async function everRan(workflowId: string): Promise<boolean> {
  const history = await withClient((client) => client.workflow.getHandle(workflowId).fetchHistory());
  return (history.events ?? []).some((e) => e.workflowTaskStartedEventAttributes);
}

describe('task queues scoped to what a worker can serve', () => {
  it('are the same for the same project, and differ with its model, plugin modules or data directory', () => {
    const a = testConfig('scope-pure');
    const sameProject = { ...a, rollout: { ...a.rollout, groups: 99 }, trainer: { ...a.trainer, steps: 3 }, run: { ...a.run, name: 'other' } };
    expect(taskQueuesOf(sameProject)).toEqual(taskQueuesOf(a));
    expect(taskQueuesOf(a).workflows).toMatch(new RegExp(`^${a.temporal.taskQueuePrefix}-[0-9a-f]{8}-workflows$`));
    const others = [
      { ...a, model: { ...a.model, seed: a.model.seed + 1 } },
      { ...a, modules: ['/some/plugin.js'] },
      { ...a, dataDir: `${a.dataDir}-elsewhere` },
    ];
    for (const other of others) expect(taskQueuesOf(other).workflows).not.toBe(taskQueuesOf(a).workflows);
    // The data directory as the workers use it: a relative path is the same folder as its absolute one.
    expect(taskQueuesOf({ ...a, dataDir: path.relative(process.cwd(), a.dataDir) })).toEqual(taskQueuesOf(a));
  });

  it("one project's open run is never offered to another's workers; it resumes on its own", async () => {
    const shared = `scope-${process.pid}`;
    // Project A: a run left open on the server, as after `trajflow run` got SIGTERM.
    const projectA = projectConfig('scope-a', shared);
    const fileA = writeConfigFile(projectA);
    const runA = 'scope-a-run';
    await leaveOpen(projectA, runA, fileA);

    // Project B, the same model and plugins, its own data directory: `trajflow run --local`.
    const projectB = projectConfig('scope-b', shared);
    const fileB = writeConfigFile(projectB);
    adoptSuiteServer(projectB);
    const logB = fileLogger(path.join(projectB.dataDir, 'cli.log'));
    const summaryB = await runRollout(projectB, { runId: 'scope-b-run', local: true, configFile: fileB, logger: logB.logger });
    expect(summaryB.trajectories).toBe(ROLLOUT.groups * ROLLOUT.groupSize);

    // B said at start that A is open, and how to resume it or end it.
    const notice = logB.messages().find((m) => m.includes(runA));
    expect(notice).toContain(`rollout run ${runA} (started `);
    expect(notice).toContain(`is still open on task queue ${taskQueuesOf(projectA).workflows}, which no worker of this config polls`);
    expect(notice).toContain(`resume it with \`trajflow run ${fileA} --local --run-id ${runA}\``);
    expect(notice).toContain(`end it with \`trajflow control ${runA} terminate -c ${fileB}\``);
    // B's workers never took a task of A: no workflow task of A ever ran, nothing was refused, and
    // nothing of A reached B's data directory.
    expect(await everRan(runA)).toBe(false);
    expect(logB.messages().filter((m) => m.includes('refusing'))).toEqual([]);
    expect(existsSync(runLayout(projectB.dataDir, runA).dir)).toBe(false);

    // B's config cannot resume A: its workers would never be offered A's tasks.
    await expect(runRollout(projectB, { runId: runA, local: false, logger: createLogger('test') })).rejects.toThrow(
      `run ${runA} is open on task queue ${taskQueuesOf(projectA).workflows}, not on this config's (${taskQueuesOf(projectB).workflows}): ` +
        `it was started with another model, plugin modules or data directory; resume it with the config it was started with (${fileA}), or pick another --run-id`,
    );

    // A resumed as its notice says: `trajflow run A --local --run-id A`, new workers of A's config.
    adoptSuiteServer(projectA);
    const logA = fileLogger(path.join(projectA.dataDir, 'cli.log'));
    const summaryA = await runRollout(projectA, { runId: runA, local: true, configFile: fileA, logger: logA.logger });
    expect(logA.messages()).toContain('following the open run: it resumes on these workers');
    expect(summaryA.trajectories).toBe(ROLLOUT.groups * ROLLOUT.groupSize);
    expect(summaryA.failedTrajectories).toBe(0);
    expect(await withClient(async (client) => (await listOpenRuns(client)).filter((r) => [runA, 'scope-b-run'].includes(r.runId)))).toEqual([]);
  }, 180_000);

  it('`control terminate` ends every open workflow of a run that no worker serves', async () => {
    const config = projectConfig('scope-end', `scope-end-${process.pid}`);
    const runId = 'scope-end-run';
    await leaveOpen(config, runId, writeConfigFile(config));
    await withClient(async (client) => {
      expect((await listOpenRuns(client)).find((r) => r.runId === runId)).toMatchObject({ kind: 'rollout', taskQueue: taskQueuesOf(config).workflows });
      expect(await terminateRun(client, runId, 'test')).toBe(1);
      expect((await client.workflow.count(openWorkflowsQuery(runId))).count).toBe(0);
    });
  }, 60_000);
});

/**
 * Versioned rollouts of worker code (workers/deployment.ts) on the suite's dev server, which
 * needs no extra settings for worker deployments: a training run started while build A is
 * current finishes on A's workers although build B became current meanwhile, and a run started
 * after the switch runs on B. Both builds' workers run in this process; each set reads
 * TRAJFLOW_BUILD_ID when it starts, and each run records the build it was started with in its
 * fingerprint, so an activity that reached the other build would be refused and retried. Then
 * `trajflow deployment set-current`'s refusal of a build without workers, and the switch a
 * `--local` run makes to its own build. With TRAJFLOW_RECORD_HISTORIES=1 it records run A's training workflow for the replay test.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Client } from '@temporalio/client';
import { historyToJSON } from '@temporalio/common/lib/proto-utils';
import { deploymentStatus, setCurrentBuild, useLocalBuild } from '../client/deployment';
import { readLearningCurve } from '../client/learningCurve';
import { rolloutIdOf, trajectoryIdOf } from '../src/core/ids';
import { createLogger } from '../src/log';
import { runLayout } from '../src/store/runLayout';
import { activityAttempts } from '../src/temporal/history';
import { deploymentNameFor, taskQueuePrefixOf } from '../workers/taskQueues';
import { ROLES, ROLLOUT_ROLES, startWorkers, type Role, type RunningWorkers } from '../workers/start';
import { pauseUpdate, resumeUpdate, trainingWorkflow } from '../workflows/training';
import { testConfig, trainingStart, withClient } from './support/harness';

const HISTORY_DIR = path.join(__dirname, 'histories');
const BUILD_A = 'build-a';
const BUILD_B = 'build-b';
const GROUP_SIZE = 2;
/** temporal.api.enums.v1.VersioningBehavior.VERSIONING_BEHAVIOR_PINNED */
const PINNED = 1;

// A prebuilt bundle: two workflow workers in one process need not bundle the workflows twice.
process.env.TRAJFLOW_WORKFLOW_BUNDLE ??= process.env.TRAJFLOW_TEST_WORKFLOW_BUNDLE;

const config = testConfig('deploy', {
  model: { dModel: 32, nHeads: 2, dFF: 64, maxContext: 512 },
  agent: { maxTurns: 3 },
  sampling: { maxTokens: 8 },
  rollout: { groupSize: GROUP_SIZE, maxConcurrency: 4 },
  trainer: { steps: 2, batchGroups: 1 },
});
const prefix = taskQueuePrefixOf(config);
const logger = createLogger('test');
logger.level = 'warn';

/** Workers of `roles`, as build `build`. */
function startBuild(build: string, roles: readonly Role[] = ROLES): Promise<RunningWorkers> {
  process.env.TRAJFLOW_BUILD_ID = build;
  return startWorkers(config, roles, logger);
}

/** A training run's workflows: the training workflow, its controller, the trained groups and their trajectories. */
async function workflowsOf(runId: string): Promise<string[]> {
  const groups = (await readLearningCurve(runLayout(config.dataDir, runId))).flatMap((m) => m.groupIds);
  const trajectories = groups.flatMap((group) => Array.from({ length: GROUP_SIZE }, (_, i) => trajectoryIdOf(group, i)));
  return [runId, rolloutIdOf(runId), ...groups, ...trajectories];
}

/** Which builds completed a workflow's tasks, and whether any activity had to be retried. */
async function servedBy(client: Client, workflowId: string): Promise<{ builds: string[]; retried: string[] }> {
  const handle = client.workflow.getHandle(workflowId);
  const history = await handle.fetchHistory();
  const builds = (history.events ?? []).flatMap((e) => {
    const completed = e.workflowTaskCompletedEventAttributes;
    return completed ? [completed.deploymentVersion?.buildId ?? 'unversioned'] : [];
  });
  const attempts = await activityAttempts(handle);
  const retried = Object.entries(attempts)
    .filter(([, a]) => a.attempts.some((n) => n > 1))
    .map(([type]) => type);
  return { builds: [...new Set(builds)], retried };
}

describe('versioned worker deployments', () => {
  const previousBuild = process.env.TRAJFLOW_BUILD_ID;
  let buildA: RunningWorkers | undefined;
  let buildB: RunningWorkers | undefined;
  let buildC: RunningWorkers | undefined;

  afterAll(async () => {
    await buildA?.shutdown();
    await buildB?.shutdown();
    await buildC?.shutdown();
    if (previousBuild === undefined) delete process.env.TRAJFLOW_BUILD_ID;
    else process.env.TRAJFLOW_BUILD_ID = previousBuild;
  });

  it('finishes a run on the build it started on while a run started after the switch runs on the new build', async () => {
    await withClient(async (client) => {
      buildA = await startBuild(BUILD_A);
      expect(await setCurrentBuild(client, prefix, BUILD_A)).toEqual({ deploymentName: deploymentNameFor(prefix), buildId: BUILD_A });
      const runA = await client.workflow.start(trainingWorkflow, trainingStart(config, 'versioned-run-a'));
      // Held before its first train step, so that most of run A happens after the switch.
      await runA.executeUpdate(pauseUpdate);

      buildB = await startBuild(BUILD_B);
      expect((await setCurrentBuild(client, prefix, BUILD_B)).previousBuildId).toBe(BUILD_A);
      // Run B must not start while some workflow queue partition still routes to build A.
      expect(await deploymentStatus(client, prefix)).toMatchObject({ currentBuildId: BUILD_B, routingInProgress: false });
      const runB = await client.workflow.start(trainingWorkflow, trainingStart(config, 'versioned-run-b'));
      await runA.executeUpdate(resumeUpdate);

      const [resultA, resultB] = await Promise.all([runA.result(), runB.result()]);
      expect([resultA.steps, resultB.steps]).toEqual([2, 2]);
      // Build A's last run is done: its workers may go.
      await buildA.shutdown();
      buildA = undefined;

      for (const [handle, build] of [
        [runA, BUILD_A],
        [runB, BUILD_B],
      ] as const) {
        const versioning = (await handle.describe()).raw.workflowExecutionInfo?.versioningInfo;
        expect(versioning?.behavior).toBe(PINNED);
        expect(versioning?.deploymentVersion).toMatchObject({ deploymentName: deploymentNameFor(prefix), buildId: build });
        const ids = await workflowsOf(handle.workflowId);
        expect(ids.length).toBe(2 + 2 * (1 + GROUP_SIZE));
        for (const id of ids) expect({ id, ...(await servedBy(client, id)) }).toEqual({ id, builds: [build], retried: [] });
      }

      if (process.env.TRAJFLOW_RECORD_HISTORIES) {
        mkdirSync(HISTORY_DIR, { recursive: true });
        writeFileSync(path.join(HISTORY_DIR, `${runA.workflowId}.json`), historyToJSON(await runA.fetchHistory()));
      }
    });
  });

  it('refuses a build no worker runs, and a --local run makes its own build current without a trainer', async () => {
    await withClient(async (client) => {
      await expect(setCurrentBuild(client, prefix, 'build-nowhere', { timeoutMs: 1_000 })).rejects.toThrow(
        /start workers of every role with TRAJFLOW_BUILD_ID=build-nowhere/,
      );
      // Build B, current after the test above, polls the trainer queue; a local rollout's build does not.
      buildC = await startBuild('build-c', ROLLOUT_ROLES);
      await useLocalBuild(client, config, ROLLOUT_ROLES);
      const status = await deploymentStatus(client, prefix);
      expect(status.currentBuildId).toBe('build-c');
      expect(status.versions.map((v) => v.buildId).sort()).toEqual([BUILD_A, BUILD_B, 'build-c']);
      expect(status.versions.find((v) => v.buildId === 'build-c')?.status).toBe('current');
    });
  });
});

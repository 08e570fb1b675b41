/**
 * Workers that do not match a run: a worker of another build refuses the run's tasks with a
 * message naming what differs (visible on the pending activity).
 */
import { compatibilityOf, incompatibilities, ROLE_PARTS } from '../src/core/compatibility';
import { terminateRun } from '../client/openRuns';
import { rolloutInputOf } from '../client/runRollout';
import { groupIdOf, trajectoryIdOf } from '../src/core/ids';
import { createLogger } from '../src/log';
import { startWorkers } from '../workers/start';
import { rolloutWorkflow } from '../workflows/rollout';
import { eventually, testConfig, withClient } from './support/harness';

describe('compatibility fingerprints', () => {
  it('do not depend on key order, and name the parts a role depends on', () => {
    const a = compatibilityOf({ model: { dModel: 64, seed: 0 }, modules: [] }, 'trajflow@1');
    expect(compatibilityOf({ model: { seed: 0, dModel: 64 }, modules: [] }, 'trajflow@1')).toEqual(a);
    const otherModel = compatibilityOf({ model: { dModel: 64, seed: 1 }, modules: [] }, 'trajflow@1');
    expect(incompatibilities(a, otherModel, ROLE_PARTS.inference)).toEqual([`model differs (run ${a.model}, worker ${otherModel.model})`]);
    expect(incompatibilities(a, otherModel, ROLE_PARTS.env)).toEqual([]);
    const otherBuild = compatibilityOf({ model: { dModel: 64, seed: 0 }, modules: ['/x.js'] }, 'trajflow@2');
    expect(incompatibilities(a, otherBuild, ROLE_PARTS.env)).toHaveLength(2);
  });
});

describe('a worker of another build', () => {
  const logger = createLogger('test');
  logger.level = 'error';

  // Workers of another model, modules or data directory poll other queues (test/taskQueueScope.test.ts);
  // the build is not part of the queues, so an unversioned worker of another build still gets the task.
  it('refuses a run another build started, with a message naming the difference', async () => {
    const config = testConfig('mismatch', { rollout: { groups: 1, groupSize: 2, maxConcurrency: 2 }, sampling: { maxTokens: 4 }, agent: { maxTurns: 2 } });
    const runId = 'mismatch-run';
    const input = rolloutInputOf(config, runId);
    const workers = await startWorkers(config, ['workflows', 'inference', 'env'], logger);
    try {
      const refusal = await withClient(async (client) => {
        await client.workflow.start(rolloutWorkflow, {
          workflowId: runId,
          taskQueue: input.taskQueues.workflows,
          args: [{ ...input, compatibility: { ...input.compatibility, code: 'trajflow@0.0.0-older' } }],
        });
        try {
          return await eventually(async () => {
            const description = await client.workflow
              .getHandle(trajectoryIdOf(groupIdOf(runId, 0), 0))
              .describe()
              .catch(() => undefined);
            return description?.raw.pendingActivities?.[0]?.lastFailure?.message ?? undefined;
          }, 60_000);
        } finally {
          await terminateRun(client, runId, 'test over');
        }
      });
      expect(refusal).toMatch(
        /worker .* refuses run mismatch-run: code differs \(run trajflow@0\.0\.0-older, worker [^)]+\)\. Start \w+ workers with the run's config and build/,
      );
    } finally {
      await workers.shutdown();
    }
  }, 120_000);
});

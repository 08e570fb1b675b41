/**
 * Workers that do not match a run: an inference worker started with another model config refuses
 * the run's turns with a message naming what differs (visible on the pending activity), and the
 * run completes once a matching worker polls the queue; nothing is lost meanwhile.
 */
import { compatibilityOf, incompatibilities, ROLE_PARTS } from '../src/core/compatibility';
import { runRollout } from '../client/runRollout';
import { createLogger } from '../src/log';
import { type RunningWorkers, startWorkers } from '../workers/start';
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

describe('a worker started with another config', () => {
  const logger = createLogger('test');
  logger.level = 'error';

  it('refuses the run with a message, and a matching worker then completes it', async () => {
    const run = testConfig('mismatch', { rollout: { groups: 1, groupSize: 2, maxConcurrency: 2 }, sampling: { maxTokens: 4 }, agent: { maxTurns: 2 } });
    const stranger = { ...run, model: { ...run.model, seed: run.model.seed + 1 } };
    const rollout = await startWorkers(run, ['workflows', 'env'], logger);
    let inference: RunningWorkers | undefined;
    try {
      inference = await startWorkers(stranger, ['inference'], logger);
      const finished = runRollout(run, { runId: 'mismatch-run', local: false, logger });
      const refusal = await withClient((client) =>
        eventually(async () => {
          const description = await client.workflow
            .getHandle('mismatch-run.g00000.t000')
            .describe()
            .catch(() => undefined);
          const message = description?.raw.pendingActivities?.[0]?.lastFailure?.message;
          return message ?? undefined;
        }, 60_000),
      );
      expect(refusal).toMatch(
        /inference worker .* refuses run mismatch-run: model differs \(run \w+, worker \w+\)\. Start inference workers with the run's config/,
      );

      await inference.shutdown();
      inference = await startWorkers(run, ['inference'], logger);
      const summary = await finished;
      expect(summary.trajectories).toBe(2);
      expect(summary.failedTrajectories).toBe(0);
    } finally {
      await inference?.shutdown();
      await rollout.shutdown();
    }
  }, 180_000);
});

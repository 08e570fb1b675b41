/**
 * The reproducible mode: with `trainer.maxStaleness: 0` every token of train step k is sampled by
 * version k, the batch is the k-th in admission order, and each turn samples from a stream seeded
 * by the run seed and the trajectory's place in the run. Two runs of one config and seed, under
 * different run ids, on the real dev server, then train on the same tokens: the same per-step
 * metrics (all but timings), the same held-out evaluations and bit-identical published weights.
 */
import type { EvaluationRecord } from '../activities/evaluation';
import { readEvaluations, readLearningCurve } from '../client/learningCurve';
import type { RunConfig } from '../config/schema';
import { createLogger } from '../src/log';
import { loadCheckpoint } from '../src/model/weights';
import type { StepMetrics } from '../src/rl/stepMetrics';
import { CheckpointStore } from '../src/store/checkpointStore';
import { runLayout } from '../src/store/runLayout';
import { trainingWorkflow } from '../workflows/training';
import { startWorkers } from '../workers/start';
import { testConfig, trainingStart, withClient } from './support/harness';

const STEPS = 3;

/** Fields that measure time or machine load, which no seed fixes. */
const TIMINGS = [
  'elapsedS',
  'wallMs',
  'stepMs',
  'forwardBackwardMs',
  'optimizerMs',
  'trainerIdleFraction',
  'engineBusyFraction',
  'envBusyFraction',
  'trajectoryTime',
] as const;

function config(): RunConfig {
  return testConfig('reproducible', {
    model: { dModel: 32, nHeads: 2, dFF: 64, maxContext: 512 },
    agent: { maxTurns: 4 },
    sampling: { maxTokens: 12, temperature: 0.7 },
    rollout: { groupSize: 8, maxConcurrency: 16 },
    trainer: { steps: STEPS, batchGroups: 2, maxStaleness: 0, weightSync: 'turn', formatWarmupSteps: 30 },
    // The format reward varies within a group before any episode is solved: every step has a gradient.
    reward: { formatWeight: 0.5 },
    eval: { everySteps: STEPS, episodes: 4 },
  });
}

interface Trained {
  curve: StepMetrics[];
  evaluations: EvaluationRecord[];
  /** Parameters of version 0 and of the last version. */
  first: Record<string, Float32Array>;
  last: Record<string, Float32Array>;
}

async function train(runId: string): Promise<Trained> {
  const runConfig = config();
  const logger = createLogger('test');
  logger.level = 'warn';
  const workers = await startWorkers(runConfig, ['workflows', 'inference', 'env', 'trainer'], logger);
  try {
    await withClient(async (client) => (await client.workflow.start(trainingWorkflow, trainingStart(runConfig, runId))).result());
  } finally {
    await workers.shutdown();
  }
  const layout = runLayout(runConfig.dataDir, runId);
  const checkpoints = new CheckpointStore(runConfig.dataDir);
  const params = async (version: number) => (await loadCheckpoint(checkpoints.file(runId, version))).weights.params;
  return { curve: await readLearningCurve(layout), evaluations: await readEvaluations(layout), first: await params(0), last: await params(STEPS) };
}

/** A step's metrics without its timings, its group ids without the run id. */
function comparable(m: StepMetrics, runId: string): Record<string, unknown> {
  const rest: Record<string, unknown> = { ...m, groupIds: m.groupIds.map((id) => id.slice(runId.length)) };
  for (const field of TIMINGS) delete rest[field];
  return rest;
}

describe('reproducible training (maxStaleness 0)', () => {
  it('two runs of one config and seed learn the same curve and publish the same weights', async () => {
    const a = await train('repro-a');
    const b = await train('repro-b');

    const differs = (x: Record<string, Float32Array>, y: Record<string, Float32Array>) =>
      Object.keys(x).filter((name) => x[name].some((value, i) => !Object.is(value, y[name][i])));
    expect(a.curve).toHaveLength(STEPS);
    // The weights moved, so the runs are not equal merely for want of a gradient.
    expect(differs(a.first, a.last).length).toBeGreaterThan(0);
    expect(b.curve.map((m) => comparable(m, 'repro-b'))).toEqual(a.curve.map((m) => comparable(m, 'repro-a')));

    const results = (records: EvaluationRecord[]) =>
      records.map(({ version, solved, successRate, meanReturn, validAnswerShare, meanTurns }) => ({
        version,
        solved,
        successRate,
        meanReturn,
        validAnswerShare,
        meanTurns,
      }));
    expect(results(a.evaluations).length).toBeGreaterThan(0);
    expect(results(b.evaluations)).toEqual(results(a.evaluations));

    expect(Object.keys(b.last)).toEqual(Object.keys(a.last));
    expect(differs(a.last, b.last)).toEqual([]);
  });
});

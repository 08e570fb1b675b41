/**
 * A short training run on the real dev server: rollouts stream into the trainer, each step
 * publishes a new weights version that differs from the last, the loss stays finite, eta = 0
 * keeps every trained token on-policy, the KL to version 0 is measured, a group signalled
 * twice is trained once, and groups without mixed outcomes are skipped when asked. The format
 * reward gives groups reward variance (hence a gradient) even before any episode is solved.
 */
import { parseAction } from '../src/agents/frozenlakeAgent';
import { createLogger } from '../src/log';
import { learningRateAt } from '../src/core/learningRate';
import { loadCheckpoint } from '../src/model/weights';
import type { TrainStepOutput } from '../activities/trainer';
import { CheckpointStore } from '../src/store/checkpointStore';
import { readJson } from '../src/store/files';
import { runLayout } from '../src/store/runLayout';
import { readEvaluations, readLearningCurve } from '../client/learningCurve';
import { TrajectoryStore } from '../src/store/trajectoryStore';
import { groupReadySignal } from '../workflows/signals';
import { trainingStatusQuery, trainingWorkflow } from '../workflows/training';
import { startWorkers } from '../workers/start';
import { eventually, testConfig, trainingStart, withClient } from './support/harness';

describe('training run', () => {
  it('publishes a version per step from streamed groups, on-policy with eta = 0, each group once', async () => {
    const config = testConfig('training', {
      model: { dModel: 32, nHeads: 2, dFF: 64, maxContext: 512 },
      agent: { maxTurns: 4 },
      sampling: { maxTokens: 12, temperature: 0.7 },
      rollout: { groupSize: 8, maxConcurrency: 16 },
      trainer: {
        steps: 3,
        batchGroups: 2,
        maxStaleness: 0,
        weightSync: 'turn',
        formatWarmupSteps: 30,
        loss: { beta: 0.05, coverage: { weight: 0.1, floor: 0.5 } },
      },
      reward: { formatWeight: 0.5 },
    });
    const runId = 'training-run';
    const logger = createLogger('test');
    logger.level = 'warn';
    const workers = await startWorkers(config, ['workflows', 'inference', 'env', 'trainer'], logger);
    try {
      const result = await withClient(async (client) => {
        const handle = await client.workflow.start(trainingWorkflow, trainingStart(config, runId));
        // Deliver the first group a second time, as a retried signal would.
        const store = new TrajectoryStore(config.dataDir);
        const first = await eventually(() => store.getGroup(runId, `${runId}.g00000`), 120_000);
        await eventually(async () => {
          const s = await handle.query(trainingStatusQuery);
          return s.groupsConsumed + s.queueDepth > 0 ? s : undefined;
        }, 120_000);
        await handle.signal(groupReadySignal, first);
        return handle.result();
      });

      expect(result.version).toBe(3);
      expect(result.groupsTrained).toBe(6);

      const curve = await readLearningCurve(runLayout(config.dataDir, runId));
      expect(curve.map((m) => m.step)).toEqual([0, 1, 2]);
      console.log(
        curve.map((m) => `step ${m.step}: success ${m.successRate.toFixed(3)}, loss ${m.loss.toFixed(5)}, grad norm ${m.gradNorm.toFixed(4)}`).join('\n'),
      );
      for (const m of curve) {
        expect(Number.isFinite(m.loss)).toBe(true);
        // beta > 0 and coverage: both terms read the reference policy (version 0) in every step.
        expect(Number.isFinite(m.refKl)).toBe(true);
        expect(m.coverage).toBeGreaterThanOrEqual(0);
        // eta = 0: every trained token was sampled by the very version being trained.
        expect(Object.keys(m.stalenessHistogram)).toEqual(['0']);
        // Where the batch's trajectories spent their time: the parts add up, generation is real work.
        const time = m.trajectoryTime!;
        expect(time.generationMs).toBeGreaterThan(0);
        expect(time.environmentMs).toBeGreaterThan(0);
        expect(time.waitingMs).toBeGreaterThanOrEqual(0);
        expect(Math.abs(time.generationMs + time.environmentMs + time.waitingMs - time.totalMs)).toBeLessThanOrEqual(2);
      }

      const trainedGroups: string[] = [];
      for (let step = 0; step < 3; step++) {
        const file = runLayout(config.dataDir, runId).trainStepFile(step);
        trainedGroups.push(...(await readJson<TrainStepOutput>(file))!.metrics.groupIds);
      }
      expect(new Set(trainedGroups).size).toBe(trainedGroups.length);

      expect(curve.every((m) => m.gradNorm > 0)).toBe(true);
      const checkpoints = new CheckpointStore(config.dataDir);
      expect(await checkpoints.latestVersion(runId)).toBe(3);
      for (let version = 1; version <= 3; version++) {
        const before = await loadCheckpoint(checkpoints.file(runId, version - 1));
        const after = await loadCheckpoint(checkpoints.file(runId, version));
        expect(after.policyVersion).toBe(version);
        const moved = Object.keys(after.weights.params).filter((name) => after.weights.params[name].some((x, i) => x !== before.weights.params[name][i]));
        expect(moved.length).toBeGreaterThan(0);
      }
    } finally {
      await workers.shutdown();
    }
  }, 300_000);

  it('skips groups without mixed outcomes: consumed once, no optimizer step, a version each; hole penalties and the format credit of unreadable answers recorded per turn', async () => {
    // Four turns cannot reach G on the classic map (six moves away): no group is ever solved.
    const config = testConfig('training-skip', {
      model: { dModel: 32, nHeads: 2, dFF: 64, maxContext: 512 },
      env: { holePenalty: 0.25 },
      agent: { maxTurns: 4, history: 'none' },
      sampling: { maxTokens: 12, temperature: 1 },
      rollout: { groupSize: 8, maxConcurrency: 16 },
      trainer: { steps: 2, batchGroups: 1, maxStaleness: 0, formatWarmupSteps: 30, groupFilter: 'mixed-outcomes', turnCredit: { weight: 1 } },
      reward: { formatWeight: 0.5 },
    });
    const runId = 'training-skip';
    const logger = createLogger('test');
    logger.level = 'warn';
    const workers = await startWorkers(config, ['workflows', 'inference', 'env', 'trainer'], logger);
    try {
      const result = await withClient((client) => client.workflow.execute(trainingWorkflow, trainingStart(config, runId)));
      expect(result).toMatchObject({ version: 2, steps: 2, groupsTrained: 2 });
      const curve = await readLearningCurve(runLayout(config.dataDir, runId));
      expect(curve.map((m) => m.groupIds)).toEqual([[`${runId}.g00000`], [`${runId}.g00001`]]);
      for (const m of curve) expect(m).toMatchObject({ groupsSkipped: 1, successRate: 0, tokens: 0, sequences: 0, gradNorm: 0 });
      const checkpoints = new CheckpointStore(config.dataDir);
      const versions = await Promise.all([0, 1, 2].map((version) => loadCheckpoint(checkpoints.file(runId, version))));
      expect(versions.map((v) => v.policyVersion)).toEqual([0, 1, 2]);
      for (const later of versions.slice(1)) expect(later.weights.params).toEqual(versions[0].weights.params);

      // The hole penalty is charged to the move into the hole, the format credit (0.5) to each
      // answer that did not parse, and both are kept apart from the return.
      const store = new TrajectoryStore(config.dataDir);
      const summaries = await Promise.all((await store.listTrajectories(runId)).map((id) => store.getTrajectory(runId, id)));
      const holes = summaries.filter((t) => t!.reason === 'episode ended: hole');
      const unreadable = summaries.filter((t) => t!.invalidActions > 0);
      console.log(`${holes.length} of ${summaries.length} trajectories ended in a hole, ${unreadable.length} had unreadable answers`);
      expect(holes.length).toBeGreaterThan(0);
      for (const t of summaries) {
        expect(t!.envReturn).toBe(0);
        const fell = holes.includes(t);
        const turns = await store.getTurns(runId, t!.trajectoryId, t!.turns);
        const expected = turns.map((turn, k) => (!parseAction(turn.text).ok ? 0.5 : fell && k === t!.turns - 1 ? 0.25 : 0));
        expect(t!.turnPenalties).toEqual(fell || t!.invalidActions > 0 ? expected : undefined);
      }
    } finally {
      await workers.shutdown();
    }
  }, 300_000);

  it('bounds staleness by eta = 1 for every trained token, and evaluates versions on held-out maps', async () => {
    const config = testConfig('training-eta1', {
      model: { dModel: 32, nHeads: 2, dFF: 64, maxContext: 512 },
      env: { name: 'frozenlake', map: 'random' },
      agent: { maxTurns: 4, history: 'none' },
      sampling: { maxTokens: 12, temperature: 1 },
      // Many trajectories in flight against small batches: admission, not concurrency, is the limit.
      rollout: { groupSize: 4, maxConcurrency: 16 },
      // A schedule, so that each step's metrics show the rate the workflow handed that step.
      trainer: {
        steps: 4,
        batchGroups: 1,
        maxStaleness: 1,
        weightSync: 'turn',
        formatWarmupSteps: 10,
        learningRateSchedule: { decay: 'cosine', minRatio: 0.1 },
      },
      reward: { formatWeight: 0.5 },
      eval: { everySteps: 2, episodes: 4 },
    });
    const runId = 'training-eta1';
    const logger = createLogger('test');
    logger.level = 'warn';
    const workers = await startWorkers(config, ['workflows', 'inference', 'env', 'trainer'], logger);
    try {
      const result = await withClient((client) => client.workflow.execute(trainingWorkflow, trainingStart(config, runId)));
      expect(result.version).toBe(4);
      const curve = await readLearningCurve(runLayout(config.dataDir, runId));
      console.log(curve.map((m) => `step ${m.step}: staleness ${JSON.stringify(m.stalenessHistogram)}`).join('\n'));
      // Step k trains group k, which was admitted under version >= k - 1.
      expect(curve.map((m) => m.groupIds)).toEqual([0, 1, 2, 3].map((k) => [`${runId}.g0000${k}`]));
      for (const m of curve) expect(m.stalenessMax).toBeLessThanOrEqual(1);
      expect(curve.map((m) => m.learningRate)).toEqual([0, 1, 2, 3].map((step) => learningRateAt(config.trainer, step)));
      expect(new Set(curve.map((m) => m.learningRate)).size).toBe(4);

      const evaluations = await readEvaluations(runLayout(config.dataDir, runId));
      expect(evaluations.map((e) => e.version)).toEqual([0, 2, 4]);
      for (const e of evaluations) {
        expect(e.episodes).toBe(4);
        expect(e.successRate).toBeGreaterThanOrEqual(0);
        expect(e.successRate).toBeLessThanOrEqual(1);
      }
    } finally {
      await workers.shutdown();
    }
  }, 300_000);
});

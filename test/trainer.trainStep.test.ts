/**
 * The trainer's activities in a mock activity context on a hand-made store (no Temporal server):
 * a train step whose batch holds a group with a corrupt stored file (a turn or a trajectory
 * summary) skips that group, logs it at error level with the file and the reason, and counts it as
 * groupsCorrupt while the rest of the batch trains as usual; a resumed run goes on where it
 * stopped; per-turn costs reach the gradient; the all-moves term trains the groups the filter skips
 * where asked.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { MockActivityEnvironment } from '@temporalio/testing';
import { AgentConfigSchema, EnvConfigSchema, ModelConfigSchema, TrainerConfigSchema } from '../config/schema';
import { createTrainerActivities, type TrainStepInput, type TrainStepOutput } from '../activities/trainer';
import type { GroupSummary, TrajectorySummary, TrajectoryTime, TurnRecord } from '../src/core/records';
import { loadCheckpoint } from '../src/model/weights';
import { CheckpointStore } from '../src/store/checkpointStore';
import { runLayout } from '../src/store/runLayout';
import { TrajectoryStore } from '../src/store/trajectoryStore';

const RUN = 'run-1';
const COMPATIBILITY = { code: 'test', model: 'test', modules: 'test' };
const HEALTHY_TIME: TrajectoryTime = { totalMs: 10, generationMs: 6, environmentMs: 3, waitingMs: 1 };
const DAMAGED_TIME: TrajectoryTime = { totalMs: 1000, generationMs: 600, environmentMs: 300, waitingMs: 100 };

/** A pino logger whose records land in `records` (parsed). */
function capturingLogger(records: Record<string, unknown>[]) {
  return pino({ level: 'debug' }, { write: (line: string) => void records.push(JSON.parse(line)) });
}

/**
 * Turn `n` of a trajectory whose every turn samples `completionLength` tokens, all in one context
 * unless every turn starts afresh (an agent that keeps no history).
 */
function turn(trajectoryId: string, n: number, completionLength: number, freshContexts = false): TurnRecord {
  const completionIds = Array.from({ length: completionLength }, (_, i) => 40 + n * 10 + i);
  return {
    trajectoryId,
    turn: n,
    ...(freshContexts ? { startsContext: true } : {}),
    messages: [{ role: 'user', content: `${trajectoryId} observation ${n}` }],
    promptDeltaIds: [10 + n, 11 + n, 12 + n],
    completionIds,
    logprobs: completionIds.map(() => -1.5),
    policyVersions: completionIds.map(() => 0),
    finishReason: 'stop',
    text: `move ${n}`,
    contextTokens: freshContexts ? 3 : 3 + n * (3 + completionLength),
  };
}

function summary(
  groupId: string,
  trajectoryId: string,
  reward: number,
  time: TrajectoryTime,
  priced: Pick<TrajectorySummary, 'turnPenalties' | 'turnAnswerPenalties'> = {},
): TrajectorySummary {
  return {
    ...priced,
    runId: RUN,
    groupId,
    trajectoryId,
    env: 'frozenlake',
    status: 'ended',
    reason: 'done',
    reward,
    envReturn: reward,
    turns: 2,
    envSteps: 2,
    invalidActions: 0,
    completionTokens: 0,
    minPolicyVersion: 0,
    maxPolicyVersion: 0,
    envRestores: 0,
    time,
  };
}

/** How `storeGroup` varies its group; by default one trajectory solved and one not, in one context each. */
interface GroupShape {
  rewards?: [number, number];
  freshContexts?: boolean;
  /** Each trajectory's penalty by turn. */
  turnPenalties?: [number[], number[]];
  /** What every answer would have cost, the same on each turn of both trajectories. */
  answerPenalties?: Record<string, number>;
}

/** A group of two two-turn trajectories, stored turn by turn. */
async function storeGroup(
  store: TrajectoryStore,
  groupId: string,
  completionLength: number,
  time: TrajectoryTime,
  { rewards = [1, 0], freshContexts = false, turnPenalties, answerPenalties }: GroupShape = {},
): Promise<GroupSummary> {
  const trajectoryIds = [`${groupId}.t0`, `${groupId}.t1`];
  for (const [i, trajectoryId] of trajectoryIds.entries()) {
    for (let n = 0; n < 2; n++) await store.putTurnOnce(RUN, turn(trajectoryId, n, completionLength, freshContexts));
    await store.putTrajectory(
      summary(groupId, trajectoryId, rewards[i], time, {
        ...(turnPenalties ? { turnPenalties: turnPenalties[i] } : {}),
        ...(answerPenalties ? { turnAnswerPenalties: [answerPenalties, answerPenalties] } : {}),
      }),
    );
  }
  const solved = rewards.map((r) => r > 0);
  const rewardMean = (rewards[0] + rewards[1]) / 2;
  return {
    runId: RUN,
    groupId,
    trajectoryIds,
    rewards,
    solved,
    turns: [2, 2],
    failed: [],
    rewardMean,
    rewardStd: Math.abs(rewards[0] - rewardMean),
  };
}

function cutShort(file: string): void {
  const bytes = readFileSync(file);
  writeFileSync(file, bytes.subarray(0, Math.floor(bytes.length / 2)));
}

let dataDir: string;
beforeEach(() => {
  dataDir = mkdtempSync(path.join(os.tmpdir(), 'trajflow-corrupt-group-'));
});
afterEach(() => rmSync(dataDir, { recursive: true, force: true }));

/** The trainer activities on `dataDir`, with version 0 of the run published, and their log records. */
async function preparedTrainer(trainerConfig: Record<string, unknown> = {}) {
  const logs: Record<string, unknown>[] = [];
  const store = new TrajectoryStore(dataDir);
  const checkpoints = new CheckpointStore(dataDir);
  const model = ModelConfigSchema.parse({ dModel: 16, nLayers: 1, nHeads: 2, dFF: 32, maxContext: 64 });
  const activities = createTrainerActivities({ model, compatibility: COMPATIBILITY, store, checkpoints, dataDir, logger: capturingLogger(logs) });
  const trainer = TrainerConfigSchema.parse({ learningRate: 1e-2, ...trainerConfig });
  const env = EnvConfigSchema.parse({ name: 'frozenlake' });
  const agent = AgentConfigSchema.parse({});
  const prepare = () => new MockActivityEnvironment().run(activities.preparePolicy, { runId: RUN, trainer, temperature: 1, env, agent });
  await prepare();
  const trainStep = async (groups: GroupSummary[]): Promise<TrainStepOutput> => {
    const input: TrainStepInput = { runId: RUN, step: 0, baseVersion: 0, groups, trainer, temperature: 1 };
    // run() cannot infer the activity's result type from the function it is given.
    return (await new MockActivityEnvironment().run(activities.trainStep, input)) as TrainStepOutput;
  };
  const weightsOf = async (version: number) => (await loadCheckpoint(checkpoints.file(RUN, version))).weights.params;
  return { store, logs, prepare, trainStep, weightsOf };
}

describe('a train step with a corrupt group', () => {
  it('skips the group with a damaged turn, logs it, and trains the healthy group alone', async () => {
    const { store, logs, trainStep, weightsOf } = await preparedTrainer();
    // 3 sampled tokens per turn in the healthy group, 5 in the damaged one: the trained token count tells them apart.
    const healthy = await storeGroup(store, 'g-healthy', 3, HEALTHY_TIME);
    const damaged = await storeGroup(store, 'g-damaged', 5, DAMAGED_TIME);
    const damagedTurn = runLayout(dataDir, RUN).turnFile(damaged.trajectoryIds[1], 1);
    cutShort(damagedTurn);

    const { version, metrics } = await trainStep([damaged, healthy]);

    expect(version).toBe(1);
    expect(metrics).toMatchObject({ groups: 2, groupIds: ['g-damaged', 'g-healthy'], groupsCorrupt: 1, groupsSkipped: 0 });
    // Only the healthy group's two trajectories were trained: one sequence each, 2 turns x 3 tokens.
    expect(metrics.sequences).toBe(2);
    expect(metrics.tokens).toBe(12);
    expect(metrics.stalenessHistogram).toEqual({ 0: 12 });
    expect(metrics.trajectoryTime).toEqual(HEALTHY_TIME);
    expect(metrics.gradNorm).toBeGreaterThan(0);
    const [before, after] = [await weightsOf(0), await weightsOf(1)];
    expect(Object.keys(before).some((name) => !before[name].every((value, i) => value === after[name][i]))).toBe(true);

    const corruptLines = logs.filter((record) => record.msg === 'skipping a group with a corrupt stored file: it is not trained');
    expect(corruptLines).toEqual([
      expect.objectContaining({
        level: 50,
        runId: RUN,
        step: 0,
        groupId: 'g-damaged',
        file: damagedTurn,
        kind: 'record',
        reason: expect.stringMatching(/^truncated: /),
      }),
    ]);
  });

  it('a group whose summary is corrupt is skipped too; with no group left, the same weights are published', async () => {
    const { store, logs, trainStep, weightsOf } = await preparedTrainer();
    const damaged = await storeGroup(store, 'g-damaged', 3, DAMAGED_TIME);
    const damagedSummary = runLayout(dataDir, RUN).trajectorySummaryFile(damaged.trajectoryIds[0]);
    cutShort(damagedSummary);

    const { version, metrics } = await trainStep([damaged]);

    expect(version).toBe(1);
    expect(metrics).toMatchObject({ groupsCorrupt: 1, groupsSkipped: 0, sequences: 0, tokens: 0, gradNorm: 0, stalenessHistogram: {} });
    expect(metrics.trajectoryTime).toBeUndefined();
    const [before, after] = [await weightsOf(0), await weightsOf(1)];
    for (const name of Object.keys(before)) expect(after[name]).toEqual(before[name]);
    expect(logs).toContainEqual(
      expect.objectContaining({ level: 50, groupId: 'g-damaged', file: damagedSummary, reason: expect.stringMatching(/^truncated: /) }),
    );
  });
});

describe('a resumed run', () => {
  it('goes on after the last group its last step took', async () => {
    const { store, prepare, trainStep } = await preparedTrainer();
    const groups = [await storeGroup(store, `${RUN}.g00004`, 3, HEALTHY_TIME), await storeGroup(store, `${RUN}.g00002`, 3, HEALTHY_TIME)];
    await trainStep(groups);
    // Version 1 is published: a new training workflow resumes at step 1, with group 5.
    await expect(prepare()).resolves.toEqual({ version: 1, step: 1, nextGroupIndex: 5 });
  });
});

describe('per-turn costs (trainer.turnCredit.costWeight)', () => {
  // Both trajectories solved (equal rewards: every episode-level advantage is 0), and each turn
  // shows its own trajectory's messages, so no state recurs for the comparison on a cell. Turn 1 of
  // the second trajectory paid 0.2, every other turn nothing: only the cost term can see it.
  const shape: GroupShape = {
    rewards: [1, 1],
    freshContexts: true,
    turnPenalties: [
      [0, 0],
      [0, 0.2],
    ],
  };

  it('trains on the costly turn where no other visit of its state compares it', async () => {
    const { store, trainStep } = await preparedTrainer({ turnCredit: { weight: 1, costWeight: 5 } });
    const { metrics } = await trainStep([await storeGroup(store, 'g-costly', 3, HEALTHY_TIME, shape)]);
    // One sequence per turn: 2 trajectories x 2 turns.
    expect(metrics.sequences).toBe(4);
    expect(metrics.gradNorm).toBeGreaterThan(0);
  });

  it('trains on it with the comparison on a cell off (weight 0) as well', async () => {
    const { store, trainStep } = await preparedTrainer({ turnCredit: { weight: 0, costWeight: 5 } });
    const { metrics } = await trainStep([await storeGroup(store, 'g-costly', 3, HEALTHY_TIME, shape)]);
    expect(metrics.sequences).toBe(4);
    expect(metrics.gradNorm).toBeGreaterThan(0);
  });

  it('without the cost term, the same group moves nothing', async () => {
    const { store, trainStep } = await preparedTrainer({ turnCredit: { weight: 1, costWeight: 0 } });
    const { metrics } = await trainStep([await storeGroup(store, 'g-costly', 3, HEALTHY_TIME, shape)]);
    // Every advantage 0: the trainer does not even run the batch.
    expect(metrics).toMatchObject({ sequences: 0, tokens: 0, gradNorm: 0 });
  });
});

describe('every answer of a turn (trainer.turnCredit.allMoves)', () => {
  // Both trajectories solved and no turn charged: only the prices of the answers not given differ.
  const priced = (answerPenalties: Record<string, number>): GroupShape => ({ rewards: [1, 1], freshContexts: true, answerPenalties });
  const prices = { left: 0.1, down: 0, right: 0, up: 0.1 };

  it('trains on the prices of the answers where nothing else in the group differs', async () => {
    const { store, trainStep } = await preparedTrainer({ turnCredit: { weight: 1, allMoves: { weight: 5 } } });
    const { metrics } = await trainStep([await storeGroup(store, 'g-priced', 3, HEALTHY_TIME, priced(prices))]);
    expect(metrics.sequences).toBe(4);
    expect(metrics.gradNorm).toBeGreaterThan(0);
  });

  it('moves nothing without the term', async () => {
    const { store, trainStep } = await preparedTrainer({ turnCredit: { weight: 1 } });
    expect((await trainStep([await storeGroup(store, 'g-priced', 3, HEALTHY_TIME, priced(prices))])).metrics).toMatchObject({ sequences: 0, gradNorm: 0 });
  });
});

describe('the all-moves term on the groups the filter skips (trainer.turnCredit.allMoves.everyGroup)', () => {
  const prices = { left: 0.1, down: 0, right: 0, up: 0.1 };
  // All solved: the mixed-outcomes filter keeps the group out of the policy gradient.
  const solvedPriced: GroupShape = { rewards: [1, 1], freshContexts: true, answerPenalties: prices };
  const filtered = (everyGroup: boolean) => ({ groupFilter: 'mixed-outcomes', turnCredit: { weight: 0, allMoves: { weight: 5, everyGroup } } });

  it('trains the skipped group turn by turn on its prices alone', async () => {
    const { store, trainStep, weightsOf } = await preparedTrainer(filtered(true));
    const { metrics } = await trainStep([await storeGroup(store, 'g-solved', 3, HEALTHY_TIME, solvedPriced)]);
    expect(metrics).toMatchObject({ groupsSkipped: 1, groupsTargetsOnly: 1, sequences: 4 });
    expect(metrics.gradNorm).toBeGreaterThan(0);
    const [before, after] = [await weightsOf(0), await weightsOf(1)];
    expect(Object.keys(after).some((name) => after[name].some((value, i) => value !== before[name][i]))).toBe(true);
  });

  it('without everyGroup the same group is consumed untrained', async () => {
    const { store, trainStep } = await preparedTrainer(filtered(false));
    const { metrics } = await trainStep([await storeGroup(store, 'g-solved', 3, HEALTHY_TIME, solvedPriced)]);
    expect(metrics).toMatchObject({ groupsSkipped: 1, groupsTargetsOnly: 0, sequences: 0, gradNorm: 0 });
  });

  it('adds the skipped group to a trained one, and leaves out a skipped group with no prices', async () => {
    const { store, trainStep } = await preparedTrainer(filtered(true));
    const mixed = await storeGroup(store, 'g-mixed', 3, HEALTHY_TIME, { freshContexts: true, answerPenalties: prices });
    const unpriced = await storeGroup(store, 'g-unpriced', 3, HEALTHY_TIME, { rewards: [0, 0], freshContexts: true });
    const solved = await storeGroup(store, 'g-solved', 3, HEALTHY_TIME, solvedPriced);
    const { metrics } = await trainStep([mixed, unpriced, solved]);
    // The mixed group's 4 turns, then the solved group's 4; the unpriced group has no targets.
    expect(metrics).toMatchObject({ groups: 3, groupsSkipped: 2, groupsTargetsOnly: 1, sequences: 8 });
  });
});

/**
 * Trainer activities (task queue `<prefix>-trainer`, one worker, one step at a time): prepare
 * policy version 0, and train one batch of groups into version v+1.
 *
 * A train step is idempotent by its step number: its result is written once, after the new
 * checkpoint; a retry (the trainer died mid-step, or its completion was lost) finds the result and
 * returns it, or else trains again from checkpoint v, which is exactly where the lost attempt
 * started. The trainer keeps its weights and optimizer state in memory between steps and reloads
 * them from the checkpoint only when it is not at the step's base version.
 */
import { promises as fs } from 'node:fs';
import { ApplicationFailure, Context } from '@temporalio/activity';
import { usesTurnCredit, type AgentConfig, type EnvConfig, type ModelSettings, type TrainerConfig } from '../config/schema';
import type { Compatibility } from '../src/core/compatibility';
import { INVALID_CONFIG } from '../src/core/failures';
import { passesGroupFilter } from '../src/core/groupStats';
import { parseGroupOrTrajectoryId } from '../src/core/ids';
import type { GroupSummary, TrajectorySummary, TrajectoryTime, TurnRecord } from '../src/core/records';
import { buildTrainingSequences, type TrainingSequence } from '../src/core/sequence';
import type { Logger } from '../src/log';
import { modelConfig } from '../src/model/config';
import { initWeights, loadTrainerCheckpoint, saveTrainerCheckpoint } from '../src/model/weights';
import { computeAdvantages, costAdvantages, priceShares, turnAdvantages } from '../src/rl/advantages';
import { evaluatePolicy, evaluationSeeds } from '../src/rl/evaluate';
import { needsReference, withoutReference, type AnswerTargets } from '../src/rl/loss';
import { encode, SPECIAL_TOKENS } from '../src/core/tokenizer';
import { evaluateOnce, type EvaluateInput, type EvaluationRecord } from './evaluation';
import { withHeartbeat } from './heartbeat';
import { runFormatWarmup } from '../src/rl/formatWarmup';
import { NOTHING_TRAINED, PolicyTrainer, trainerSettings, TrainingSample } from '../src/rl/trainer';
import type { CheckpointStore } from '../src/store/checkpointStore';
import type { TrajectoryStorage } from '../src/store/trajectoryStore';
import { refuseIfIncompatible } from './compatibility';
import { CorruptFileError, readJson, writeJsonAtomically } from '../src/store/files';
import { appendJsonLine } from '../src/store/jsonLines';
import { enginesDir, envWorkersDir, runLayout } from '../src/store/runLayout';
import { summarizeStep, StepMetrics } from '../src/rl/stepMetrics';
import { EngineSnapshot, engineBusyFraction, readEngineSnapshots } from '../src/inference/statsReporter';
import { tracer } from '../src/trace/recorder';
import { busyFraction, readBusySnapshots, type BusySnapshot } from '../src/metrics/busy';

export interface TrainerDeps {
  model: ModelSettings;
  /** This worker's code and config fingerprint. */
  compatibility: Compatibility;
  store: TrajectoryStorage;
  checkpoints: CheckpointStore;
  /** Where step results and metrics.jsonl go (a run's train/ folder, see src/store/runLayout.ts). */
  dataDir: string;
  logger: Logger;
}

export interface PrepareInput {
  runId: string;
  trainer: TrainerConfig;
  temperature: number;
  /** The run's environment and agent: the format warm-up plays their episodes. */
  env: EnvConfig;
  agent: AgentConfig;
  /** The run's code and config; a trainer that differs refuses the task. */
  compatibility?: Compatibility;
}

export interface PreparedPolicy {
  version: number;
  /** Train steps done (a resumed run's). */
  step: number;
  /** The first group no step took; absent where the last step's record is missing (then step x batchGroups). */
  nextGroupIndex?: number;
}

export interface TrainStepInput {
  runId: string;
  step: number;
  baseVersion: number;
  groups: GroupSummary[];
  trainer: TrainerConfig;
  /** Sampling temperature: the trainer scores tokens under the distribution that sampled them. */
  temperature: number;
  /** When the run started (epoch ms), for the learning curve's elapsed time. */
  runStartedAt?: number;
  /** The run's `eval.everySteps` (absent or 0: no evaluations): retention keeps a version due for one until it is done. */
  evalEverySteps?: number;
  /** The run's code and config; a trainer that differs refuses the task. */
  compatibility?: Compatibility;
}

export interface TrainStepOutput {
  version: number;
  metrics: StepMetrics;
}

/**
 * omega x the per-turn advantage of every turn of a group's trajectories (anchor state: the
 * messages the turn showed), or undefined when omega is 0. Checks, whenever either term of
 * per-turn credit is on, that there is one training sequence per turn (`sequenceCounts[i]` per
 * trajectory), so that a turn's advantage is its sequence's.
 */
function weightedTurnCredit(
  turns: readonly TurnRecord[][],
  sequenceCounts: readonly number[],
  rewards: readonly number[],
  summaries: readonly TrajectorySummary[],
  trainer: TrainerConfig,
): number[][] | undefined {
  const { turnCredit } = trainer;
  if (!turnCredit || !usesTurnCredit(trainer)) return undefined;
  if (turns.some((record, i) => sequenceCounts[i] !== record.length)) {
    throw ApplicationFailure.create({
      type: INVALID_CONFIG,
      message: 'trainer.turnCredit needs agent.history: none (one training sequence per turn)',
      nonRetryable: true,
    });
  }
  // The cost term alone (costWeight, applied over the whole batch) needs the check, not the comparison.
  if (turnCredit.weight === 0) return undefined;
  const episodes = turns.map((record, i) => ({
    states: record.map((turn) => JSON.stringify(turn.messages)),
    reward: rewards[i],
    outcomeReward: summaries[i].envReturn,
    turnPenalties: summaries[i].turnPenalties,
  }));
  return turnAdvantages(episodes, trainer.advantage, turnCredit.discount).map((row) => row.map((a) => turnCredit.weight * a));
}

type AllMovesConfig = NonNullable<NonNullable<TrainerConfig['turnCredit']>['allMoves']>;

/**
 * The all-moves term of a turn (`trainer.turnCredit.allMoves`): each answer the environment priced
 * on the turn's state, whole (its text in the embedded tokenizer, which the config restricts this
 * term to, then the end token), with the target weight weight x q(a) (`priceShares`). Undefined
 * where the turn has no prices or the term is off.
 */
function allMovesTargets(answerPenalties: Record<string, number> | undefined, allMoves: AllMovesConfig | undefined): AnswerTargets | undefined {
  if (allMoves === undefined || answerPenalties === undefined) return undefined;
  const answers = Object.keys(answerPenalties);
  if (answers.length === 0) return undefined;
  const shares = priceShares(
    answers.map((answer) => answerPenalties[answer]),
    allMoves.temperature,
  );
  return { answers: answers.map((answer) => [...encode(answer), SPECIAL_TOKENS.end]), weights: shares.map((share) => allMoves.weight * share) };
}

function elapsedSince(runStartedAt: number | undefined, now: number): { elapsedS?: number } {
  return runStartedAt === undefined ? {} : { elapsedS: (now - runStartedAt) / 1000 };
}

/**
 * Staleness of a train batch: how many versions older than the trained version `baseVersion` the
 * policy that sampled each token was (max and token mean), as trace counters.
 */
function traceStaleness(baseVersion: number, tokenVersions: readonly number[]): void {
  if (!tracer.enabled || tokenVersions.length === 0) return;
  let max = 0;
  let sum = 0;
  for (const v of tokenVersions) {
    const lag = baseVersion - v;
    if (lag > max) max = lag;
    sum += lag;
  }
  tracer.counter('staleness', { max, mean: sum / tokenVersions.length });
}

/**
 * Weight publish: the checkpoint (weights + optimizer state) is written to a temporary file,
 * fsynced and renamed into place, which is the moment inference workers can load it.
 */
async function publish(checkpoints: CheckpointStore, runId: string, version: number, trainer: PolicyTrainer): Promise<void> {
  const file = checkpoints.file(runId, version);
  await tracer.span('weights.publish', { version }, () =>
    tracer.span('checkpoint.write', { version }, () => saveTrainerCheckpoint(file, { ...trainer.checkpoint(), policyVersion: version })),
  );
}

/** The trainer kept in memory between steps, and which run and version its weights are. */
class HeldTrainer {
  private held: { runId: string; version: number; trainer: PolicyTrainer } | undefined;

  constructor(private readonly checkpoints: CheckpointStore) {}

  /** The trainer at (runId, version): the one in memory, or one restored from that checkpoint. */
  async at(runId: string, version: number, config: TrainerConfig, temperature: number): Promise<PolicyTrainer> {
    if (this.held?.runId === runId && this.held.version === version) return this.held.trainer;
    this.held?.trainer.dispose();
    this.held = undefined;
    return tracer.span('checkpoint.load', { version }, async () => {
      const checkpoint = await loadTrainerCheckpoint(this.checkpoints.file(runId, version));
      // The reference of the KL penalty and the coverage term is the run's version 0: the policy RL started from.
      const reference = needsReference(config.loss) ? (await loadTrainerCheckpoint(this.checkpoints.file(runId, 0))).weights : undefined;
      const trainer = await PolicyTrainer.create({
        ...trainerSettings(config, temperature),
        weights: checkpoint.weights,
        optimizer: checkpoint.optimizer,
        reference,
      });
      this.held = { runId, version, trainer };
      return trainer;
    });
  }

  /** `trainer` has just published `version`: the next step of the run starts from it. */
  advanced(runId: string, version: number, trainer: PolicyTrainer): void {
    this.held = { runId, version, trainer };
  }
}

/** The counters a step's utilization is measured between: at the previous step's end, and now. */
interface UtilizationMark {
  at: number;
  engines: EngineSnapshot[];
  envWorkers: BusySnapshot[];
}

/**
 * How busy the engines and env workers were, and how idle the trainer, over each step's interval:
 * from the previous step's end (or, for a trainer's first step, its start) to this step's end.
 */
class UtilizationClock {
  private previousEnd: UtilizationMark | undefined;

  constructor(private readonly dataDir: string) {}

  private async mark(at: number): Promise<UtilizationMark> {
    return { at, engines: await readEngineSnapshots(enginesDir(this.dataDir)), envWorkers: await readBusySnapshots(envWorkersDir(this.dataDir)) };
  }

  /** Where this step's interval starts; call when the step starts. */
  async intervalStart(startedAt: number): Promise<UtilizationMark> {
    return this.previousEnd ?? this.mark(startedAt);
  }

  /** The step's fractions, and the step's end becomes the next interval's start. */
  async intervalEnd(since: UtilizationMark, startedAt: number, endedAt: number) {
    const end = await this.mark(endedAt);
    const intervalMs = endedAt - since.at;
    this.previousEnd = end;
    return {
      trainerIdleFraction: intervalMs > 0 ? (startedAt - since.at) / intervalMs : 0,
      engineBusyFraction: engineBusyFraction(since.engines, end.engines),
      envBusyFraction: busyFraction(since.envWorkers, end.envWorkers),
    };
  }
}

/** A step's training samples, and what the step's metrics read of the groups they came from. */
interface LoadedBatch {
  samples: TrainingSample[];
  /** The penalty of the turn each sample is (0 where none, or where a sample is a whole trajectory). */
  turnCosts: number[];
  /** The episode-level advantage of every trained trajectory. */
  trajectoryAdvantages: number[];
  trajectoryTimes: TrajectoryTime[];
  /** The policy version that sampled each trained token. */
  tokenVersions: number[];
  /** Groups consumed by the step but kept out of the policy gradient (see trainer.groupFilter). */
  skipped: GroupSummary[];
  /** Of the skipped groups, those whose turns the all-moves term trained (`allMoves.everyGroup`). */
  targetsOnly: GroupSummary[];
  /** Groups consumed by the step but not trained because one of their stored files is corrupt. */
  corrupt: GroupSummary[];
}

async function requireSummary(store: TrajectoryStorage, runId: string, trajectoryId: string): Promise<TrajectorySummary> {
  const summary = await store.getTrajectory(runId, trajectoryId);
  if (!summary) throw new Error(`trajectory ${trajectoryId} of run ${runId} has no stored summary`);
  return summary;
}

/** A group's stored turns and trajectory summaries, in the order of its trajectories. */
interface GroupRecords {
  turns: TurnRecord[][];
  summaries: TrajectorySummary[];
}

/**
 * The group's stored records, or undefined if one of them is corrupt: then the group is logged at
 * error level, naming the file and the reason. The file's bytes stay as they are, so a retry
 * would fail the same way, and failing the step would end the run over one damaged file.
 */
async function readGroupUnlessCorrupt(
  store: TrajectoryStorage,
  logger: Logger,
  runId: string,
  step: number,
  group: GroupSummary,
): Promise<GroupRecords | undefined> {
  try {
    const turns = await Promise.all(group.trajectoryIds.map((trajectoryId) => store.getTurns(runId, trajectoryId)));
    const summaries = await Promise.all(group.trajectoryIds.map((trajectoryId) => requireSummary(store, runId, trajectoryId)));
    return { turns, summaries };
  } catch (err) {
    if (!(err instanceof CorruptFileError)) throw err;
    logger.error(
      { runId, step, groupId: group.groupId, file: err.file, kind: err.kind, reason: err.reason },
      'skipping a group with a corrupt stored file: it is not trained',
    );
    return undefined;
  }
}

/**
 * Reads the groups' turns from the store and turns them into training samples. Groups the group
 * filter skips, and groups with a corrupt stored file, are consumed without being trained, except
 * that with `allMoves.everyGroup` the skipped groups' turns still train the all-moves term.
 */
async function loadBatch(store: TrajectoryStorage, logger: Logger, { runId, step, groups, trainer }: TrainStepInput): Promise<LoadedBatch> {
  const batch: LoadedBatch = {
    samples: [],
    turnCosts: [],
    trajectoryAdvantages: [],
    trajectoryTimes: [],
    tokenVersions: [],
    skipped: [],
    targetsOnly: [],
    corrupt: [],
  };
  const targetSamples: TrainingSample[] = [];
  for (const group of groups) {
    if (!passesGroupFilter(trainer.groupFilter, group)) {
      batch.skipped.push(group);
      if (!trainer.turnCredit?.allMoves?.everyGroup) continue;
      const records = await readGroupUnlessCorrupt(store, logger, runId, step, group);
      if (!records) continue;
      const priced = allMovesOnlySamples(records, trainer.turnCredit.allMoves);
      if (priced.samples.length === 0) continue;
      batch.targetsOnly.push(group);
      targetSamples.push(...priced.samples);
      batch.tokenVersions.push(...priced.tokenVersions);
      continue;
    }
    const records = await readGroupUnlessCorrupt(store, logger, runId, step, group);
    if (!records) {
      batch.corrupt.push(group);
      continue;
    }
    const { turns, summaries } = records;
    const advantages = computeAdvantages(group.rewards, trainer.advantage);
    batch.trajectoryAdvantages.push(...advantages);
    const sequences = turns.map(buildTrainingSequences);
    const perTurn = weightedTurnCredit(
      turns,
      sequences.map((s) => s.length),
      group.rewards,
      summaries,
      trainer,
    );
    sequences.forEach((trajectorySequences, i) => {
      // Every context of the trajectory (one, unless the agent keeps no history) carries the
      // trajectory's advantage: the episode's outcome credits each of its turns; with
      // per-turn credit each turn's context adds its own.
      trajectorySequences.forEach((sequence, k) => {
        const advantage = advantages[i] + (perTurn?.[i][k] ?? 0);
        const answerTargets = allMovesTargets(summaries[i].turnAnswerPenalties?.[k], trainer.turnCredit?.allMoves);
        batch.samples.push(turnSample(sequence, advantage, answerTargets));
        batch.turnCosts.push(summaries[i].turnPenalties?.[k] ?? 0);
        batch.tokenVersions.push(...sampledVersions(sequence));
      });
      batch.trajectoryTimes.push(summaries[i].time);
    });
  }
  // Each turn's own cost against the whole step's turns (a sample is a turn wherever per-turn credit is on).
  const costWeight = trainer.turnCredit?.costWeight ?? 0;
  if (costWeight > 0) {
    costAdvantages(batch.turnCosts).forEach((advantage, j) => {
      batch.samples[j].advantage += costWeight * advantage;
    });
  }
  // After the costs: those compare the policy-gradient turns among themselves.
  batch.samples.push(...targetSamples);
  return batch;
}

/**
 * A skipped group's turns as samples of the all-moves term alone: advantage 0, so the
 * policy-gradient term gives them no gradient, and each turn's targets from its prices. Turns the
 * environment did not price are left out.
 */
function allMovesOnlySamples({ turns, summaries }: GroupRecords, allMoves: AllMovesConfig): { samples: TrainingSample[]; tokenVersions: number[] } {
  const priced = { samples: [] as TrainingSample[], tokenVersions: [] as number[] };
  turns.forEach((record, i) =>
    buildTrainingSequences(record).forEach((sequence, k) => {
      const answerTargets = allMovesTargets(summaries[i].turnAnswerPenalties?.[k], allMoves);
      if (!answerTargets) return;
      priced.samples.push(turnSample(sequence, 0, answerTargets));
      priced.tokenVersions.push(...sampledVersions(sequence));
    }),
  );
  return priced;
}

function turnSample({ ids, lossMask, behaviourLogprobs }: TrainingSequence, advantage: number, answerTargets: AnswerTargets | undefined): TrainingSample {
  return { ids, lossMask, behaviourLogprobs, advantage, ...(answerTargets ? { answerTargets } : {}) };
}

/** The policy version of each token the policy sampled (the tokens trajflow wrote carry -1). */
function sampledVersions(sequence: TrainingSequence): number[] {
  return sequence.policyVersions.filter((v) => v >= 0);
}

/** Version 0 of a run: the configured initial weights, after the format warm-up if asked. */
async function preparePolicy(
  { model, compatibility, checkpoints, dataDir, logger }: TrainerDeps,
  { runId, trainer: config, temperature, env, agent, ...input }: PrepareInput,
): Promise<PreparedPolicy> {
  refuseIfIncompatible('trainer', runId, input.compatibility, compatibility, logger);
  const latest = await checkpoints.latestVersion(runId);
  // Each step publishes exactly one version, so the latest version is the number of steps done.
  if (latest !== undefined) return { version: latest, step: latest, ...(await groupsTakenBy(dataDir, runId, latest)) };

  const { seed, checkpoint, ...architecture } = model;
  const weights = checkpoint ? (await loadTrainerCheckpoint(checkpoint)).weights : initWeights(modelConfig(architecture), seed);
  // The warm-up is supervised: no term that reads the reference (version 0 does not exist yet).
  const settings = trainerSettings(config, temperature);
  const trainer = await PolicyTrainer.create({ ...settings, loss: withoutReference(settings.loss), weights });
  if (config.formatWarmupSteps > 0) {
    const { losses } = await withHeartbeat(() =>
      runFormatWarmup(trainer, { steps: config.formatWarmupSteps, learningRate: config.formatWarmupLearningRate, seed, env, agent }),
    );
    logger.info({ runId, steps: losses.length, firstLoss: losses[0], lastLoss: losses[losses.length - 1] }, 'format warm-up done');
  }
  trainer.resetOptimizer();
  await publish(checkpoints, runId, 0, trainer);
  trainer.dispose();
  // The first train step restores version 0 from its checkpoint, with the run's full loss.
  return { version: 0, step: 0 };
}

/**
 * Where a resumed run's data goes on: one past the last group the steps before `step` took (with
 * replacement of filtered groups a step takes more than batchGroups), from the last step's record.
 */
async function groupsTakenBy(dataDir: string, runId: string, step: number): Promise<{ nextGroupIndex?: number }> {
  if (step === 0) return { nextGroupIndex: 0 };
  const last = await readJson<TrainStepOutput>(runLayout(dataDir, runId).trainStepFile(step - 1));
  const indices = (last?.metrics.groupIds ?? []).flatMap((id) => parseGroupOrTrajectoryId(id)?.groupIndex ?? []);
  return indices.length ? { nextGroupIndex: Math.max(...indices) + 1 } : {};
}

async function trainStep(deps: TrainerDeps, held: HeldTrainer, utilization: UtilizationClock, input: TrainStepInput): Promise<TrainStepOutput> {
  const { store, checkpoints, dataDir, logger } = deps;
  const { runId, step, baseVersion } = input;
  refuseIfIncompatible('trainer', runId, input.compatibility, deps.compatibility, logger);
  const run = runLayout(dataDir, runId);
  const resultFile = run.trainStepFile(step);
  const done = await readJson<TrainStepOutput>(resultFile);
  if (done) {
    logger.info({ runId, step }, 'train step already done by an earlier attempt; returning it');
    return done;
  }
  const startedAt = Date.now();
  const since = await utilization.intervalStart(startedAt);
  const trainer = await held.at(runId, baseVersion, input.trainer, input.temperature);
  // The new version is about as big as its base: refused now, a full disk costs no training.
  const baseBytes = (await fs.stat(checkpoints.file(runId, baseVersion)).catch(() => undefined))?.size ?? 0;
  await checkpoints.ensureRoomFor(runId, baseBytes);

  const loading = tracer.begin('batch.load', { attrs: { groups: input.groups.length } });
  const batch = await loadBatch(store, logger, input);
  loading.end({ sequences: batch.samples.length });
  traceStaleness(baseVersion, batch.tokenVersions);
  Context.current().heartbeat();
  // Every group skipped (by the filter or as corrupt): no optimizer step, and the same weights are
  // published as the next version (one version per step is what admission and resume count on).
  const train = batch.samples.length > 0 ? trainer.trainBatch(batch.samples, { learningRate: input.trainer.learningRate }) : NOTHING_TRAINED;
  Context.current().heartbeat();
  if (train.updateScale !== undefined && train.updateScale < 1) {
    logger.warn(
      {
        runId,
        step,
        proposedUpdateKl: train.proposedUpdateKl,
        updateKl: train.updateKl,
        updateScale: train.updateScale,
        maxUpdateKl: input.trainer.maxUpdateKl,
      },
      train.updateScale > 0
        ? 'train step shortened: its updates moved the policy past trainer.maxUpdateKl'
        : 'train step undone: no shortening of its updates kept the policy within trainer.maxUpdateKl; publishing the weights it started from',
    );
  }

  const version = baseVersion + 1;
  await publish(checkpoints, runId, version, trainer);
  held.advanced(runId, version, trainer);
  const endedAt = Date.now();
  const metrics = summarizeStep({
    step,
    version,
    groups: input.groups,
    groupsSkipped: batch.skipped.length,
    groupsTargetsOnly: batch.targetsOnly.length,
    groupsCorrupt: batch.corrupt.length,
    advantages: batch.trajectoryAdvantages,
    train,
    tokenVersions: batch.tokenVersions,
    baseVersion,
    learningRate: input.trainer.learningRate,
    wallMs: endedAt - startedAt,
    ...(await utilization.intervalEnd(since, startedAt, endedAt)),
    trajectoryTimes: batch.trajectoryTimes,
  });
  const output: TrainStepOutput = { version, metrics: { ...metrics, ...elapsedSince(input.runStartedAt, endedAt) } };
  // The metrics line first: the result file marks the step done, and a retry that finds it
  // returns at once, so a line written after it could be lost to a crash in between. A retry
  // that trains again appends a second line for the step; readers keep the last.
  await appendJsonLine(run.metricsFile, output.metrics);
  await writeJsonAtomically(resultFile, output);
  await pruneCheckpoints(deps, input);
  logger.info({ runId, step, version, reward: metrics.rewardMean, successRate: metrics.successRate, loss: metrics.loss }, 'train step done');
  return output;
}

/** Deletes the versions `trainer.checkpoints` no longer keeps (none for a workflow started before it existed). */
async function pruneCheckpoints({ checkpoints, dataDir, logger }: TrainerDeps, { runId, trainer, evalEverySteps }: TrainStepInput): Promise<void> {
  // Absent in the input of a workflow started before retention existed: every version is kept.
  const retention = trainer.checkpoints as TrainerConfig['checkpoints'] | undefined;
  if (retention === undefined) return;
  const run = runLayout(dataDir, runId);
  const policy = { ...retention, maxStaleness: trainer.maxStaleness, evalEverySteps: evalEverySteps ?? 0 };
  try {
    const evaluated = (version: number) =>
      fs.access(run.evaluationFile(version)).then(
        () => true,
        () => false,
      );
    const deleted = await checkpoints.prune(runId, policy, evaluated);
    if (deleted.length) logger.info({ runId, versions: deleted }, 'deleted checkpoints retention no longer keeps');
  } catch (err) {
    // The step is done; the next one's pass deletes what this one could not.
    logger.warn({ runId, err }, 'could not delete old checkpoints; the next step tries again');
  }
}

/** The embedded model's evaluation of a published version, on an engine of the trainer's own. */
function evaluate({ compatibility, checkpoints, dataDir, logger }: TrainerDeps, input: EvaluateInput): Promise<EvaluationRecord> {
  return evaluateOnce({ role: 'trainer', compatibility, dataDir, logger }, input, async () =>
    evaluatePolicy({
      weights: (await loadTrainerCheckpoint(checkpoints.file(input.runId, input.version))).weights,
      env: input.env,
      agent: input.agent,
      envSeeds: evaluationSeeds(input.runSeed, input.eval.episodes),
      temperature: input.eval.temperature,
      maxTokens: input.maxTokens,
      maxBatch: input.eval.episodes,
    }),
  );
}

/** The trainer worker's activities; the trainer and the utilization baselines live between calls. */
export function createTrainerActivities(deps: TrainerDeps) {
  const held = new HeldTrainer(deps.checkpoints);
  const utilization = new UtilizationClock(deps.dataDir);
  return {
    preparePolicy: (input: PrepareInput) => preparePolicy(deps, input),
    trainStep: (input: TrainStepInput) => trainStep(deps, held, utilization, input),
    evaluate: (input: EvaluateInput) => evaluate(deps, input),
  };
}

export type TrainerActivities = ReturnType<typeof createTrainerActivities>;

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
import { ApplicationFailure, Context } from '@temporalio/activity';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import type { AgentConfig, EnvConfig, EvalConfig, ModelSettings, TrainerConfig } from '../config/schema';
import type { Compatibility } from '../src/core/compatibility';
import { hasMixedOutcomes } from '../src/core/groupStats';
import type { GroupSummary, TrajectorySummary, TrajectoryTime, TurnRecord } from '../src/core/records';
import { buildTrainingSequences } from '../src/core/sequence';
import type { Logger } from '../src/log';
import { modelConfig } from '../src/model/config';
import { initWeights, loadTrainerCheckpoint, saveTrainerCheckpoint } from '../src/model/weights';
import { computeAdvantages, stepAdvantages } from '../src/rl/advantages';
import { evaluatePolicy, evaluationSeeds, type EvaluationResult } from '../src/rl/evaluate';
import { runFormatWarmup } from '../src/rl/formatWarmup';
import { NOTHING_TRAINED, PolicyTrainer, TrainingSample } from '../src/rl/trainer';
import type { CheckpointStore } from '../src/store/checkpointStore';
import type { TrajectoryStore } from '../src/store/trajectoryStore';
import { refuseIfIncompatible } from './compatibility';
import { readJson, writeAtomically, writeJsonAtomically } from '../src/store/files';
import { summarizeStep, StepMetrics } from '../src/rl/stepMetrics';
import { EngineSnapshot, engineBusyFraction, readEngineSnapshots } from '../src/inference/statsReporter';
import { tracer } from '../src/trace/recorder';
import { busyFraction, envWorkersDir, readBusySnapshots, type BusySnapshot } from '../src/metrics/busy';

export interface TrainerDeps {
  model: ModelSettings;
  /** This worker's code and config fingerprint. */
  compatibility: Compatibility;
  store: TrajectoryStore;
  checkpoints: CheckpointStore;
  /** Where step results and metrics.jsonl go: <dataDir>/runs/<runId>/train/. */
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
  /** The run's code and config; a trainer that differs refuses the task. */
  compatibility?: Compatibility;
}

export interface EvaluateInput {
  runId: string;
  runSeed: number;
  version: number;
  env: EnvConfig;
  agent: AgentConfig;
  maxTokens: number;
  eval: EvalConfig;
  runStartedAt?: number;
  /** The run's code and config; a trainer that differs refuses the task. */
  compatibility?: Compatibility;
}

/** One evaluation, a line of eval.jsonl. */
export interface EvaluationRecord extends EvaluationResult {
  version: number;
  wallMs: number;
  /** Seconds from the start of the run to the end of this evaluation. */
  elapsedS?: number;
}

export interface TrainStepOutput {
  version: number;
  metrics: StepMetrics;
}

/**
 * omega x the step-level advantage of every turn of a group's trajectories (anchor state: the
 * messages the turn showed), or undefined when step-level credit is off. Needs one training
 * sequence per turn (`sequenceCounts[i]` per trajectory), so that a turn's advantage is its sequence's.
 */
function turnAdvantages(
  turns: readonly TurnRecord[][],
  sequenceCounts: readonly number[],
  rewards: readonly number[],
  summaries: readonly (TrajectorySummary | undefined)[],
  trainer: TrainerConfig,
): number[][] | undefined {
  const { stepAdvantage } = trainer;
  if (!stepAdvantage || stepAdvantage.weight === 0) return undefined;
  if (turns.some((record, i) => sequenceCounts[i] !== record.length)) {
    throw ApplicationFailure.create({ type: 'InvalidConfig', message: 'trainer.stepAdvantage needs agent.history: none (one training sequence per turn)', nonRetryable: true });
  }
  const episodes = turns.map((record, i) => ({
    states: record.map((turn) => JSON.stringify(turn.messages)),
    reward: rewards[i],
    // Without its summary a trajectory's whole reward counts as its outcome.
    outcomeReward: summaries[i]?.envReturn ?? rewards[i],
    turnPenalties: summaries[i]?.turnPenalties,
  }));
  return stepAdvantages(episodes, trainer.advantage, stepAdvantage.discount).map((row) => row.map((a) => stepAdvantage.weight * a));
}

function trainDir(dataDir: string, runId: string): string {
  return path.join(dataDir, 'runs', runId, 'train');
}

function stepFile(dataDir: string, runId: string, step: number): string {
  return path.join(trainDir(dataDir, runId), `step-${String(step).padStart(6, '0')}.json`);
}

/** Appends `record` as one JSON line, creating the folder on first use. */
async function appendLine(file: string, record: unknown): Promise<void> {
  await fs.mkdir(path.dirname(file), { recursive: true });
  await fs.appendFile(file, `${JSON.stringify(record)}\n`);
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

function evaluationFile(dataDir: string, runId: string, version: number): string {
  return path.join(trainDir(dataDir, runId), `eval-v${String(version).padStart(6, '0')}.json`);
}


export function createTrainerActivities({ model, compatibility, store, checkpoints, dataDir, logger }: TrainerDeps) {
  /** The trainer in memory and which run/version its weights are. */
  let current: { runId: string; version: number; trainer: PolicyTrainer } | undefined;
  /** When the previous step ended, and the engines' counters then: the idle/busy baselines. */
  let previous: { endedAt: number; engines: EngineSnapshot[]; envWorkers: BusySnapshot[] } | undefined;
  const enginesDir = path.join(dataDir, 'engines');
  const envDir = envWorkersDir(dataDir);

  function trainerSettings(config: TrainerConfig, temperature: number) {
    return {
      learningRate: config.learningRate,
      maxGradNorm: config.maxGradNorm,
      adamEpsilon: config.adamEpsilon,
      optimizerStepsPerBatch: config.optimizerStepsPerBatch,
      loss: { ...config.loss, temperature },
    };
  }

  /**
   * Weight publish: the checkpoint (weights + optimizer state) is written to a temporary file and
   * renamed into place, which is the moment inference workers can load it.
   */
  async function publish(runId: string, version: number, trainer: PolicyTrainer): Promise<void> {
    const file = checkpoints.file(runId, version);
    await tracer.span('weights.publish', { version }, () =>
      writeAtomically(file, (temp) => tracer.span('checkpoint.write', { version }, () => saveTrainerCheckpoint(temp, { ...trainer.checkpoint(), policyVersion: version }))),
    );
  }

  /** The trainer at (runId, version): the one in memory, or one restored from that checkpoint. */
  async function trainerAt(runId: string, version: number, config: TrainerConfig, temperature: number): Promise<PolicyTrainer> {
    if (current?.runId === runId && current.version === version) return current.trainer;
    current?.trainer.dispose();
    current = undefined;
    return tracer.span('checkpoint.load', { version }, async () => {
      const checkpoint = await loadTrainerCheckpoint(checkpoints.file(runId, version));
      // The KL penalty's reference is the run's version 0: the policy RL started from.
      const reference = config.loss.beta > 0 ? (await loadTrainerCheckpoint(checkpoints.file(runId, 0))).weights : undefined;
      const trainer = await PolicyTrainer.create({ ...trainerSettings(config, temperature), weights: checkpoint.weights, optimizer: checkpoint.optimizer, reference });
      current = { runId, version, trainer };
      return trainer;
    });
  }

  /** Version 0 of a run: the configured initial weights, after the format warm-up if asked. */
  async function preparePolicy({ runId, trainer: config, temperature, env, agent, ...input }: PrepareInput): Promise<{ version: number; step: number }> {
    refuseIfIncompatible('trainer', runId, input.compatibility, compatibility, logger);
    const latest = await checkpoints.latestVersion(runId);
    // Each step publishes exactly one version, so the latest version is the number of steps done.
    if (latest !== undefined) return { version: latest, step: latest };

    const { seed, checkpoint, ...architecture } = model;
    const weights = checkpoint ? (await loadTrainerCheckpoint(checkpoint)).weights : initWeights(modelConfig(architecture), seed);
    // The warm-up is supervised: no KL term (its reference, version 0, does not exist yet).
    const settings = trainerSettings(config, temperature);
    const trainer = await PolicyTrainer.create({ ...settings, loss: { ...settings.loss, beta: 0 }, weights });
    if (config.formatWarmupSteps > 0) {
      const heartbeat = setInterval(() => Context.current().heartbeat(), 5_000);
      const { losses } = await runFormatWarmup(trainer, { steps: config.formatWarmupSteps, learningRate: config.formatWarmupLearningRate, seed, env, agent }).finally(() => clearInterval(heartbeat));
      logger.info({ runId, steps: losses.length, firstLoss: losses[0], lastLoss: losses[losses.length - 1] }, 'format warm-up done');
    }
    trainer.resetOptimizer();
    await publish(runId, 0, trainer);
    trainer.dispose();
    // The first train step restores version 0 from its checkpoint, with the run's full loss.
    return { version: 0, step: 0 };
  }

  async function trainStep(input: TrainStepInput): Promise<TrainStepOutput> {
    const { runId, step, baseVersion } = input;
    refuseIfIncompatible('trainer', runId, input.compatibility, compatibility, logger);
    const resultFile = stepFile(dataDir, runId, step);
    const done = await readJson<TrainStepOutput>(resultFile);
    if (done) {
      logger.info({ runId, step }, 'train step already done by an earlier attempt; returning it');
      return done;
    }
    const startedAt = Date.now();
    const since = previous ?? { endedAt: startedAt, engines: await readEngineSnapshots(enginesDir), envWorkers: await readBusySnapshots(envDir) };
    const trainer = await trainerAt(runId, baseVersion, input.trainer, input.temperature);

    const samples: TrainingSample[] = [];
    const trajectoryAdvantages: number[] = [];
    const trajectoryTimes: TrajectoryTime[] = [];
    const tokenVersions: number[] = [];
    const loading = tracer.begin('batch.load', { attrs: { groups: input.groups.length } });
    // Groups consumed by this step but not trained (see trainer.groupFilter).
    const skipped = input.trainer.groupFilter === 'mixed-outcomes' ? input.groups.filter((group) => !hasMixedOutcomes(group)) : [];
    for (const group of input.groups) {
      if (skipped.includes(group)) continue;
      const advantages = computeAdvantages(group.rewards, input.trainer.advantage);
      trajectoryAdvantages.push(...advantages);
      const turns = await Promise.all(group.trajectoryIds.map((trajectoryId) => store.getTurns(runId, trajectoryId)));
      const summaries = await Promise.all(group.trajectoryIds.map((trajectoryId) => store.getTrajectory(runId, trajectoryId)));
      const sequences = turns.map(buildTrainingSequences);
      const perTurn = turnAdvantages(turns, sequences.map((s) => s.length), group.rewards, summaries, input.trainer);
      sequences.forEach((trajectorySequences, i) => {
        // Every context of the trajectory (one, unless the agent keeps no history) carries the
        // trajectory's advantage: the episode's outcome credits each of its turns; with
        // step-level credit each turn's context adds its own.
        trajectorySequences.forEach((sequence, k) => {
          const advantage = advantages[i] + (perTurn?.[i][k] ?? 0);
          samples.push({ ids: sequence.ids, lossMask: sequence.lossMask, behaviourLogprobs: sequence.behaviourLogprobs, advantage });
          tokenVersions.push(...sequence.policyVersions.filter((v) => v >= 0));
        });
        const time = summaries[i]?.time;
        if (time) trajectoryTimes.push(time);
      });
    }
    loading.end({ sequences: samples.length });
    traceStaleness(baseVersion, tokenVersions);
    Context.current().heartbeat();
    // Every group skipped: no optimizer step, and the same weights are published as the next
    // version (one version per step is what admission and resume count on).
    const train = samples.length > 0 ? trainer.trainBatch(samples) : NOTHING_TRAINED;
    Context.current().heartbeat();

    const version = baseVersion + 1;
    await publish(runId, version, trainer);
    current = { runId, version, trainer };
    const endedAt = Date.now();
    const engines = await readEngineSnapshots(enginesDir);
    const envWorkers = await readBusySnapshots(envDir);
    const intervalMs = endedAt - since.endedAt;
    const metrics = summarizeStep({
      step,
      version,
      groups: input.groups,
      groupsSkipped: skipped.length,
      advantages: trajectoryAdvantages,
      train,
      tokenVersions,
      baseVersion,
      wallMs: endedAt - startedAt,
      trainerIdleFraction: intervalMs > 0 ? (startedAt - since.endedAt) / intervalMs : 0,
      engineBusyFraction: engineBusyFraction(since.engines, engines, intervalMs),
      envBusyFraction: busyFraction(since.envWorkers, envWorkers, intervalMs),
      trajectoryTimes,
    });
    previous = { endedAt, engines, envWorkers };
    const output: TrainStepOutput = { version, metrics: { ...metrics, ...elapsedSince(input.runStartedAt, endedAt) } };
    // The metrics line first: the result file marks the step done, and a retry that finds it
    // returns at once, so a line written after it could be lost to a crash in between. A retry
    // that trains again appends a second line for the step; readers keep the last.
    await appendLine(path.join(trainDir(dataDir, runId), 'metrics.jsonl'), output.metrics);
    await writeJsonAtomically(resultFile, output);
    logger.info({ runId, step, version, reward: metrics.rewardMean, successRate: metrics.successRate, loss: metrics.loss }, 'train step done');
    return output;
  }

  /** Evaluates a published version once (idempotent by version, like a train step by its number). */
  async function evaluate(input: EvaluateInput): Promise<EvaluationRecord> {
    const { runId, version } = input;
    refuseIfIncompatible('trainer', runId, input.compatibility, compatibility, logger);
    const resultFile = evaluationFile(dataDir, runId, version);
    const done = await readJson<EvaluationRecord>(resultFile);
    if (done) return done;
    const startedAt = Date.now();
    const { weights } = await loadTrainerCheckpoint(checkpoints.file(runId, version));
    const heartbeat = setInterval(() => Context.current().heartbeat(), 5_000);
    try {
      const result = await evaluatePolicy({
        weights,
        env: input.env,
        agent: input.agent,
        envSeeds: evaluationSeeds(input.runSeed, input.eval.episodes),
        temperature: input.eval.temperature,
        maxTokens: input.maxTokens,
        maxBatch: input.eval.episodes,
      });
      const endedAt = Date.now();
      const record: EvaluationRecord = { version, ...result, wallMs: endedAt - startedAt, ...elapsedSince(input.runStartedAt, endedAt) };
      await appendLine(path.join(trainDir(dataDir, runId), 'eval.jsonl'), record);
      await writeJsonAtomically(resultFile, record);
      logger.info({ runId, version, successRate: record.successRate, validAnswerShare: record.validAnswerShare, wallMs: record.wallMs }, 'evaluation done');
      return record;
    } finally {
      clearInterval(heartbeat);
    }
  }

  return { preparePolicy, trainStep, evaluate };
}

export type TrainerActivities = ReturnType<typeof createTrainerActivities>;

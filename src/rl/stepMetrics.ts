/** The per-step record of a training run (one line of metrics.jsonl). Pure. */
import type { GroupSummary, TrajectoryTime } from '../core/records';
import type { TrainMetrics } from './trainer';

export interface StepMetrics extends TrainMetrics {
  step: number;
  /** Version this step published. */
  version: number;
  groups: number;
  /**
   * The groups this step consumed (trained, skipped by the group filter, or skipped as corrupt), so
   * each can be checked to appear in exactly one step.
   */
  groupIds: string[];
  /**
   * Of those, the groups kept out of the policy gradient: their episodes all solved the task or
   * all failed (`trainer.groupFilter`).
   */
  groupsSkipped: number;
  /**
   * Of the skipped groups, those whose turns the all-moves term trained all the same
   * (`trainer.turnCredit.allMoves.everyGroup`); absent in runs recorded before it existed.
   */
  groupsTargetsOnly?: number;
  /**
   * Of those, the groups consumed but not trained because one of their stored files (a turn or a
   * trajectory summary) is corrupt; each is logged at error level with the file and the reason.
   */
  groupsCorrupt: number;
  trajectories: number;
  rewardMean: number;
  rewardStd: number;
  /** Fraction of trajectories that solved the task. */
  successRate: number;
  advantageMean: number;
  advantageAbsMean: number;
  /** Versions between the trained policy and the one that sampled each token: count by staleness. */
  stalenessHistogram: Record<string, number>;
  stalenessMax: number;
  /** The learning rate this step's optimizer steps used (trainer.learningRateSchedule moves it). */
  learningRate: number;
  /** Wall time of the whole activity (loading data, training, publishing). */
  wallMs: number;
  /** Fraction of the time since the previous step ended that the trainer waited for data. */
  trainerIdleFraction: number;
  /**
   * Fraction of the same interval the inference engines spent in forward passes, over all engines
   * (one busy engine out of two is 0.5), measured between the engines' own snapshots nearest the
   * interval's ends (src/metrics/busy.ts); absent when no engine published newer counters.
   */
  engineBusyFraction?: number;
  /**
   * Fraction of the same interval the env workers had at least one activity running, over all env
   * worker processes, measured the same way; absent when no env worker published newer counters.
   */
  envBusyFraction?: number;
  /**
   * Mean wall time per trajectory of this step's groups, split into generation, environment and
   * waiting (absent when none of them measured it).
   */
  trajectoryTime?: TrajectoryTime;
  /** Seconds from the start of the run to the end of this step (absent in runs that did not say). */
  elapsedS?: number;
  /**
   * Train/inference agreement (the Python trainer of a real model): over the trained tokens that
   * the very version being trained (`logprobComparedVersion`, the step's base version) sampled,
   * the trainer's recomputed logprobs before the update vs the server's behaviour logprobs: how
   * many were compared, the max and mean absolute difference, and the k3 estimate of
   * KL(behaviour || trainer): the implementations' numerical disagreement alone.
   */
  logprobComparedVersion?: number;
  logprobTokensCompared?: number;
  logprobDiffMax?: number;
  logprobDiffMean?: number;
  logprobMismatchKl?: number;
  /**
   * The same comparison on every step, per version that sampled trained tokens of it (ascending):
   * for a version older than the base it adds how far the policy moved since (what `loss.tis` weighs by).
   */
  logprobMismatchByVersion?: { version: number; tokens: number; diffMax: number; diffMean: number; mismatchKl: number }[];
}

const mean = (xs: readonly number[]) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : 0);

export interface StepInputs {
  step: number;
  version: number;
  groups: readonly GroupSummary[];
  groupsSkipped: number;
  groupsTargetsOnly: number;
  groupsCorrupt: number;
  /** Advantage of every trained trajectory. */
  advantages: readonly number[];
  train: TrainMetrics;
  /** Policy version of every trained token. */
  tokenVersions: readonly number[];
  baseVersion: number;
  learningRate: number;
  wallMs: number;
  trainerIdleFraction: number;
  engineBusyFraction?: number;
  envBusyFraction?: number;
  /** The time split of each trained trajectory that recorded one. */
  trajectoryTimes?: readonly TrajectoryTime[];
}

export function summarizeStep(inputs: StepInputs): StepMetrics {
  const rewards = inputs.groups.flatMap((g) => g.rewards);
  const rewardMean = mean(rewards);
  const histogram: Record<string, number> = {};
  let stalenessMax = 0;
  for (const version of inputs.tokenVersions) {
    const staleness = inputs.baseVersion - version;
    histogram[staleness] = (histogram[staleness] ?? 0) + 1;
    stalenessMax = Math.max(stalenessMax, staleness);
  }
  return {
    ...inputs.train,
    step: inputs.step,
    version: inputs.version,
    groups: inputs.groups.length,
    groupIds: inputs.groups.map((g) => g.groupId),
    groupsSkipped: inputs.groupsSkipped,
    groupsTargetsOnly: inputs.groupsTargetsOnly,
    groupsCorrupt: inputs.groupsCorrupt,
    trajectories: rewards.length,
    rewardMean,
    rewardStd: Math.sqrt(mean(rewards.map((r) => (r - rewardMean) ** 2))),
    successRate: mean(inputs.groups.flatMap((group) => group.solved).map((solved) => (solved ? 1 : 0))),
    advantageMean: mean(inputs.advantages),
    advantageAbsMean: mean(inputs.advantages.map(Math.abs)),
    stalenessHistogram: histogram,
    stalenessMax,
    learningRate: inputs.learningRate,
    wallMs: inputs.wallMs,
    trainerIdleFraction: inputs.trainerIdleFraction,
    ...(inputs.engineBusyFraction === undefined ? {} : { engineBusyFraction: inputs.engineBusyFraction }),
    ...(inputs.envBusyFraction === undefined ? {} : { envBusyFraction: inputs.envBusyFraction }),
    ...(inputs.trajectoryTimes?.length ? { trajectoryTime: meanTime(inputs.trajectoryTimes) } : {}),
  };
}

function meanTime(times: readonly TrajectoryTime[]): TrajectoryTime {
  const field = (key: keyof TrajectoryTime) => Math.round(mean(times.map((t) => t[key])));
  return { totalMs: field('totalMs'), generationMs: field('generationMs'), environmentMs: field('environmentMs'), waitingMs: field('waitingMs') };
}

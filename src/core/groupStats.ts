/**
 * Scores a finished group from its trajectory summaries, and says which groups a train step takes.
 * Pure: runs inside the group and training workflows.
 */
import type { TrainerConfig } from '../../config/schema';
import type { GroupSummary, TrajectoryStatus, TrajectorySummary } from './records';

export type TrajectoryOutcome = { ok: true; summary: TrajectorySummary } | { ok: false; trajectoryId: string; reason: string };

/** Whether an episode solved its task: the environment's own return is > 0 (a format reward never counts). */
export function solvedTask(trajectory: Pick<TrajectorySummary, 'envReturn'>): boolean {
  return trajectory.envReturn > 0;
}

/** Whether some of the group's trajectories solved the task and some did not. */
export function hasMixedOutcomes(group: Pick<GroupSummary, 'solved'>): boolean {
  return group.solved.includes(true) && group.solved.includes(false);
}

type BatchRule = Pick<TrainerConfig, 'filteredGroups' | 'maxGroupsPerStep' | 'batchGroups'>;

/** Whether `trainer.groupFilter` lets a train step learn from the group. */
export function passesGroupFilter(filter: TrainerConfig['groupFilter'], group: GroupSummary): boolean {
  return filter === 'none' || hasMixedOutcomes(group);
}

/**
 * With `trainer.filteredGroups: replace`, the most groups one train step looks at for its
 * `batchGroups` passing ones; undefined when dropped groups are skipped, not replaced.
 */
export function replacementSpan(trainer: BatchRule): number | undefined {
  if (trainer.filteredGroups !== 'replace') return undefined;
  return trainer.maxGroupsPerStep ?? 4 * trainer.batchGroups;
}

/**
 * The groups a train step takes, in admission order from `firstIndex` (the first group no earlier
 * step took): `batchGroups` of them, or with replacement, every group up to and including the
 * `batchGroups`-th that passes the filter, at most `replacementSpan` groups. `passes(i)` says
 * whether group i passes, undefined while it has not arrived; `complete` is false while such a
 * group decides the batch, and `indices` then ends at it.
 */
export function nextBatchIndices(
  firstIndex: number,
  trainer: BatchRule,
  passes: (index: number) => boolean | undefined,
): { indices: number[]; complete: boolean } {
  const span = replacementSpan(trainer);
  const indices: number[] = [];
  if (span === undefined) {
    for (let j = 0; j < trainer.batchGroups; j++) indices.push(firstIndex + j);
    return { indices, complete: indices.every((i) => passes(i) !== undefined) };
  }
  let passing = 0;
  for (let i = firstIndex; passing < trainer.batchGroups && indices.length < span; i++) {
    indices.push(i);
    const passed = passes(i);
    if (passed === undefined) return { indices, complete: false };
    if (passed) passing++;
  }
  return { indices, complete: true };
}

/**
 * One past the last group that `steps` train steps, the first taking from `firstIndex`, take at
 * the least, given the outcomes known so far: a group not finished yet is counted as passing (a
 * dropped one only makes a step take more).
 */
export function leastGroupsTaken(firstIndex: number, steps: number, trainer: BatchRule, known: (index: number) => boolean | undefined): number {
  let next = firstIndex;
  for (let k = 0; k < steps; k++) next += nextBatchIndices(next, trainer, (i) => known(i) ?? true).indices.length;
  return next;
}

/**
 * Statuses of trajectories that did not complete through no doing of the policy (the environment,
 * a reward or the agent code failed, or a time limit hit): recorded, never scored or trained on.
 */
const NOT_SCORED: readonly TrajectoryStatus[] = ['failed', 'env_timeout', 'timeout'];

function scored(outcome: TrajectoryOutcome): outcome is { ok: true; summary: TrajectorySummary } {
  return outcome.ok && !NOT_SCORED.includes(outcome.summary.status);
}

export function summarizeGroup(runId: string, groupId: string, outcomes: readonly TrajectoryOutcome[]): GroupSummary {
  const completed = outcomes.flatMap((o) => (scored(o) ? [o.summary] : []));
  const rewards = completed.map((s) => s.reward);
  const mean = rewards.length ? rewards.reduce((a, b) => a + b, 0) / rewards.length : 0;
  // Population std (divide by n), the normaliser GRPO uses for group-relative advantages.
  const variance = rewards.length ? rewards.reduce((a, r) => a + (r - mean) ** 2, 0) / rewards.length : 0;
  return {
    runId,
    groupId,
    trajectoryIds: completed.map((s) => s.trajectoryId),
    rewards,
    solved: completed.map(solvedTask),
    turns: completed.map((s) => s.turns),
    failed: outcomes.filter((o) => !scored(o)).map(failure),
    rewardMean: mean,
    rewardStd: Math.sqrt(variance),
  };
}

function failure(outcome: TrajectoryOutcome): { trajectoryId: string; reason: string } {
  if (!outcome.ok) return { trajectoryId: outcome.trajectoryId, reason: outcome.reason };
  return { trajectoryId: outcome.summary.trajectoryId, reason: `${outcome.summary.status}: ${outcome.summary.reason}` };
}

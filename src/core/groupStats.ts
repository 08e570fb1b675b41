/** Scores a finished group from its trajectory summaries. Pure: runs inside the group workflow. */
import type { GroupSummary, TrajectoryStatus, TrajectorySummary } from './records';

export type TrajectoryOutcome = { ok: true; summary: TrajectorySummary } | { ok: false; trajectoryId: string; reason: string };

/** Whether an episode solved its task: the environment's own return is > 0 (a format reward never counts). */
export function solvedTask(trajectory: Pick<TrajectorySummary, 'envReturn'>): boolean {
  return trajectory.envReturn > 0;
}

/** Whether some of the group's trajectories solved the task and some did not. */
export function hasMixedOutcomes(group: GroupSummary): boolean {
  return group.solved.includes(true) && group.solved.includes(false);
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

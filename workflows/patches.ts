/**
 * Patch ids (Temporal's `patched`): each marks a change to what a workflow schedules, so that a
 * history recorded before the change replays on the old path. An id and its old path can go once
 * no running workflow and no recorded test history (test/histories) predates it.
 */
export const PATCHES = {
  /** The trajectory computes its reward itself (src/core/episode), not in a `computeReward` activity. */
  rewardInWorkflow: 'reward-in-workflow',
} as const;

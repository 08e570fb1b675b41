import { hasMixedOutcomes } from '../src/core/groupStats';
import type { GroupSummary } from '../src/core/records';

const group = (rewards: number[], solved: boolean[]): GroupSummary => ({
  runId: 'r',
  groupId: 'r.g00000',
  trajectoryIds: rewards.map((_, i) => `t${i}`),
  rewards,
  solved,
  turns: rewards.map(() => 1),
  failed: [],
  rewardMean: 0,
  rewardStd: 0,
});

describe('group outcomes', () => {
  it('calls outcomes mixed only when some trajectories solved the task and some did not', () => {
    // Rewards differ (format credit) but outcomes do not: not mixed.
    expect(hasMixedOutcomes(group([0.2, 0.1, 0], [false, false, false]))).toBe(false);
    expect(hasMixedOutcomes(group([1.2, 1.1], [true, true]))).toBe(false);
    expect(hasMixedOutcomes(group([1.2, 0.2], [true, false]))).toBe(true);
    expect(hasMixedOutcomes(group([], []))).toBe(false);
  });
});

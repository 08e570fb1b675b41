import { hasMixedOutcomes, leastGroupsTaken, nextBatchIndices, passesGroupFilter, replacementSpan } from '../src/core/groupStats';
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

describe('the groups a train step takes', () => {
  const mixed = group([1.2, 0.2], [true, false]);
  const allFailed = group([0.2, 0.2], [false, false]);
  const skip = { batchGroups: 2, groupFilter: 'mixed-outcomes', filteredGroups: 'skip' } as const;
  const replace = { ...skip, filteredGroups: 'replace' } as const;
  // Groups 10-17 by index: only 12, 15 and 16 have mixed outcomes; 14 has not arrived yet.
  const outcomes: Record<number, GroupSummary> = { 10: allFailed, 11: allFailed, 12: mixed, 13: allFailed, 15: mixed, 16: mixed, 17: allFailed };
  const passes = (index: number) => outcomes[index] && passesGroupFilter('mixed-outcomes', outcomes[index]);

  it('passes every group without a filter, and only mixed ones with mixed-outcomes', () => {
    expect(passesGroupFilter('none', allFailed)).toBe(true);
    expect(passesGroupFilter('mixed-outcomes', allFailed)).toBe(false);
    expect(passesGroupFilter('mixed-outcomes', mixed)).toBe(true);
  });

  it('takes batchGroups groups in admission order when dropped groups are skipped', () => {
    expect(replacementSpan(skip)).toBeUndefined();
    expect(nextBatchIndices(10, skip, passes)).toEqual({ indices: [10, 11], complete: true });
    expect(nextBatchIndices(13, skip, passes)).toEqual({ indices: [13, 14], complete: false });
  });

  it('takes groups up to the batchGroups-th passing one when dropped groups are replaced', () => {
    expect(replacementSpan(replace)).toBe(8);
    expect(replacementSpan({ ...replace, maxGroupsPerStep: 3 })).toBe(3);
    // 12 passes, 13 does not, 14 decides whether the batch is complete: wait for it.
    expect(nextBatchIndices(10, replace, passes)).toEqual({ indices: [10, 11, 12, 13, 14], complete: false });
    outcomes[14] = allFailed;
    expect(nextBatchIndices(10, replace, passes)).toEqual({ indices: [10, 11, 12, 13, 14, 15], complete: true });
    expect(nextBatchIndices(15, replace, passes)).toEqual({ indices: [15, 16], complete: true });
  });

  it('stops looking at maxGroupsPerStep groups, with fewer passing ones', () => {
    expect(nextBatchIndices(10, { ...replace, maxGroupsPerStep: 3 }, passes)).toEqual({ indices: [10, 11, 12], complete: true });
    expect(nextBatchIndices(10, { ...replace, maxGroupsPerStep: 2 }, passes)).toEqual({ indices: [10, 11], complete: true });
  });

  it('counts the fewest groups later steps can take, a group not finished yet as passing', () => {
    const known = (index: number) => (index in outcomes ? passesGroupFilter('mixed-outcomes', outcomes[index]) : undefined);
    // Step 1 takes 10-15 as known; step 2 from 16 takes 16 (passing) and 17 (dropped) and counts 18 as passing.
    expect(leastGroupsTaken(10, 1, replace, known)).toBe(16);
    expect(leastGroupsTaken(10, 2, replace, known)).toBe(19);
    expect(leastGroupsTaken(10, 2, skip, known)).toBe(14);
    expect(leastGroupsTaken(10, 0, replace, known)).toBe(10);
  });
});

/** Messages between the rollout controller and its groups. */
import { defineQuery, defineSignal } from '@temporalio/workflow';
import type { GroupSummary } from '../src/core/records';

/** Controller -> group: you may start this many more trajectories. */
export const admitSignal = defineSignal<[count: number]>('admit');

/** Group -> controller: one trajectory of mine finished; its slot is free. */
export const slotFreedSignal = defineSignal<[{ groupId: string; trajectoryId: string }]>('slotFreed');

/** Group -> controller: all my trajectories finished and the group is recorded. */
export const groupFinishedSignal = defineSignal<[GroupSummary]>('groupFinished');

export interface RolloutStatus {
  groupsTotal: number;
  groupsStarted: number;
  groupsFinished: number;
  trajectoriesInFlight: number;
  trajectoriesFinished: number;
  trajectoriesFailed: number;
  rewardSum: number;
  successes: number;
  turnsSum: number;
}

export const rolloutStatusQuery = defineQuery<RolloutStatus>('status');

/** Messages between the rollout controller and its groups, and to trajectories of agent programs. */
import type { LanguageModelV4CallOptions, LanguageModelV4GenerateResult } from '@ai-sdk/provider';
import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow';
import type { GroupSummary } from '../src/core/records';

/** Controller -> group: you may start this many more trajectories (with this policy version). */
export const admitSignal = defineSignal<[count: number, policyVersion?: number]>('admit');

/** Group -> controller: one trajectory of mine finished; its slot is free. */
export const slotFreedSignal = defineSignal<[{ groupId: string; trajectoryId: string }]>('slotFreed');

/** Group -> controller: all my trajectories finished and the group is recorded. */
export const groupFinishedSignal = defineSignal<[GroupSummary]>('groupFinished');

/** Controller -> trainer: a finished group, ready to train on. */
export const groupReadySignal = defineSignal<[GroupSummary]>('groupReady');

/** Trainer -> controller: start no new group; finish the open ones, then complete. */
export const stopAdmissionSignal = defineSignal('stopAdmission');

/**
 * Trainer -> controller: weights version `version` is published; with replacement of filtered
 * groups, also how many groups the steps before it took.
 */
export const policyPublishedSignal = defineSignal<[version: number, takenGroups?: number]>('policyPublished');

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
  /** Trajectories ever granted a slot (the staleness bound counts these). */
  trajectoriesAdmitted: number;
  /** Policy version new trajectories sample with; the one awaiting sync, if any. */
  policyVersion: number;
  pendingPolicyVersion?: number;
  /** Times admission was held back by the staleness bound or a weight sync. */
  admissionBlocked: number;
}

export const rolloutStatusQuery = defineQuery<RolloutStatus>('status');

/**
 * OpenAI-compatible endpoint -> trajectory of an agent program: a model call of the program,
 * answered by the trajectory's `invokeModel` activity (workflows/trajectory/agentProgram.ts).
 */
export const agentModelCallUpdate = defineUpdate<LanguageModelV4GenerateResult, [{ modelId: string; options: LanguageModelV4CallOptions }]>('agentModelCall');

/** OpenAI-compatible endpoint -> trajectory of an agent program: the program's own reward for its episode. */
export const agentRewardSignal = defineSignal<[reward: number]>('agentReward');

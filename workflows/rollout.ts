/**
 * The rollout controller (producer): keeps up to `maxConcurrency` trajectories in flight and
 * refills a slot the moment one finishes. There is no batch barrier: a slow trajectory holds one
 * slot, never the others.
 *
 * Groups are its children and report back by signal (addressed to this workflow id, so they
 * reach the latest run), which lets the controller continue-as-new with groups still running.
 */
import {
  allHandlersFinished,
  condition,
  continueAsNew,
  getExternalWorkflowHandle,
  ParentClosePolicy,
  setHandler,
  startChild,
  workflowInfo,
} from '@temporalio/workflow';
import { hashString } from '../src/core/random';
import { SEARCH_ATTRIBUTES } from '../src/temporal/searchAttributes';
import { describeEnv } from '../src/envs/label';
import { groupWorkflow } from './group';
import { admitSignal, groupFinishedSignal, RolloutStatus, rolloutStatusQuery, slotFreedSignal } from './signals';
import { episodeSpec, RolloutInput } from './types';

/** State carried across continue-as-new. */
export interface RolloutState {
  status: RolloutStatus;
  /** Groups started and not yet finished: slots granted and trajectories whose slot came back. */
  openGroups: Record<string, { granted: number; freed: string[] }>;
}

export type RolloutResult = RolloutStatus & { runId: string };

export function groupIdOf(runId: string, groupIndex: number): string {
  return `${runId}.g${String(groupIndex).padStart(5, '0')}`;
}

/** Each group is one prompt: its own seeded environment instance (map and slips). */
export function envSeedOf(runSeed: number, groupIndex: number): number {
  return hashString(`${runSeed}/group/${groupIndex}`);
}

function initialState(input: RolloutInput): RolloutState {
  return {
    status: {
      groupsTotal: input.groups,
      groupsStarted: 0,
      groupsFinished: 0,
      trajectoriesInFlight: 0,
      trajectoriesFinished: 0,
      trajectoriesFailed: 0,
      rewardSum: 0,
      successes: 0,
      turnsSum: 0,
    },
    openGroups: {},
  };
}

export async function rolloutWorkflow(input: RolloutInput, carried?: RolloutState): Promise<RolloutResult> {
  const state = carried ?? initialState(input);
  const { status, openGroups } = state;
  const controllerId = workflowInfo().workflowId;

  // Set by the signal handlers: something changed, so free slots may be handed out again.
  let changed = false;
  setHandler(rolloutStatusQuery, () => status);
  setHandler(slotFreedSignal, ({ groupId, trajectoryId }) => {
    const group = openGroups[groupId];
    // A duplicate delivery, or a late one for a finished group, frees nothing.
    if (!group || group.freed.includes(trajectoryId)) return;
    group.freed.push(trajectoryId);
    status.trajectoriesInFlight--;
    changed = true;
  });
  setHandler(groupFinishedSignal, (summary) => {
    if (!openGroups[summary.groupId]) return;
    delete openGroups[summary.groupId];
    status.groupsFinished++;
    status.trajectoriesFinished += summary.trajectoryIds.length;
    status.trajectoriesFailed += summary.failed.length;
    status.rewardSum += summary.rewards.reduce((a, b) => a + b, 0);
    status.successes += summary.rewards.filter((r) => r > 0).length;
    status.turnsSum += summary.turns.reduce((a, b) => a + b, 0);
    changed = true;
  });

  const freeSlots = () => input.maxConcurrency - status.trajectoriesInFlight;

  /** Hands free slots to open groups first (oldest first), then to new groups. */
  async function admit(): Promise<void> {
    for (const [groupId, group] of Object.entries(openGroups)) {
      const count = Math.min(input.groupSize - group.granted, freeSlots());
      if (count <= 0) continue;
      group.granted += count;
      status.trajectoriesInFlight += count;
      await getExternalWorkflowHandle(groupId).signal(admitSignal, count);
    }
    while (status.groupsStarted < input.groups && freeSlots() > 0) {
      const groupIndex = status.groupsStarted++;
      const groupId = groupIdOf(input.runId, groupIndex);
      const count = Math.min(input.groupSize, freeSlots());
      openGroups[groupId] = { granted: count, freed: [] };
      status.trajectoriesInFlight += count;
      await startChild(groupWorkflow, {
        workflowId: groupId,
        taskQueue: input.taskQueues.workflows,
        parentClosePolicy: ParentClosePolicy.ABANDON,
        args: [{
          ...episodeSpec(input),
          groupId,
          groupIndex,
          groupSize: input.groupSize,
          envSeed: envSeedOf(input.runSeed, groupIndex),
          controllerId,
          initialAdmits: count,
        }],
        typedSearchAttributes: [
          { key: SEARCH_ATTRIBUTES.run, value: input.runId },
          { key: SEARCH_ATTRIBUTES.kind, value: 'group' },
          { key: SEARCH_ATTRIBUTES.env, value: describeEnv(input.env) },
          { key: SEARCH_ATTRIBUTES.group, value: groupId },
        ],
        staticSummary: `group ${groupIndex + 1}/${input.groups}: ${input.groupSize} trajectories of one ${describeEnv(input.env)} prompt`,
      });
    }
  }

  while (status.groupsFinished < input.groups) {
    await admit();
    await condition(() => changed);
    changed = false;
    if (workflowInfo().continueAsNewSuggested) {
      await condition(allHandlersFinished);
      await continueAsNew<typeof rolloutWorkflow>(input, state);
    }
  }
  return { ...status, runId: input.runId };
}

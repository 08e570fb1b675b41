/**
 * The rollout controller (producer): keeps up to `maxConcurrency` trajectories in flight and
 * refills a slot the moment one finishes. There is no batch barrier: a slow trajectory holds one
 * slot, never the others.
 *
 * Groups are its children and report back by signal (addressed to this workflow id, so they
 * reach the latest run), which lets the controller continue-as-new with groups still running.
 *
 * In a training run it is the producer half of the pipeline: it forwards each finished group to
 * the training workflow and admits trajectories within the staleness bound (src/core/admission).
 * With `episode` weight sync, a new version takes effect only once every in-flight episode has
 * finished, and no episode starts meanwhile.
 */
import {
  allHandlersFinished,
  condition,
  continueAsNew,
  getExternalWorkflowHandle,
  log,
  ParentClosePolicy,
  patched,
  setHandler,
  startChild,
  workflowInfo,
} from '@temporalio/workflow';
import { admissionAllowance } from '../src/core/admission';
import { groupIdOf } from '../src/core/ids';
import { solvedOf } from '../src/core/groupStats';
import { hashString } from '../src/core/random';
import { SEARCH_ATTRIBUTES } from '../src/temporal/searchAttributes';
import { counterTracker } from '../src/trace/workflowSinks';
import { groupWorkflow } from './group';
import {
  admitSignal,
  groupFinishedSignal,
  groupReadySignal,
  policyPublishedSignal,
  RolloutStatus,
  rolloutStatusQuery,
  slotFreedSignal,
  stopAdmissionSignal,
} from './signals';
import { episodeSpec, RolloutInput } from './types';

/** State carried across continue-as-new. */
export interface RolloutState {
  status: RolloutStatus;
  /** Groups started and not yet finished: slots granted and trajectories whose slot came back. */
  openGroups: Record<string, { granted: number; freed: string[] }>;
  /** Groups this run may start; lowered by a stop. Absent in state carried by older runs. */
  groupLimit?: number;
}

export type RolloutResult = RolloutStatus & { runId: string };

/** Patch id: slots are granted strictly in group order (see `admit`). */
const ADMISSION_IN_GROUP_ORDER = 'admission-in-group-order';

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
      // A resumed run counts the data already consumed, so the staleness bound lines up with it.
      trajectoriesAdmitted: (input.firstGroupIndex ?? 0) * input.groupSize,
      policyVersion: input.training?.initialVersion ?? 0,
      admissionBlocked: 0,
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
  // After a stop, no new group starts; the open ones still get their slots so none is left half
  // done. The limit is part of the carried state, so a stop survives continue-as-new.
  state.groupLimit ??= input.groups;
  const groupLimit = () => state.groupLimit!;
  setHandler(stopAdmissionSignal, () => {
    state.groupLimit = Math.min(groupLimit(), status.groupsStarted);
    changed = true;
  });
  setHandler(policyPublishedSignal, (version) => {
    if (version <= (status.pendingPolicyVersion ?? status.policyVersion)) return;
    if (input.training?.weightSync === 'episode') status.pendingPolicyVersion = version;
    else status.policyVersion = version;
    changed = true;
  });
  setHandler(groupFinishedSignal, async (summary) => {
    if (!openGroups[summary.groupId]) return;
    delete openGroups[summary.groupId];
    status.groupsFinished++;
    status.trajectoriesFinished += summary.trajectoryIds.length;
    status.trajectoriesFailed += summary.failed.length;
    status.rewardSum += summary.rewards.reduce((a, b) => a + b, 0);
    status.successes += solvedOf(summary).filter(Boolean).length;
    status.turnsSum += summary.turns.reduce((a, b) => a + b, 0);
    changed = true;
    if (!input.training) return;
    try {
      await getExternalWorkflowHandle(input.training.trainerWorkflowId).signal(groupReadySignal, summary);
    } catch (err) {
      // The training run was stopped and has ended: the group stays recorded, untrained.
      log.warn('training workflow has ended; group not handed over', { groupId: summary.groupId, error: String(err) });
    }
  });

  /** Episode-level sync: a pending version takes effect once the last older episode finished. */
  function applyPendingSync(): void {
    if (status.pendingPolicyVersion === undefined || status.trajectoriesInFlight > 0) return;
    status.policyVersion = status.pendingPolicyVersion;
    status.pendingPolicyVersion = undefined;
  }

  /** Slots that may be granted now: concurrency, the staleness bound and any pending sync. */
  const freeSlots = () =>
    admissionAllowance({
      maxConcurrency: input.maxConcurrency,
      inFlight: status.trajectoriesInFlight,
      admitted: status.trajectoriesAdmitted,
      training: input.training && {
        maxStaleness: input.training.maxStaleness,
        version: status.policyVersion,
        batchTrajectories: input.training.batchTrajectories,
        syncPending: status.pendingPolicyVersion !== undefined,
      },
    });

  function grant(count: number): void {
    status.trajectoriesInFlight += count;
    status.trajectoriesAdmitted += count;
  }

  const slotVersion = () => (input.training ? status.policyVersion : undefined);
  const admissionEnd = ((input.firstGroupIndex ?? 0) + input.groups) * input.groupSize;

  async function grantToGroup(groupId: string, count: number): Promise<void> {
    openGroups[groupId].granted += count;
    grant(count);
    await getExternalWorkflowHandle(groupId).signal(admitSignal, count, slotVersion());
  }

  async function startGroup(): Promise<void> {
    const groupIndex = (input.firstGroupIndex ?? 0) + status.groupsStarted++;
    const groupId = groupIdOf(input.runId, groupIndex);
    const count = Math.min(input.groupSize, freeSlots());
    openGroups[groupId] = { granted: count, freed: [] };
    grant(count);
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
        policyVersion: slotVersion(),
        weightSync: input.training?.weightSync,
      }],
      typedSearchAttributes: [
        { key: SEARCH_ATTRIBUTES.run, value: input.runId },
        { key: SEARCH_ATTRIBUTES.kind, value: 'group' },
        { key: SEARCH_ATTRIBUTES.env, value: input.envLabel ?? input.env.name },
        { key: SEARCH_ATTRIBUTES.group, value: groupId },
      ],
      staticSummary: `group ${groupIndex + 1}/${input.groups}: ${input.groupSize} trajectories of one ${input.envLabel ?? input.env.name} prompt`,
    });
  }

  /**
   * Hands out free slots strictly in group order: the oldest group still short of slots gets them,
   * and a new group starts only once every open group has all of its slots. Slots are then granted
   * in trajectory order, which is what makes the staleness bound hold per train batch (the trainer
   * takes groups in the same order). Slots freed while a grant is being sent are handed out by the
   * same loop.
   */
  async function admit(): Promise<void> {
    applyPendingSync();
    if (!patched(ADMISSION_IN_GROUP_ORDER)) return admitBeforeGroupOrder();
    while (freeSlots() > 0) {
      const short = Object.entries(openGroups).find(([, group]) => group.granted < input.groupSize);
      if (short) await grantToGroup(short[0], Math.min(input.groupSize - short[1].granted, freeSlots()));
      else if (status.groupsStarted < groupLimit()) await startGroup();
      else return;
    }
  }

  /**
   * Admission as histories recorded before ADMISSION_IN_GROUP_ORDER did it: one pass over the open
   * groups, then new groups, so slots freed meanwhile could start a new group while an older one
   * was still short. Kept only so those histories replay.
   */
  async function admitBeforeGroupOrder(): Promise<void> {
    for (const [groupId, group] of Object.entries(openGroups)) {
      const count = Math.min(input.groupSize - group.granted, freeSlots());
      if (count > 0) await grantToGroup(groupId, count);
    }
    while (status.groupsStarted < groupLimit() && freeSlots() > 0) await startGroup();
  }

  // Trace counters (no history events: a sink, skipped on replay), recorded when they change.
  const traceCounter = counterTracker();
  while (status.groupsFinished < groupLimit()) {
    await admit();
    const blocked = status.trajectoriesAdmitted < admissionEnd && freeSlots() <= 0 && status.trajectoriesInFlight < input.maxConcurrency;
    if (blocked) status.admissionBlocked++;
    traceCounter(input.runId, 'rollout', {
      in_flight: status.trajectoriesInFlight,
      admission_blocked: blocked ? 1 : 0,
      blocked_total: status.admissionBlocked,
      policy_version: status.policyVersion,
    });
    await condition(() => changed);
    changed = false;
    if (workflowInfo().continueAsNewSuggested) {
      await condition(allHandlersFinished);
      await continueAsNew<typeof rolloutWorkflow>(input, state);
    }
  }
  traceCounter(input.runId, 'rollout', { in_flight: status.trajectoriesInFlight, admission_blocked: 0, blocked_total: status.admissionBlocked, policy_version: status.policyVersion });
  // Groups forwarded to the trainer by the last handlers must leave before this run closes.
  await condition(allHandlersFinished);
  return { ...status, runId: input.runId };
}

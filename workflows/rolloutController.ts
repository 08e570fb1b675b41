/**
 * The rollout controller's state and message handlers (the workflow itself: ./rollout). It counts
 * slots in flight and hands free ones out in group order, starting a group when every open one has
 * all of its slots; groups report freed slots and their end by signal, and in a training run the
 * trainer stops admission and announces published policy versions.
 */
import { getExternalWorkflowHandle, log, ParentClosePolicy, setCurrentDetails, setHandler, startChild, workflowInfo } from '@temporalio/workflow';
import { admissionAllowance } from '../src/core/admission';
import { leastGroupsTaken, passesGroupFilter } from '../src/core/groupStats';
import { groupIdOf, parseGroupOrTrajectoryId } from '../src/core/ids';
import { hashString } from '../src/core/random';
import type { GroupSummary } from '../src/core/records';
import { SEARCH_ATTRIBUTES } from '../src/temporal/searchAttributes';
import { groupDetails, rolloutDetails } from './details';
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
import { episodeSpec, type GroupInput, RolloutInput } from './types';

/** State carried across continue-as-new. */
export interface RolloutState {
  status: RolloutStatus;
  /** Groups started and not yet finished: slots granted and trajectories whose slot came back. */
  openGroups: Record<string, { granted: number; freed: string[] }>;
  /** Groups this run may start; lowered by a stop, so a stop survives continue-as-new. */
  groupLimit: number;
  /** With replacement of filtered groups (`input.training.replacement`): see GroupFilterOutcomes. */
  replacement?: GroupFilterOutcomes;
}

/** What the staleness bound counts from when steps replace the groups their filter drops. */
export interface GroupFilterOutcomes {
  /** Groups the steps before the current policy version took, and before the pending one. */
  takenGroups: number;
  pendingTakenGroups?: number;
  /** Whether each finished group at or after `takenGroups` passed the filter, by group index. */
  passed: Record<number, boolean>;
}

/** Each group is one prompt: its own seeded environment instance (map and slips). */
export function envSeedOf(runSeed: number, groupIndex: number): number {
  return hashString(`${runSeed}/group/${groupIndex}`);
}

export function initialRolloutState(input: RolloutInput): RolloutState {
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
    groupLimit: input.groups,
    ...(input.training?.replacement && { replacement: { takenGroups: input.training.replacement.takenGroups, passed: {} } }),
  };
}

export class RolloutController {
  /** Set by the message handlers: something changed, so free slots may be handed out again. */
  changed = false;
  private readonly firstGroupIndex: number;

  constructor(
    private readonly input: RolloutInput,
    readonly state: RolloutState,
  ) {
    this.firstGroupIndex = input.firstGroupIndex ?? 0;
  }

  get status(): RolloutStatus {
    return this.state.status;
  }

  /** Every group this run may start has finished. */
  get done(): boolean {
    return this.status.groupsFinished >= this.state.groupLimit;
  }

  setHandlers(): void {
    setHandler(rolloutStatusQuery, () => this.status);
    setHandler(slotFreedSignal, ({ groupId, trajectoryId }) => this.slotFreed(groupId, trajectoryId));
    setHandler(stopAdmissionSignal, () => this.stopAdmission());
    setHandler(policyPublishedSignal, (version, takenGroups) => this.policyPublished(version, takenGroups));
    setHandler(groupFinishedSignal, (summary) => this.groupFinished(summary));
  }

  private slotFreed(groupId: string, trajectoryId: string): void {
    const group = this.state.openGroups[groupId];
    // A duplicate delivery, or a late one for a finished group, frees nothing.
    if (!group || group.freed.includes(trajectoryId)) return;
    group.freed.push(trajectoryId);
    this.status.trajectoriesInFlight--;
    this.changed = true;
  }

  /** No new group starts; the open ones still get their slots so none is left half done. */
  private stopAdmission(): void {
    this.state.groupLimit = Math.min(this.state.groupLimit, this.status.groupsStarted);
    this.changed = true;
  }

  private policyPublished(version: number, takenGroups: number | undefined): void {
    const { status, state } = this;
    if (version <= (status.pendingPolicyVersion ?? status.policyVersion)) return;
    if (this.input.training?.weightSync === 'episode') {
      status.pendingPolicyVersion = version;
      if (state.replacement && takenGroups !== undefined) state.replacement.pendingTakenGroups = takenGroups;
    } else {
      status.policyVersion = version;
      if (takenGroups !== undefined) this.groupsTaken(takenGroups);
    }
    this.changed = true;
  }

  /** The steps before the current policy version took groups up to `takenGroups`: their outcomes are no longer needed. */
  private groupsTaken(takenGroups: number): void {
    const { replacement } = this.state;
    if (!replacement) return;
    replacement.takenGroups = takenGroups;
    for (const index of Object.keys(replacement.passed).map(Number)) if (index < takenGroups) delete replacement.passed[index];
  }

  private async groupFinished(summary: GroupSummary): Promise<void> {
    const { status, input, state } = this;
    if (!state.openGroups[summary.groupId]) return;
    delete state.openGroups[summary.groupId];
    const replacement = input.training?.replacement;
    const index = parseGroupOrTrajectoryId(summary.groupId)?.groupIndex;
    if (replacement && state.replacement && index !== undefined && index >= state.replacement.takenGroups) {
      state.replacement.passed[index] = passesGroupFilter(replacement.rule.groupFilter, summary);
    }
    status.groupsFinished++;
    status.trajectoriesFinished += summary.trajectoryIds.length;
    status.trajectoriesFailed += summary.failed.length;
    status.rewardSum += summary.rewards.reduce((a, b) => a + b, 0);
    status.successes += summary.solved.filter(Boolean).length;
    status.turnsSum += summary.turns.reduce((a, b) => a + b, 0);
    this.changed = true;
    if (!input.training) return;
    try {
      await getExternalWorkflowHandle(input.training.trainerWorkflowId).signal(groupReadySignal, summary);
    } catch (err) {
      // The training run has ended (it stops admission first): the group stays recorded, untrained.
      log.info('training workflow has ended; group not handed over', { groupId: summary.groupId, error: String(err) });
    }
  }

  /**
   * Hands out free slots strictly in group order: the oldest group still short of slots gets them,
   * and a new group starts only once every open group has all of its slots. Slots are then granted
   * in trajectory order, which is what makes the staleness bound hold per train batch (the trainer
   * takes groups in the same order). Slots freed while the grants are being sent are handed out by
   * the next call.
   */
  async admit(): Promise<void> {
    const { groupSize } = this.input;
    this.applyPendingSync();
    // The state is updated as each grant is decided and the signals and starts go out together,
    // in one workflow task. A group started here took every free slot it could, so none of its
    // grants can be among them (it would not exist yet to receive one).
    const sends: Promise<void>[] = [];
    while (this.freeSlots() > 0) {
      const short = Object.entries(this.state.openGroups).find(([, group]) => group.granted < groupSize);
      if (short) sends.push(this.grantToGroup(short[0], Math.min(groupSize - short[1].granted, this.freeSlots())));
      else if (this.status.groupsStarted < this.state.groupLimit) sends.push(this.startGroup());
      else break;
    }
    await Promise.all(sends);
  }

  /** Shows the controller's progress as its current details in the Web UI. */
  showDetails(): void {
    setCurrentDetails(rolloutDetails({ status: this.status, training: this.input.training }));
  }

  /** Whether admission is held back (by the staleness bound or a weight sync) with slots to spare; counted when so. */
  countBlocked(): boolean {
    const { status, input } = this;
    const admissionEnd = (this.firstGroupIndex + input.groups) * input.groupSize;
    const blocked = status.trajectoriesAdmitted < admissionEnd && this.freeSlots() <= 0 && status.trajectoriesInFlight < input.maxConcurrency;
    if (blocked) status.admissionBlocked++;
    return blocked;
  }

  /** Episode-level sync: a pending version takes effect once the last older episode finished. */
  private applyPendingSync(): void {
    const { status } = this;
    if (status.pendingPolicyVersion === undefined || status.trajectoriesInFlight > 0) return;
    status.policyVersion = status.pendingPolicyVersion;
    status.pendingPolicyVersion = undefined;
    const pendingTaken = this.state.replacement?.pendingTakenGroups;
    if (pendingTaken !== undefined) {
      this.groupsTaken(pendingTaken);
      delete this.state.replacement!.pendingTakenGroups;
    }
  }

  /** Slots that may be granted now: concurrency, the staleness bound and any pending sync. */
  private freeSlots(): number {
    const { status, input } = this;
    const leastTaken = this.leastTakenGroups();
    return admissionAllowance({
      maxConcurrency: input.maxConcurrency,
      inFlight: status.trajectoriesInFlight,
      admitted: status.trajectoriesAdmitted,
      training: input.training && {
        maxStaleness: input.training.maxStaleness,
        version: status.policyVersion,
        batchTrajectories: input.training.batchTrajectories,
        leastTakenTrajectories: leastTaken === undefined ? undefined : leastTaken * input.groupSize,
        syncPending: status.pendingPolicyVersion !== undefined,
      },
    });
  }

  /**
   * With replacement of filtered groups: one past the last group that the steps from the current
   * policy version through eta more (none past the run's last) take at the least
   * (src/core/admission).
   */
  private leastTakenGroups(): number | undefined {
    const replacement = this.input.training?.replacement;
    const outcomes = this.state.replacement;
    if (!replacement || !outcomes) return undefined;
    const steps = Math.min(this.input.training!.maxStaleness + 1, replacement.finalVersion - this.status.policyVersion);
    return leastGroupsTaken(outcomes.takenGroups, Math.max(0, steps), replacement.rule, (index) => outcomes.passed[index]);
  }

  private grant(count: number): void {
    this.status.trajectoriesInFlight += count;
    this.status.trajectoriesAdmitted += count;
  }

  /** The policy version new slots sample with (training runs only). */
  private slotVersion(): number | undefined {
    return this.input.training ? this.status.policyVersion : undefined;
  }

  private async grantToGroup(groupId: string, count: number): Promise<void> {
    this.state.openGroups[groupId].granted += count;
    this.grant(count);
    await getExternalWorkflowHandle(groupId).signal(admitSignal, count, this.slotVersion());
  }

  private async startGroup(): Promise<void> {
    const { input } = this;
    const groupIndex = this.firstGroupIndex + this.status.groupsStarted++;
    const groupId = groupIdOf(input.runId, groupIndex);
    const count = Math.min(input.groupSize, this.freeSlots());
    this.state.openGroups[groupId] = { granted: count, freed: [] };
    this.grant(count);
    const group: GroupInput = {
      ...episodeSpec(input),
      groupId,
      groupIndex,
      groupSize: input.groupSize,
      envSeed: envSeedOf(input.runSeed, groupIndex),
      controllerId: workflowInfo().workflowId,
      initialAdmits: count,
      policyVersion: this.slotVersion(),
      weightSync: input.training?.weightSync,
    };
    await startChild(groupWorkflow, {
      workflowId: groupId,
      taskQueue: input.taskQueues.workflows,
      parentClosePolicy: ParentClosePolicy.ABANDON,
      args: [group],
      typedSearchAttributes: [
        { key: SEARCH_ATTRIBUTES.run, value: input.runId },
        { key: SEARCH_ATTRIBUTES.kind, value: 'group' },
        { key: SEARCH_ATTRIBUTES.env, value: input.envLabel },
        { key: SEARCH_ATTRIBUTES.group, value: groupId },
      ],
      staticSummary: `group ${groupIndex + 1}/${input.groups}: ${input.groupSize} trajectories of one ${input.envLabel} prompt`,
      staticDetails: groupDetails(group),
    });
  }
}

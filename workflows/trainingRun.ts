/**
 * The training workflow's state and message handlers (the workflow itself: ./training): the queue
 * of groups handed over by the rollout controller, the batch due next, and the train step,
 * evaluation and controller messages that move the run on.
 *
 * Exactly once: a group is queued at most once (duplicate signals are ignored), leaves the queue
 * only into a train step, and a train step is an idempotent activity keyed by its step number, so
 * retries and continue-as-new never train a group twice or skip one.
 */
import {
  type ActivityInterfaceFor,
  getExternalWorkflowHandle,
  log,
  ParentClosePolicy,
  proxyActivities,
  setCurrentDetails,
  setHandler,
  startChild,
  workflowInfo,
} from '@temporalio/workflow';
import type { EvaluationActivities, EvaluationRecord } from '../activities/evaluation';
import type { TrainerActivities, TrainStepOutput } from '../activities/trainer';
import { nextBatchIndices, passesGroupFilter, replacementSpan } from '../src/core/groupStats';
import { groupIdOf, rolloutIdOf } from '../src/core/ids';
import { stepTrainerConfig } from '../src/core/learningRate';
import type { GroupSummary } from '../src/core/records';
import { SEARCH_ATTRIBUTES } from '../src/temporal/searchAttributes';
import { counterTracker, traceSpan } from '../src/trace/workflowSinks';
import { runDetails, trainingDetails } from './details';
import { rolloutWorkflow } from './rollout';
import { groupReadySignal, policyPublishedSignal, stopAdmissionSignal } from './signals';
import { activitySummary, plural } from './summaries';
import { pauseUpdate, resumeUpdate, stopUpdate, type TrainingStatus, trainingStatusQuery } from './trainingMessages';
import { episodeSpec, type TrainingInput } from './types';
import { untilMatchingWorker } from './workerMismatch';

/** State carried across continue-as-new. */
export interface TrainingState {
  version: number;
  step: number;
  /** Groups waiting for a train step, oldest first. */
  pending: GroupSummary[];
  /** Ids of groups already consumed by a step, trained or filtered out (so a late duplicate is recognised). */
  trained: string[];
  /** Index of the first group no step has taken yet; absent in runs started before it (then step x batchGroups). */
  nextGroupIndex?: number;
  paused: boolean;
  stopping: boolean;
  lastMetrics?: TrainStepOutput['metrics'];
  lastEvaluation?: EvaluationRecord;
  /** When the run started (epoch ms), for the learning curve's elapsed time. */
  startedAt: number;
}

/** A train step's timeout before `trainer.stepTimeoutMinutes` existed: a workflow started then has no such key. */
const FIXED_STEP_TIMEOUT_MINUTES = 30;

export class TrainingRun {
  readonly state: TrainingState;
  private readonly activities: ActivityInterfaceFor<TrainerActivities>;
  private readonly evaluator: ActivityInterfaceFor<EvaluationActivities>;
  private readonly controllerId: string;
  /** Trace: when each group joined the queue (workflow memory, rebuilt by replay) and the depth. */
  private readonly queuedAt = new Map<string, number>();
  private readonly traceCounter = counterTracker();
  /** The activity under way, for the Web UI (nothing while waiting for groups). */
  private doing: string | undefined;

  constructor(
    private readonly input: TrainingInput,
    carried: TrainingState | undefined,
  ) {
    this.state = carried ?? { version: 0, step: 0, pending: [], trained: [], paused: false, stopping: false, startedAt: Date.now() };
    this.activities = proxyActivities<TrainerActivities>({
      taskQueue: input.taskQueues.trainer,
      // Timeouts are not among what replay compares with the history: no patch is needed.
      startToCloseTimeout: `${(input.trainer.stepTimeoutMinutes as number | undefined) ?? FIXED_STEP_TIMEOUT_MINUTES} minutes`,
      heartbeatTimeout: `${input.trainer.heartbeatTimeoutS} seconds`,
      // A step that fails five times (bad data, a bug) fails the run visibly instead of retrying forever.
      retry: { initialInterval: '2 seconds', maximumInterval: '30 seconds', maximumAttempts: 5 },
    });
    // An evaluation plays its episodes in one go: heartbeats come from a timer, every 5 s.
    this.evaluator = proxyActivities<EvaluationActivities>({
      taskQueue: input.evaluationQueue,
      startToCloseTimeout: '30 minutes',
      heartbeatTimeout: '2 minutes',
      retry: { initialInterval: '2 seconds', maximumInterval: '30 seconds', maximumAttempts: 5 },
    });
    this.controllerId = rolloutIdOf(input.runId);
  }

  get finished(): boolean {
    return this.state.step >= this.input.trainer.steps;
  }

  status(): TrainingStatus {
    const { state } = this;
    return {
      version: state.version,
      step: state.step,
      steps: this.input.trainer.steps,
      groupsConsumed: state.trained.length,
      queueDepth: state.pending.length,
      paused: state.paused,
      stopping: state.stopping,
      lastMetrics: state.lastMetrics,
      lastEvaluation: state.lastEvaluation,
    };
  }

  /** Shows the run's progress as its current details in the Web UI. */
  showDetails(): void {
    const { trainer } = this.input;
    setCurrentDetails(trainingDetails({ status: this.status(), trainer, now: this.doing ?? this.waitingFor() }));
  }

  /** The details' last word: the run trained all its steps, or was stopped before. */
  ended(): void {
    this.doing = this.finished ? 'finished' : 'stopped';
    this.showDetails();
  }

  private waitingFor(): string {
    const { state } = this;
    if (this.finished) return 'finished';
    if (state.stopping) return 'stopping';
    const { trainer } = this.input;
    const batch = this.nextBatch();
    if (batch.complete) return `step ${state.step}'s groups are all in`;
    const arrived = batch.groups.filter((g) => g !== undefined);
    if (replacementSpan(trainer) === undefined) {
      return `waiting for ${batch.groups.length - arrived.length} of step ${state.step}'s ${plural(trainer.batchGroups, 'group')}`;
    }
    const passing = arrived.filter((g) => passesGroupFilter(trainer.groupFilter, g)).length;
    return `waiting for group ${batch.indices.at(-1)}: step ${state.step} has ${passing} of ${trainer.batchGroups} groups that pass its filter`;
  }

  /** Runs `activity` while the details say `doing`. */
  private async during<T>(doing: string, activity: () => Promise<T>): Promise<T> {
    this.doing = doing;
    this.showDetails();
    try {
      return await activity();
    } finally {
      this.doing = undefined;
    }
  }

  setHandlers(): void {
    const { state } = this;
    setHandler(trainingStatusQuery, () => this.status());
    setHandler(pauseUpdate, () => {
      state.paused = true;
      this.showDetails();
      return this.status();
    });
    setHandler(resumeUpdate, () => {
      state.paused = false;
      this.showDetails();
      return this.status();
    });
    setHandler(stopUpdate, async () => {
      state.stopping = true;
      this.showDetails();
      await this.tellController((controller) => controller.signal(stopAdmissionSignal));
      return this.status();
    });
    setHandler(groupReadySignal, (group) => this.enqueue(group));
  }

  private enqueue(group: GroupSummary): void {
    const { state } = this;
    if (state.trained.includes(group.groupId) || state.pending.some((g) => g.groupId === group.groupId)) return;
    state.pending.push(group);
    this.queuedAt.set(group.groupId, Date.now());
    this.traceQueue();
    this.showDetails();
  }

  private traceQueue(): void {
    this.traceCounter(this.input.runId, 'trainer queue', { groups_waiting: this.state.pending.length });
  }

  /** Version 0 of the policy (or the version a resumed run's checkpoints reached). */
  async preparePolicy(): Promise<void> {
    const { input } = this;
    const request = {
      runId: input.runId,
      trainer: input.trainer,
      temperature: input.sampling.temperature,
      env: input.env,
      agent: input.agent,
      compatibility: input.compatibility,
    };
    const summary = activitySummary.preparePolicy(input.trainer.formatWarmupSteps);
    const prepared = await this.during('preparing the policy', () =>
      untilMatchingWorker('policy preparation', () => this.activities.preparePolicy.executeWithOptions({ summary }, [request])),
    );
    this.state.version = prepared.version;
    this.state.step = prepared.step;
    if (prepared.nextGroupIndex !== undefined) this.state.nextGroupIndex = prepared.nextGroupIndex;
    this.showDetails();
  }

  /**
   * Starts the rollout controller for the groups the remaining steps will train on: with
   * replacement of filtered groups, for as many as those steps may look at; the last step then
   * stops it.
   */
  async startRollouts(): Promise<void> {
    const { input, state } = this;
    const { trainer } = input;
    const span = replacementSpan(trainer);
    const groups = (trainer.steps - state.step) * (span ?? trainer.batchGroups);
    await startChild(rolloutWorkflow, {
      workflowId: this.controllerId,
      taskQueue: input.taskQueues.workflows,
      parentClosePolicy: ParentClosePolicy.ABANDON,
      args: [
        {
          ...episodeSpec(input),
          groups,
          firstGroupIndex: this.firstUntaken(),
          groupSize: input.groupSize,
          maxConcurrency: input.maxConcurrency,
          training: {
            trainerWorkflowId: workflowInfo().workflowId,
            batchTrajectories: trainer.batchGroups * input.groupSize,
            maxStaleness: trainer.maxStaleness,
            weightSync: trainer.weightSync,
            initialVersion: state.version,
            ...(span !== undefined && {
              replacement: {
                rule: {
                  groupFilter: trainer.groupFilter,
                  filteredGroups: trainer.filteredGroups,
                  maxGroupsPerStep: trainer.maxGroupsPerStep,
                  batchGroups: trainer.batchGroups,
                },
                takenGroups: this.firstUntaken(),
                finalVersion: state.version + trainer.steps - state.step,
              },
            }),
          },
        },
      ],
      typedSearchAttributes: [
        { key: SEARCH_ATTRIBUTES.run, value: input.runId },
        { key: SEARCH_ATTRIBUTES.kind, value: 'rollout' },
        { key: SEARCH_ATTRIBUTES.env, value: input.envLabel },
      ],
      staticSummary: `rollouts of training run ${input.runId}`,
      staticDetails: runDetails(input, {
        groups,
        groupSize: input.groupSize,
        maxConcurrency: input.maxConcurrency,
        trainer,
      }),
    });
  }

  private firstUntaken(): number {
    return this.state.nextGroupIndex ?? this.state.step * this.input.trainer.batchGroups;
  }

  /**
   * Step k takes the next groups in admission order, not whichever finished first: groups k*B ..
   * k*B+B-1 (B = batchGroups), or with replacement of filtered groups, from the first group no
   * step took up to the B-th that passes the filter (src/core/groupStats). The controller admitted
   * them within the staleness bound (src/core/admission), so every token they hold is at most eta
   * versions older than the weights trained at step k; a straggler is waited for, never skipped.
   */
  private nextBatch(): { indices: number[]; groups: (GroupSummary | undefined)[]; complete: boolean } {
    const { runId, trainer } = this.input;
    const arrived = (index: number) => this.state.pending.find((g) => g.groupId === groupIdOf(runId, index));
    const passes = (index: number) => {
      const group = arrived(index);
      return group && passesGroupFilter(trainer.groupFilter, group);
    };
    const { indices, complete } = nextBatchIndices(this.firstUntaken(), trainer, passes);
    return { indices, groups: indices.map(arrived), complete };
  }

  batchReady(): boolean {
    return this.nextBatch().complete;
  }

  /** Trains the next batch (it must be ready), publishing the next version, and tells the controller. */
  async trainNextBatch(): Promise<void> {
    const { input, state } = this;
    const next = this.nextBatch();
    const batch = next.groups.filter((g) => g !== undefined);
    const ids = batch.map((g) => g.groupId);
    const dequeuedAt = Date.now();
    for (const id of ids) {
      const since = this.queuedAt.get(id);
      if (since !== undefined) traceSpan(input.runId, 'queue wait', 'queue', since, dequeuedAt, { group: id, step: state.step });
      this.queuedAt.delete(id);
    }
    const request = {
      runId: input.runId,
      step: state.step,
      baseVersion: state.version,
      groups: batch,
      trainer: stepTrainerConfig(input.trainer, state.step),
      temperature: input.sampling.temperature,
      runStartedAt: state.startedAt,
      evalEverySteps: input.eval?.everySteps ?? 0,
      compatibility: input.compatibility,
    };
    const summary = activitySummary.trainStep(state.step, state.version, batch.length);
    const result = await this.during(`training step ${state.step} on ${plural(batch.length, 'group')}`, () =>
      untilMatchingWorker(`train step ${state.step}`, () => this.activities.trainStep.executeWithOptions({ summary }, [request])),
    );
    state.pending = state.pending.filter((g) => !ids.includes(g.groupId));
    state.trained.push(...ids);
    state.nextGroupIndex = this.firstUntaken() + ids.length;
    this.traceQueue();
    state.version = result.version;
    state.step++;
    state.lastMetrics = result.metrics;
    this.showDetails();
    if (replacementSpan(input.trainer) === undefined) {
      await this.tellController((controller) => controller.signal(policyPublishedSignal, state.version));
      return;
    }
    // The controller may start groups the run will not need: the last step stops it first.
    if (this.finished) await this.tellController((controller) => controller.signal(stopAdmissionSignal));
    await this.tellController((controller) => controller.signal(policyPublishedSignal, state.version, state.nextGroupIndex));
  }

  /** Held-out evaluation of the current version: at version 0, every `eval.everySteps` steps, and at the end. */
  async evaluateIfDue(): Promise<void> {
    const { input, state } = this;
    const evalEvery = input.eval?.everySteps ?? 0;
    if (!input.eval || evalEvery === 0) return;
    if (state.step % evalEvery !== 0 && state.step !== input.trainer.steps) return;
    const request = {
      runId: input.runId,
      runSeed: input.runSeed,
      version: state.version,
      env: input.env,
      agent: input.agent,
      maxTokens: input.sampling.maxTokens,
      eval: input.eval,
      runStartedAt: state.startedAt,
      compatibility: input.compatibility,
    };
    const summary = activitySummary.evaluate(state.version, input.eval.episodes);
    state.lastEvaluation = await this.during(`evaluating v${state.version}`, () =>
      untilMatchingWorker('an evaluation', () => this.evaluator.evaluate.executeWithOptions({ summary }, [request])),
    );
    this.showDetails();
  }

  /**
   * Tells the controller something; once it has admitted its last trajectory and finished, there
   * is no one left to tell, which is fine.
   */
  private async tellController(send: (controller: ReturnType<typeof getExternalWorkflowHandle>) => Promise<void>): Promise<void> {
    try {
      await send(getExternalWorkflowHandle(this.controllerId));
    } catch (err) {
      log.info('rollout controller has finished; not told', { error: String(err) });
    }
  }
}

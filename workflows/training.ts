/**
 * The training workflow (consumer) and root of a training run. It prepares version 0 of the
 * policy, starts the rollout controller (producer), takes each trajectory group the moment the
 * controller hands it over, and as soon as the next batch (the next `batchGroups` groups in
 * admission order) is all in, runs one train step on the trainer queue, which publishes weights
 * version v+1; then it tells the controller, whose
 * staleness bound and weight-sync mode decide when new trajectories use them.
 *
 * Exactly once: a group is queued at most once (duplicate signals are ignored), leaves the queue
 * only into a train step, and a train step is an idempotent activity keyed by its step number, so
 * retries and continue-as-new never train a group twice or skip one.
 */
import {
  allHandlersFinished,
  condition,
  continueAsNew,
  defineQuery,
  defineUpdate,
  getExternalWorkflowHandle,
  log,
  ParentClosePolicy,
  proxyActivities,
  setHandler,
  startChild,
  workflowInfo,
} from '@temporalio/workflow';
import type { EvaluationRecord, TrainerActivities, TrainStepOutput } from '../activities/trainer';
import { groupIdOf, rolloutIdOf } from '../src/core/ids';
import type { GroupSummary } from '../src/core/records';
import { SEARCH_ATTRIBUTES } from '../src/temporal/searchAttributes';
import { counterTracker, traceSpan } from '../src/trace/workflowSinks';
import { rolloutWorkflow } from './rollout';
import { groupReadySignal, policyPublishedSignal, stopAdmissionSignal } from './signals';
import { episodeSpec, TrainingInput } from './types';
import { untilMatchingWorker } from './workerMismatch';

export interface TrainingState {
  version: number;
  step: number;
  /** Groups waiting for a train step, oldest first. */
  pending: GroupSummary[];
  /** Ids of groups already trained (so a late duplicate is recognised). */
  trained: string[];
  paused: boolean;
  stopping: boolean;
  lastMetrics?: TrainStepOutput['metrics'];
  lastEvaluation?: EvaluationRecord;
  /** When the run started (epoch ms), for the learning curve's elapsed time. Optional for old runs. */
  startedAt?: number;
}

export interface TrainingStatus {
  version: number;
  step: number;
  steps: number;
  groupsConsumed: number;
  queueDepth: number;
  paused: boolean;
  stopping: boolean;
  lastMetrics?: TrainStepOutput['metrics'];
  lastEvaluation?: EvaluationRecord;
}

export const trainingStatusQuery = defineQuery<TrainingStatus>('trainingStatus');
export const pauseUpdate = defineUpdate<TrainingStatus>('pause');
export const resumeUpdate = defineUpdate<TrainingStatus>('resume');
/**
 * No new admissions; a batch already complete is trained; groups still in flight finish and are
 * recorded, but the run ends without waiting to train them.
 */
export const stopUpdate = defineUpdate<TrainingStatus>('stop');

export interface TrainingResult {
  runId: string;
  version: number;
  steps: number;
  groupsTrained: number;
}

export async function trainingWorkflow(input: TrainingInput, carried?: TrainingState): Promise<TrainingResult> {
  const { trainer } = input;
  const { preparePolicy, trainStep, evaluate } = proxyActivities<TrainerActivities>({
    taskQueue: input.taskQueues.trainer,
    startToCloseTimeout: '30 minutes',
    heartbeatTimeout: '2 minutes',
    // A step that fails five times (bad data, a bug) fails the run visibly instead of retrying forever.
    retry: { initialInterval: '2 seconds', maximumInterval: '30 seconds', maximumAttempts: 5 },
  });
  const controllerId = rolloutIdOf(input.runId);
  /**
   * Tells the controller something; once it has admitted its last trajectory and finished, there
   * is no one left to tell, which is fine.
   */
  async function tellController(send: (controller: ReturnType<typeof getExternalWorkflowHandle>) => Promise<void>): Promise<void> {
    try {
      await send(getExternalWorkflowHandle(controllerId));
    } catch (err) {
      log.info('rollout controller has finished; not told', { error: String(err) });
    }
  }

  const state: TrainingState = carried ?? { version: 0, step: 0, pending: [], trained: [], paused: false, stopping: false, startedAt: Date.now() };
  // Handlers first, so status answers while version 0 is still being prepared.
  const status = (): TrainingStatus => ({
    version: state.version,
    step: state.step,
    steps: trainer.steps,
    groupsConsumed: state.trained.length,
    queueDepth: state.pending.length,
    paused: state.paused,
    stopping: state.stopping,
    lastMetrics: state.lastMetrics,
    lastEvaluation: state.lastEvaluation,
  });
  setHandler(trainingStatusQuery, status);
  setHandler(pauseUpdate, () => {
    state.paused = true;
    return status();
  });
  setHandler(resumeUpdate, () => {
    state.paused = false;
    return status();
  });
  setHandler(stopUpdate, async () => {
    state.stopping = true;
    await tellController((controller) => controller.signal(stopAdmissionSignal));
    return status();
  });
  // Trace: when each group joined the queue (workflow memory, rebuilt by replay) and the depth.
  const queuedAt = new Map<string, number>();
  const traceCounter = counterTracker();
  const traceQueue = () => traceCounter(input.runId, 'trainer queue', { groups_waiting: state.pending.length });
  setHandler(groupReadySignal, (group) => {
    const seen = state.trained.includes(group.groupId) || state.pending.some((g) => g.groupId === group.groupId);
    if (!seen) {
      state.pending.push(group);
      queuedAt.set(group.groupId, Date.now());
      traceQueue();
    }
  });

  const evalEvery = input.eval?.everySteps ?? 0;
  /** Held-out evaluation of the current version: at version 0, every evalEvery steps, and at the end. */
  async function evaluateIfDue(): Promise<void> {
    if (!input.eval || evalEvery === 0) return;
    if (state.step % evalEvery !== 0 && state.step !== trainer.steps) return;
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
    state.lastEvaluation = await untilMatchingWorker('an evaluation', () => evaluate(request));
  }

  if (!carried) {
    const prepared = await untilMatchingWorker('policy preparation', () =>
      preparePolicy({ runId: input.runId, trainer, temperature: input.sampling.temperature, env: input.env, agent: input.agent, compatibility: input.compatibility }),
    );
    state.version = prepared.version;
    state.step = prepared.step;
  }
  if (!carried && !state.stopping) {
    await startChild(rolloutWorkflow, {
      workflowId: controllerId,
      taskQueue: input.taskQueues.workflows,
      parentClosePolicy: ParentClosePolicy.ABANDON,
      args: [{
        ...episodeSpec(input),
        groups: (trainer.steps - state.step) * trainer.batchGroups,
        firstGroupIndex: state.step * trainer.batchGroups,
        groupSize: input.groupSize,
        maxConcurrency: input.maxConcurrency,
        training: {
          trainerWorkflowId: workflowInfo().workflowId,
          batchTrajectories: trainer.batchGroups * input.groupSize,
          maxStaleness: trainer.maxStaleness,
          weightSync: trainer.weightSync,
          initialVersion: state.version,
        },
      }],
      typedSearchAttributes: [
        { key: SEARCH_ATTRIBUTES.run, value: input.runId },
        { key: SEARCH_ATTRIBUTES.kind, value: 'rollout' },
        { key: SEARCH_ATTRIBUTES.env, value: input.envLabel ?? input.env.name },
      ],
      staticSummary: `rollouts of training run ${input.runId}`,
    });
  }

  // The untrained baseline is measured while the first groups are being generated.
  if (!carried) await evaluateIfDue();

  /**
   * Step k trains groups k*B .. k*B+B-1 (B = batchGroups): the k-th batch in admission order, not
   * whichever groups finished first. The controller admitted them while admitted <= (eta + v + 1)
   * x batch, so they started under version >= k - eta and every token they hold is at most eta
   * versions older than the weights trained at step k; a straggler is waited for, never skipped.
   */
  const batchIds = () => Array.from({ length: trainer.batchGroups }, (_, j) => groupIdOf(input.runId, state.step * trainer.batchGroups + j));
  const batchReady = () => batchIds().every((id) => state.pending.some((g) => g.groupId === id));
  while (state.step < trainer.steps) {
    await condition(() => (batchReady() && !state.paused) || state.stopping);
    if (!batchReady()) break;
    const ids = batchIds();
    const batch = ids.map((id) => state.pending.find((g) => g.groupId === id)!);
    const dequeuedAt = Date.now();
    for (const id of ids) {
      const since = queuedAt.get(id);
      if (since !== undefined) traceSpan(input.runId, 'queue wait', 'queue', since, dequeuedAt, { group: id, step: state.step });
      queuedAt.delete(id);
    }
    const result = await untilMatchingWorker(`train step ${state.step}`, () =>
      trainStep({ runId: input.runId, step: state.step, baseVersion: state.version, groups: batch, trainer, temperature: input.sampling.temperature, runStartedAt: state.startedAt, compatibility: input.compatibility }),
    );
    state.pending = state.pending.filter((g) => !ids.includes(g.groupId));
    state.trained.push(...batch.map((g) => g.groupId));
    traceQueue();
    state.version = result.version;
    state.step++;
    state.lastMetrics = result.metrics;
    await tellController((controller) => controller.signal(policyPublishedSignal, state.version));
    await evaluateIfDue();

    if (workflowInfo().continueAsNewSuggested) {
      await condition(allHandlersFinished);
      await continueAsNew<typeof trainingWorkflow>(input, state);
    }
  }
  // A stop update is still telling the controller when the loop ends: let it answer first.
  await condition(allHandlersFinished);
  return { runId: input.runId, version: state.version, steps: state.step, groupsTrained: state.trained.length };
}

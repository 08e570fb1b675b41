/**
 * One episode, durably: open an episode session (agent + environment) in an env worker, then per
 * turn ask the model and hand its answer to the session, until the episode ends or a limit is
 * hit; then score and record it.
 *
 * Every completed activity is in history, so a crashed worker costs at most the turn in flight.
 * Token ids never pass through here: `generate` stores them and returns text and counts. The
 * agent and environment run in the env worker, so any code can plug in without touching this
 * deterministic sandbox. With `env.sessions: local` the session lives in the workflow worker
 * instead, and opening, turns, close and reward are local activities.
 */
import {
  ActivityFailure,
  ApplicationFailure,
  CancellationScope,
  isCancellation,
  log,
  proxyActivities,
  proxyLocalActivities,
  setCurrentDetails,
  sleep,
  TimeoutFailure,
  upsertSearchAttributes,
  type RetryPolicy,
} from '@temporalio/workflow';
import type { EnvActivities, EnvResetOutput, SessionActivities } from '../activities/environment';
import type { InferenceActivities } from '../activities/inference';
import type { NextTurn } from '../src/agents/agent';
import type { TurnOutcome } from '../src/agents/episode';
import { sessionIdOf } from '../src/core/ids';
import type { TrajectoryStatus, TrajectorySummary, TrajectoryTime } from '../src/core/records';
import { SEARCH_ATTRIBUTES } from '../src/temporal/searchAttributes';
import type { TrajectoryInput } from './types';
import { activityCause } from './activityFailures';
import { untilMatchingWorker } from './workerMismatch';

/** Type of the failure `SessionRegistry.get` raises; kept literal so no activity code is bundled. */
const SESSION_LOST = 'SessionLost';
/** Rebuilds of a lost environment session before the trajectory gives up. */
const MAX_ENV_RESTORES = 5;
/** Episode failures the env worker reports, and the status each gives the trajectory. */
const FAILURE_STATUS: Readonly<Record<string, TrajectoryStatus>> = {
  EnvironmentError: 'failed',
  RewardError: 'failed',
  AgentError: 'failed',
  EnvStepTimeout: 'env_timeout',
};
/** For workflows started before the agent config had an episode time limit. */
const DEFAULT_EPISODE_TIMEOUT_S = 600;

function isSessionLost(err: unknown): boolean {
  const cause = activityCause(err);
  // A timeout only from an activity: nobody polled the lost worker's session queue.
  return (err instanceof ActivityFailure && cause instanceof TimeoutFailure) || (cause instanceof ApplicationFailure && cause.type === SESSION_LOST);
}

/** The status and reason of an episode that could not finish, or undefined for other errors. */
function episodeFailure(err: unknown): { status: TrajectoryStatus; reason: string } | undefined {
  const cause = activityCause(err);
  if (!(cause instanceof ApplicationFailure)) return undefined;
  const status = FAILURE_STATUS[cause.type ?? ''];
  return status ? { status, reason: cause.message } : undefined;
}

function timeSplit(totalMs: number, generationMs: number, environmentMs: number): TrajectoryTime {
  const round = (ms: number) => Math.round(ms);
  return { totalMs: round(totalMs), generationMs: round(generationMs), environmentMs: round(environmentMs), waitingMs: round(Math.max(0, totalMs - generationMs - environmentMs)) };
}

function outcomeWord(info: Record<string, unknown>): string {
  return typeof info.outcome === 'string' ? info.outcome : 'done';
}

/** Runs `fn`, cancelling it when `ms` pass; says whether the deadline cut it short. */
async function withDeadline(ms: number, fn: () => Promise<void>): Promise<'finished' | 'expired'> {
  let expired = false;
  await CancellationScope.cancellable(async () => {
    const episodeScope = CancellationScope.current();
    const timerScope = new CancellationScope();
    void timerScope
      .run(() => sleep(ms))
      .then(
        () => {
          expired = true;
          episodeScope.cancel();
        },
        () => undefined,
      );
    try {
      await fn();
    } catch (err) {
      if (!(expired && isCancellation(err))) throw err;
    } finally {
      timerScope.cancel();
    }
  });
  return expired ? 'expired' : 'finished';
}

export async function trajectoryWorkflow(input: TrajectoryInput): Promise<TrajectorySummary> {
  const { runId, trajectoryId } = input;
  // Workflow time: deterministic, the time of the workflow task that runs this line.
  const startedAt = Date.now();
  /** Time inside generate activities and inside environment activities, as they report it. */
  let generationMs = 0;
  let environmentMs = 0;

  const { generate } = proxyActivities<InferenceActivities>({
    taskQueue: input.taskQueues.inference,
    startToCloseTimeout: '10 minutes',
    heartbeatTimeout: '10 seconds',
    retry: { initialInterval: '1 second', maximumInterval: '10 seconds' },
  });
  const envRetry: RetryPolicy = { initialInterval: '1 second', maximumInterval: '10 seconds', maximumAttempts: 10 };
  const envActivities = proxyActivities<EnvActivities>({
    taskQueue: input.taskQueues.env,
    startToCloseTimeout: '10 minutes',
    heartbeatTimeout: '10 seconds',
    retry: envRetry,
  });
  const { recordTrajectory } = envActivities;
  const localSessions = input.env.sessions === 'local';
  const sessionRetry: RetryPolicy = { initialInterval: '1 second', maximumAttempts: 3, nonRetryableErrorTypes: [SESSION_LOST] };
  // A local session lives in this workflow worker: its turns skip the server round trip.
  const localSessionActivities = proxyLocalActivities<SessionActivities>({ startToCloseTimeout: '10 minutes', retry: sessionRetry });
  const { envReset, computeReward } = localSessions ? proxyLocalActivities<EnvActivities>({ startToCloseTimeout: '10 minutes', retry: envRetry }) : envActivities;
  // Session activities must reach the worker holding the session; if it is gone, nobody polls
  // its queue and schedule-to-start times out, which is the signal to rebuild the session.
  const sessionActivities = (sessionQueue: string) =>
    localSessions
      ? localSessionActivities
      : proxyActivities<SessionActivities>({
          taskQueue: sessionQueue,
          scheduleToStartTimeout: '30 seconds',
          startToCloseTimeout: '10 minutes',
          heartbeatTimeout: '10 seconds',
          retry: sessionRetry,
        });

  const policy = input.minPolicyVersion === undefined ? undefined : { runId, minVersion: input.minPolicyVersion, followLatest: input.weightSync === 'turn' };
  /** The model's answers so far: replayed on a fresh session when the one holding them is lost. */
  const answers: string[] = [];
  let envRestores = 0;
  const sessionId = () => sessionIdOf(trajectoryId, envRestores);
  const openSession = async () => {
    const opened = await untilMatchingWorker('an environment session', () => envReset({ sessionId: sessionId(), runId, env: input.env, agent: input.agent, envSeed: input.envSeed, replayAnswers: answers, compatibility: input.compatibility }));
    environmentMs += opened.activityMs ?? 0;
    return opened;
  };
  let session: EnvResetOutput | undefined;

  /** Hands the answer of turn `answers.length` to the session, rebuilding it if it is lost. */
  async function respond(text: string): Promise<TurnOutcome> {
    for (;;) {
      try {
        const outcome = await sessionActivities(session!.sessionQueue).envStep({ sessionId: sessionId(), turn: answers.length, text });
        environmentMs += outcome.activityMs ?? 0;
        return outcome;
      } catch (err) {
        if (!isSessionLost(err) || envRestores >= MAX_ENV_RESTORES) throw err;
        envRestores++;
        log.warn('environment session lost; replaying recorded answers on a fresh one', { trajectoryId, replay: answers.length });
        session = await openSession();
      }
    }
  }

  let status: TrajectoryStatus = 'max_turns';
  let reason = `no terminal state within ${input.agent.maxTurns} turns`;
  let turns = 0;
  let envSteps = 0;
  let invalidActions = 0;
  let completionTokens = 0;
  let envReturn = 0;
  /** Penalties the environment charged, by turn (sparse); in the summary only when some turn paid one. */
  const turnPenalties: number[] = [];
  let minPolicyVersion = Number.MAX_SAFE_INTEGER;
  let maxPolicyVersion = -1;

  async function play(): Promise<void> {
    session = await openSession();
    let next: NextTurn = session.next;
    while (turns < input.agent.maxTurns) {
      // Never cut short by the episode deadline: the activity stores the turn it generates, so a
      // turn in flight when time runs out is finished and counted rather than stored unaccounted.
      const reply = await CancellationScope.nonCancellable(() => generate({
        runId,
        runSeed: input.runSeed,
        trajectoryId,
        turn: turns,
        messages: next.messages,
        ...(turns > 0 && next.freshContext ? { freshContext: true } : {}),
        sampling: input.sampling,
        policy,
        compatibility: input.compatibility,
      }));
      if (reply.completionTokens === 0 && reply.finishReason === 'context') {
        [status, reason] = ['max_context', `context full (${reply.contextTokens} tokens) before turn ${turns}`];
        return;
      }
      turns++;
      generationMs += reply.activityMs ?? 0;
      completionTokens += reply.completionTokens;
      minPolicyVersion = Math.min(minPolicyVersion, reply.minPolicyVersion);
      maxPolicyVersion = Math.max(maxPolicyVersion, reply.maxPolicyVersion);

      const outcome = await respond(reply.text);
      answers.push(reply.text);
      if (outcome.kind === 'invalid') {
        invalidActions++;
        next = outcome.next;
        continue;
      }
      envSteps++;
      envReturn += outcome.reward;
      if (outcome.penalty) turnPenalties[turns - 1] = outcome.penalty;
      if (outcome.done || !outcome.next) {
        [status, reason] = outcome.info.truncated ? ['max_steps', 'environment step limit reached'] : ['succeeded', `episode ended: ${outcomeWord(outcome.info)}`];
        return;
      }
      next = outcome.next;
    }
  }

  const episodeTimeoutS = input.agent.episodeTimeoutS ?? DEFAULT_EPISODE_TIMEOUT_S;
  try {
    if ((await withDeadline(episodeTimeoutS * 1000, play)) === 'expired') {
      [status, reason] = ['timeout', `episode took longer than ${episodeTimeoutS} s (agent.episodeTimeoutS)`];
    }
  } catch (err) {
    const failure = episodeFailure(err);
    if (!failure) throw err;
    ({ status, reason } = failure);
    log.warn('episode could not finish', { trajectoryId, status, reason });
  } finally {
    // Close even when the trajectory is cancelled or fails; a lost session has nothing to close.
    if (session) {
      const { sessionQueue } = session;
      await CancellationScope.nonCancellable(() =>
        sessionActivities(sessionQueue).envClose({ sessionId: sessionId() }).catch((err) => log.warn('envClose failed', { trajectoryId, error: String(err) })),
      );
    }
  }

  const reward = await computeReward({ envReturn, turns, invalidActions, formatWeight: input.reward?.formatWeight ?? 0 });
  const summary: TrajectorySummary = {
    runId,
    groupId: input.groupId,
    trajectoryId,
    env: input.env.name,
    status,
    reason,
    reward,
    envReturn,
    ...(turnPenalties.length > 0 ? { turnPenalties: Array.from({ length: turns }, (_, turn) => turnPenalties[turn] ?? 0) } : {}),
    turns,
    envSteps,
    invalidActions,
    completionTokens,
    minPolicyVersion: turns > 0 ? minPolicyVersion : -1,
    maxPolicyVersion,
    envRestores,
    time: timeSplit(Date.now() - startedAt, generationMs, environmentMs),
  };
  await recordTrajectory(summary);
  upsertSearchAttributes([
    { key: SEARCH_ATTRIBUTES.status, value: status },
    { key: SEARCH_ATTRIBUTES.reward, value: reward },
    { key: SEARCH_ATTRIBUTES.turns, value: turns },
    { key: SEARCH_ATTRIBUTES.policyVersion, value: maxPolicyVersion },
  ]);
  setCurrentDetails(`${status}: ${reason}; reward ${reward}, ${turns} turns, ${envSteps} env steps, ${invalidActions} unparseable answers`);
  return summary;
}

/**
 * One episode, durably: reset the environment, then per turn ask the model, parse its answer,
 * step the environment, until the episode ends or a limit is hit; then score and record it.
 *
 * Every completed activity is in history, so a crashed worker costs at most the turn in flight.
 * Token ids never pass through here: `generate` stores them and returns text and counts.
 */
import {
  ActivityFailure,
  ApplicationFailure,
  CancellationScope,
  log,
  proxyActivities,
  setCurrentDetails,
  TimeoutFailure,
  upsertSearchAttributes,
} from '@temporalio/workflow';
import type { EnvActivities, SessionActivities } from '../activities/environment';
import type { InferenceActivities } from '../activities/inference';
import { afterInvalidAnswer, afterStep, openingMessages, type NextTurn } from '../src/agents/conversation';
import { getAgent } from '../src/agents/registry';
import type { TrajectoryStatus, TrajectorySummary } from '../src/core/records';
import { SEARCH_ATTRIBUTES } from '../src/temporal/searchAttributes';
import type { TrajectoryInput } from './types';

/** Type of the failure `SessionRegistry.get` raises; kept literal so no activity code is bundled. */
const SESSION_LOST = 'SessionLost';
/** Rebuilds of a lost environment session before the trajectory gives up. */
const MAX_ENV_RESTORES = 5;

function isSessionLost(err: unknown): boolean {
  if (!(err instanceof ActivityFailure)) return false;
  return err.cause instanceof TimeoutFailure || (err.cause instanceof ApplicationFailure && err.cause.type === SESSION_LOST);
}

function envOutcome(info: Record<string, unknown>): string {
  return typeof info.outcome === 'string' ? info.outcome : 'done';
}

export async function trajectoryWorkflow(input: TrajectoryInput): Promise<TrajectorySummary> {
  const { runId, trajectoryId } = input;
  const agent = getAgent(input.agent.name);

  const { generate } = proxyActivities<InferenceActivities>({
    taskQueue: input.taskQueues.inference,
    startToCloseTimeout: '10 minutes',
    heartbeatTimeout: '10 seconds',
    retry: { initialInterval: '1 second', maximumInterval: '10 seconds' },
  });
  const { envReset, computeReward, recordTrajectory } = proxyActivities<EnvActivities>({
    taskQueue: input.taskQueues.env,
    startToCloseTimeout: '1 minute',
    retry: { initialInterval: '1 second', maximumInterval: '10 seconds', maximumAttempts: 10 },
  });
  // Session activities must reach the worker holding the session; if it is gone, nobody polls
  // its queue and schedule-to-start times out, which is the signal to rebuild the session.
  const sessionActivities = (sessionQueue: string) =>
    proxyActivities<SessionActivities>({
      taskQueue: sessionQueue,
      scheduleToStartTimeout: '30 seconds',
      startToCloseTimeout: '1 minute',
      retry: { initialInterval: '1 second', maximumAttempts: 3, nonRetryableErrorTypes: [SESSION_LOST] },
    });

  const policy = input.minPolicyVersion === undefined ? undefined : { runId, minVersion: input.minPolicyVersion, followLatest: input.weightSync === 'turn' };
  const actions: unknown[] = [];
  let envRestores = 0;
  const openSession = () =>
    envReset({ sessionId: `${trajectoryId}.s${envRestores}`, env: input.env, envSeed: input.envSeed, replayActions: actions });

  let session = await openSession();
  let sessionId = `${trajectoryId}.s${envRestores}`;

  async function step(action: unknown) {
    for (;;) {
      try {
        return await sessionActivities(session.sessionQueue).envStep({ sessionId, stepIndex: actions.length, action });
      } catch (err) {
        if (!isSessionLost(err) || envRestores >= MAX_ENV_RESTORES) throw err;
        envRestores++;
        log.warn('environment session lost; replaying recorded actions on a fresh one', { trajectoryId, replay: actions.length });
        session = await openSession();
        sessionId = `${trajectoryId}.s${envRestores}`;
      }
    }
  }

  const history = input.agent.history ?? 'full';
  let observation = session.observation;
  let next: NextTurn = { messages: openingMessages(agent, observation), freshContext: true };
  let status: TrajectoryStatus = 'max_turns';
  let reason = `no terminal state within ${input.agent.maxTurns} turns`;
  let turns = 0;
  let invalidActions = 0;
  let completionTokens = 0;
  let envReturn = 0;
  let minPolicyVersion = Number.MAX_SAFE_INTEGER;
  let maxPolicyVersion = -1;

  try {
    while (turns < input.agent.maxTurns) {
      const reply = await generate({
        runId,
        runSeed: input.runSeed,
        trajectoryId,
        turn: turns,
        messages: next.messages,
        // Only sent when it matters after turn 0, so histories of full-history runs stay as they were.
        ...(turns > 0 && next.freshContext ? { freshContext: true } : {}),
        sampling: input.sampling,
        policy,
      });
      if (reply.completionTokens === 0 && reply.finishReason === 'context') {
        [status, reason] = ['max_context', `context full (${reply.contextTokens} tokens) before turn ${turns}`];
        break;
      }
      turns++;
      completionTokens += reply.completionTokens;
      minPolicyVersion = Math.min(minPolicyVersion, reply.minPolicyVersion);
      maxPolicyVersion = Math.max(maxPolicyVersion, reply.maxPolicyVersion);

      const parsed = agent.parseAction(reply.text);
      if (!parsed.ok) {
        invalidActions++;
        next = afterInvalidAnswer(agent, history, observation, parsed.error);
        continue;
      }
      const result = await step(parsed.action);
      actions.push(parsed.action);
      envReturn += result.reward;
      if (result.done) {
        const outcome = envOutcome(result.info);
        [status, reason] = result.info.truncated ? ['max_steps', 'environment step limit reached'] : ['succeeded', `episode ended: ${outcome}`];
        break;
      }
      observation = result.observation;
      next = afterStep(agent, history, observation);
    }
  } finally {
    // Close even when the trajectory is cancelled or fails; a lost session has nothing to close.
    await CancellationScope.nonCancellable(() =>
      sessionActivities(session.sessionQueue).envClose({ sessionId }).catch((err) => log.warn('envClose failed', { sessionId, error: String(err) })),
    );
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
    turns,
    envSteps: actions.length,
    invalidActions,
    completionTokens,
    minPolicyVersion: turns > 0 ? minPolicyVersion : -1,
    maxPolicyVersion,
    envRestores,
  };
  await recordTrajectory(summary);
  upsertSearchAttributes([
    { key: SEARCH_ATTRIBUTES.status, value: status },
    { key: SEARCH_ATTRIBUTES.reward, value: reward },
    { key: SEARCH_ATTRIBUTES.turns, value: turns },
    { key: SEARCH_ATTRIBUTES.policyVersion, value: maxPolicyVersion },
  ]);
  setCurrentDetails(`${status}: ${reason}; reward ${reward}, ${turns} turns, ${actions.length} env steps, ${invalidActions} unparseable answers`);
  return summary;
}

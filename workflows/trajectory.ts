/**
 * One episode, durably: open an episode session (agent + environment) in an env worker, then per
 * turn ask the model and hand its answer to the session, until the episode ends or a limit is
 * hit; then score it and record it.
 *
 * Every completed activity is in history, so a crashed worker costs at most the turn in flight.
 * Token ids never pass through here: `generate` stores them and returns text and counts. The
 * agent and environment run in the env worker, so any code can plug in without touching this
 * deterministic sandbox. Where each activity runs: ./trajectory/activities.
 */
import { CancellationScope, log, patched, upsertSearchAttributes } from '@temporalio/workflow';
import { episodeReward } from '../src/core/episode';
import { solvedTask } from '../src/core/groupStats';
import type { TrajectorySummary } from '../src/core/records';
import { SEARCH_ATTRIBUTES } from '../src/temporal/searchAttributes';
import type { TrajectoryInput } from './types';
import { episodeFailure } from './activityFailures';
import { PATCHES } from './patches';
import { activitySummary, timerSummary } from './summaries';
import { trajectoryActivities, type TrajectoryActivities } from './trajectory/activities';
import { Conversation } from './trajectory/conversation';
import { generateInputOf, policyRequirementOf } from './trajectory/generateInput';
import { withDeadline } from './trajectory/deadline';
import { EpisodeSession } from './trajectory/session';
import { EpisodeTally } from './trajectory/tally';
import type { Episode } from './trajectory/episode';
import { playAgentWorkflow } from './trajectory/agentWorkflow';
import { PROGRAM_AGENT, WORKFLOW_AGENT } from '../src/core/agentCallContext';
import { playAgentProgram } from './trajectory/agentProgram';

export async function trajectoryWorkflow(input: TrajectoryInput): Promise<TrajectorySummary> {
  const activities = trajectoryActivities(input);
  const tally = new EpisodeTally(input);
  const session = new EpisodeSession(input, activities);
  const conversation = new Conversation(input);
  const { episodeTimeoutS } = input.agent;
  try {
    const deadline = timerSummary.episodeDeadline(episodeTimeoutS);
    // Agents that run their own loop (a workflow of their own, a program) play their episode there; trajflow's agents turn by turn here.
    const playEpisode = OWN_LOOP_AGENTS[input.agent.name] ?? play;
    if ((await withDeadline(episodeTimeoutS * 1000, deadline, () => playEpisode(input, activities, { session, tally, conversation }))) === 'expired') {
      tally.end('timeout', `episode took longer than ${episodeTimeoutS} s (agent.episodeTimeoutS)`);
    }
  } catch (err) {
    const failure = episodeFailure(err);
    if (!failure) throw err;
    tally.end(failure.status, failure.reason);
    log.warn('episode could not finish', { trajectoryId: input.trajectoryId, ...failure });
  } finally {
    await session.close();
  }

  const { envReturn, turns, invalidActions } = tally;
  const reward = patched(PATCHES.rewardInWorkflow)
    ? episodeReward(tally, input.reward.formatWeight)
    : await activities.computeReward.executeWithOptions({ summary: activitySummary.computeReward(envReturn, turns, invalidActions) }, [
        { envReturn, turns, invalidActions, formatWeight: input.reward.formatWeight },
      ]);
  const summary = tally.summary(reward, session.rebuilds, session.activityMs);
  await activities.recordTrajectory.executeWithOptions({ summary: activitySummary.recordTrajectory(summary.status, reward) }, [summary]);
  upsertSearchAttributes([
    { key: SEARCH_ATTRIBUTES.status, value: summary.status },
    { key: SEARCH_ATTRIBUTES.solved, value: solvedTask(summary) },
    { key: SEARCH_ATTRIBUTES.reward, value: reward },
    { key: SEARCH_ATTRIBUTES.turns, value: turns },
    { key: SEARCH_ATTRIBUTES.policyVersion, value: summary.maxPolicyVersion },
  ]);
  conversation.show(
    `${summary.status}: ${summary.reason}; reward ${reward}, ${turns} turns, ${summary.envSteps} env steps, ${invalidActions} unparseable answers`,
  );
  return summary;
}

/** How agents that run their own loop play an episode, by `agent.name`. */
const OWN_LOOP_AGENTS: Record<string, typeof play> = { [WORKFLOW_AGENT]: playAgentWorkflow, [PROGRAM_AGENT]: playAgentProgram };

/** The turns of the episode: generate, hand the answer to the session, account the outcome. */
async function play(input: TrajectoryInput, { generate }: TrajectoryActivities, { session, tally, conversation }: Episode): Promise<void> {
  const policy = policyRequirementOf(input);
  conversation.show('opening the environment session');
  let next = await session.open();
  conversation.isolation = session.isolation;
  while (tally.turns < input.agent.maxTurns) {
    const turn = tally.turns;
    conversation.shown(turn, next);
    // Never cut short by the episode deadline: the activity stores the turn it generates, so a
    // turn in flight when time runs out is finished and counted rather than stored unaccounted.
    const reply = await CancellationScope.nonCancellable(() =>
      generate.executeWithOptions({ summary: activitySummary.generate(turn, policy) }, [generateInputOf(input, turn, next, policy)]),
    );
    if (reply.completionTokens === 0 && reply.finishReason === 'context') {
      return tally.end('max_context', `context full (${reply.contextTokens} tokens) before turn ${turn}`);
    }
    tally.generated(reply);
    conversation.answered(reply);

    const outcome = await session.turn(reply.text);
    conversation.answerTaken(outcome);
    if (tally.answered(outcome) === 'ended') return;
    next = outcome.next!;
  }
}

/**
 * What the episodes of agents that run their own loop share (an agent's own workflow,
 * ./agentWorkflow; a program calling the OpenAI-compatible endpoint, ./agentProgram): the task's
 * prompt handed to the agent, the run's context for its model calls, and the end: its model calls
 * read from the store and counted as the trajectory's turns, its answer handed to the environment.
 */
import type { NextTurn } from '../../src/agents/agent';
import type { AgentCallContext } from '../../src/core/agentCallContext';
import { activitySummary, plural } from '../summaries';
import type { TrajectoryInput } from '../types';
import type { TrajectoryActivities } from './activities';
import type { Episode } from './episode';
import { policyRequirementOf } from './generateInput';

/** The task as the agent gets it: the first observation's user text. */
export function taskPromptOf(first: NextTurn): string {
  return first.messages
    .filter((message) => message.role === 'user')
    .map((message) => message.content)
    .join('\n');
}

/** The run's context for the agent's model calls (src/core/agentCallContext.ts). */
export function callContextOf(input: TrajectoryInput, toolCallFormat: string): AgentCallContext {
  const policy = policyRequirementOf(input);
  return {
    runId: input.runId,
    runSeed: input.runSeed,
    trajectoryId: input.trajectoryId,
    sampling: input.sampling,
    ...(policy ? { policy } : {}),
    compatibility: input.compatibility,
    toolCallFormat,
    maxCalls: input.agent.maxTurns,
    inferenceQueue: input.taskQueues.inference,
  };
}

/**
 * Counts the agent's model calls as the trajectory's turns and shows them; then, if the agent
 * answered, hands the answer to the environment, which scores it.
 */
export async function endExternalEpisode(
  input: TrajectoryInput,
  activities: TrajectoryActivities,
  { session, tally, conversation }: Episode,
  agentLabel: string,
  answer: string | undefined,
): Promise<void> {
  const calls = await activities.agentCalls.executeWithOptions({ summary: activitySummary.agentCalls(agentLabel) }, [
    { runId: input.runId, trajectoryId: input.trajectoryId },
  ]);
  calls.forEach((call, turn) => {
    tally.generated(call);
    conversation.shown(turn, { messages: [], freshContext: call.newContext });
    conversation.answered(call);
  });
  const contexts = 1 + calls.filter((call) => call.newContext).length;
  if (contexts > 1) conversation.show(`${plural(calls.length, 'model call')} in ${contexts} contexts: the agent's history did not continue its earlier calls`);
  if (answer === undefined) return;
  const outcome = await session.turn(answer);
  conversation.answerTaken(outcome);
  tally.answered(outcome);
}

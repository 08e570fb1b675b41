/**
 * The episode of an agent written as a workflow of its own (`agent.name: workflow`): the task's
 * prompt goes to the agent's workflow, started as this trajectory's child on the agent's task
 * queue with the run's context in its memo; each of its model calls is a turn of this trajectory
 * (activities/agentModel.ts, routed there by workflows/agentModelCalls.ts in the agent's worker).
 * Its answer goes to the environment, which scores it. The agent's workflow is as durable as this
 * one: a crashed worker costs at most the call in flight, and a retried call is answered from the
 * store.
 */
import { ApplicationFailure, executeChild, isCancellation, TemporalFailure } from '@temporalio/workflow';
import { AGENT_CALL_MEMO, agentTaskQueue, MODEL_CALL_LIMIT } from '../../src/core/agentCallContext';
import type { WorkflowAgentOptions } from '../../src/plugins/builtins';
import { failureReason } from '../activityFailures';
import type { TrajectoryInput } from '../types';
import type { TrajectoryActivities } from './activities';
import type { Episode } from './episode';
import { callContextOf, endExternalEpisode, taskPromptOf } from './externalAgent';

export async function playAgentWorkflow(input: TrajectoryInput, activities: TrajectoryActivities, episode: Episode): Promise<void> {
  const { session, tally, conversation } = episode;
  const agent = input.agent as TrajectoryInput['agent'] & WorkflowAgentOptions;
  conversation.show('opening the environment session');
  const prompt = taskPromptOf(await session.open());
  conversation.show(`agent workflow ${agent.workflowType} is working on the task`);

  let answer: string | undefined;
  try {
    const result = await executeChild(agent.workflowType, {
      workflowId: `${input.trajectoryId}-agent`,
      taskQueue: agentTaskQueue(agent.taskQueue, input.taskQueues.workflows),
      args: [prompt],
      memo: { [AGENT_CALL_MEMO]: callContextOf(input, agent.toolCallFormat) },
      staticSummary: `agent ${agent.workflowType} of trajectory ${input.trajectoryId}`,
    });
    answer = answerOf(result);
    if (answer === undefined)
      tally.end(
        'failed',
        `agent workflow ${agent.workflowType} returned ${JSON.stringify(result)?.slice(0, 200)}: trajflow reads a string, or an object with a string \`text\``,
      );
  } catch (err) {
    if (!(err instanceof TemporalFailure) || isCancellation(err)) throw err;
    if (causeTypes(err).includes(MODEL_CALL_LIMIT))
      tally.end('max_turns', `the agent workflow asked for more than ${agent.maxTurns} model calls (agent.maxTurns)`);
    else tally.end('failed', `agent workflow ${agent.workflowType} failed: ${failureReason(err)}`);
  }
  await endExternalEpisode(input, activities, episode, `agent workflow ${agent.workflowType}`, answer);
}

/** The agent's answer: its result if a string, else the result's `text` (the AI SDK's generateText result has one). */
function answerOf(result: unknown): string | undefined {
  if (typeof result === 'string') return result;
  const text = (result as { text?: unknown } | null)?.text;
  return typeof text === 'string' ? text : undefined;
}

/** The failure types along a failure's chain of causes. */
function causeTypes(err: unknown): string[] {
  const types: string[] = [];
  for (let at: unknown = err; at instanceof Error; at = at.cause) if (at instanceof ApplicationFailure && at.type) types.push(at.type);
  return types;
}

/**
 * The episode of an agent program (`agent.name: program`): a program in any language that calls
 * trajflow's OpenAI-compatible endpoint. An env worker runs it (activities/agentProgram.ts); each
 * of its model calls reaches this workflow as an update from the endpoint and is answered by an
 * `invokeModel` activity on the inference queue, stored as a turn of this trajectory exactly as an
 * AI SDK agent's call is. Its answer (what it printed) goes to the environment, unless it reported
 * a reward of its own through the endpoint, which then is the episode's.
 */
import { allHandlersFinished, condition, isCancellation, proxyActivities, setHandler, TemporalFailure } from '@temporalio/workflow';
import type { AgentModelActivities } from '../../activities/agentModel';
import type { AgentProgramActivities } from '../../activities/agentProgram';
import { ACTIVITY_HEARTBEAT_TIMEOUT } from '../../src/core/liveness';
import type { ProgramAgentOptions } from '../../src/plugins/builtins';
import { failureReason } from '../activityFailures';
import { agentModelCallUpdate, agentRewardSignal } from '../signals';
import type { TrajectoryInput } from '../types';
import type { TrajectoryActivities } from './activities';
import type { Episode } from './episode';
import { callContextOf, endExternalEpisode, taskPromptOf } from './externalAgent';

export async function playAgentProgram(input: TrajectoryInput, activities: TrajectoryActivities, episode: Episode): Promise<void> {
  const { session, tally, conversation } = episode;
  const agent = input.agent as TrajectoryInput['agent'] & ProgramAgentOptions;
  const { invokeModel } = proxyActivities<AgentModelActivities>({
    taskQueue: input.taskQueues.inference,
    startToCloseTimeout: '10 minutes',
    heartbeatTimeout: ACTIVITY_HEARTBEAT_TIMEOUT,
    retry: { initialInterval: '1 second', maximumInterval: '10 seconds' },
  });
  const { runAgentProgram } = proxyActivities<AgentProgramActivities>({
    taskQueue: input.taskQueues.env,
    startToCloseTimeout: `${input.agent.episodeTimeoutS} seconds`,
    heartbeatTimeout: ACTIVITY_HEARTBEAT_TIMEOUT,
    retry: { initialInterval: '1 second', maximumAttempts: 3 },
  });
  const context = callContextOf(input, agent.toolCallFormat);
  let reportedReward: number | undefined;
  setHandler(agentModelCallUpdate, (call) => invokeModel({ ...call, trajflow: context }));
  setHandler(agentRewardSignal, (reward) => void (reportedReward = reward));

  conversation.show('opening the environment session');
  const prompt = taskPromptOf(await session.open());
  const program = agent.command.join(' ');
  conversation.show(`agent program \`${program}\` is working on the task`);
  let answer: string | undefined;
  try {
    ({ answer } = await runAgentProgram({ trajectoryId: input.trajectoryId, command: agent.command, cwd: agent.cwd!, prompt, endpoint: agent.endpoint! }));
  } catch (err) {
    if (!(err instanceof TemporalFailure) || isCancellation(err)) throw err;
    tally.end('failed', `agent program \`${program}\` failed: ${failureReason(err)}`);
  }
  // Model calls the endpoint handed over finish before the episode is counted.
  await condition(allHandlersFinished);
  if (reportedReward === undefined) return endExternalEpisode(input, activities, episode, `agent program \`${program}\``, answer);
  await endExternalEpisode(input, activities, episode, `agent program \`${program}\``, undefined);
  if (answer !== undefined) tally.reported(reportedReward);
}

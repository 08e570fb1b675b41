/**
 * One episode as workflows/trajectory.ts plays it, minus Temporal: the same activity functions
 * in the same order (open the session, per turn generate then hand the answer to the session,
 * close unless its last turn did, score, record), called in-process inside a mock activity
 * context (heartbeats and cancellation signals need one), with the workflow's own tally of the
 * episode.
 */
import { MockActivityEnvironment } from '@temporalio/testing';
import type { createEnvActivities, createSessionActivities } from '../../activities/environment';
import type { InferenceActivities } from '../../activities/inference';
import { episodeReward } from '../../src/core/episode';
import { sessionIdOf } from '../../src/core/ids';
import type { TrajectorySummary } from '../../src/core/records';
import { generateInputOf, policyRequirementOf } from '../../workflows/trajectory/generateInput';
import { EpisodeTally } from '../../workflows/trajectory/tally';
import type { TrajectoryInput } from '../../workflows/types';

export interface InProcessActivities {
  env: ReturnType<typeof createEnvActivities>;
  session: ReturnType<typeof createSessionActivities>;
  inference: InferenceActivities;
}

export async function playInProcess({ env, session, inference }: InProcessActivities, input: TrajectoryInput): Promise<TrajectorySummary> {
  const { runId, trajectoryId } = input;
  const context = new MockActivityEnvironment();
  const call = <T>(fn: () => Promise<T>): Promise<T> => context.run(fn) as Promise<T>;
  const tally = new EpisodeTally(input);
  const policy = policyRequirementOf(input);
  const sessionId = sessionIdOf(trajectoryId, 0);
  const opened = await call(() =>
    env.openSession({ sessionId, runId, env: input.env, agent: input.agent, envSeed: input.envSeed, replayAnswers: [], compatibility: input.compatibility }),
  );
  let environmentMs = opened.activityMs;
  let next = opened.next;
  let sessionClosed = false;
  try {
    while (tally.turns < input.agent.maxTurns) {
      const turn = tally.turns;
      const reply = await call(() => inference.generate(generateInputOf(input, turn, next, policy)));
      if (reply.completionTokens === 0 && reply.finishReason === 'context') {
        tally.end('max_context', `context full (${reply.contextTokens} tokens) before turn ${turn}`);
        break;
      }
      tally.generated(reply);
      const outcome = await call(() => session.sessionTurn({ sessionId, turn, text: reply.text }));
      environmentMs += outcome.activityMs;
      sessionClosed = outcome.sessionClosed === true;
      if (tally.answered(outcome) === 'ended') break;
      next = outcome.next!;
    }
  } finally {
    if (!sessionClosed) await call(() => session.closeSession({ sessionId }));
  }
  const summary = tally.summary(episodeReward(tally, input.reward.formatWeight), 0, environmentMs);
  await call(() => env.recordTrajectory(summary));
  return summary;
}

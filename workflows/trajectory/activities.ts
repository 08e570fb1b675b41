/**
 * The activities a trajectory calls, and where each runs: `generate` on the inference queue; the
 * session's opening and the record on the env queue (and `computeReward`, which only trajectories
 * recorded before `PATCHES.rewardInWorkflow` call); its turns and close on the queue of the worker
 * holding it. With `env.sessions: local` the session lives in this workflow worker and
 * everything but `generate` runs as local activities; with `inference.calls: local`, `generate`
 * does too. A local activity costs no server round trip and no activity events.
 */
import { type ActivityFunction, proxyActivities, proxyLocalActivities, type RetryPolicy } from '@temporalio/workflow';
import type { EnvActivities, SessionActivities } from '../../activities/environment';
import type { InferenceActivities } from '../../activities/inference';
import { SESSION_LOST } from '../../src/core/failures';
import { ACTIVITY_HEARTBEAT_TIMEOUT } from '../../src/core/liveness';
import type { TrajectoryInput } from '../types';

const ENV_RETRY: RetryPolicy = { initialInterval: '1 second', maximumInterval: '10 seconds', maximumAttempts: 10 };
/** A lost session is not retried where it was lost: the trajectory rebuilds it elsewhere. */
const SESSION_RETRY: RetryPolicy = { initialInterval: '1 second', maximumAttempts: 3, nonRetryableErrorTypes: [SESSION_LOST] };

/**
 * An activity that also takes a Web UI summary per call (`executeWithOptions` merges it into the
 * proxy's options), whether it runs as a remote or a local activity.
 */
export type Summarized<F extends ActivityFunction> = F & {
  executeWithOptions(options: { summary: string }, args: Parameters<F>): Promise<Awaited<ReturnType<F>>>;
};

export interface TrajectoryActivities {
  generate: Summarized<InferenceActivities['generate']>;
  openSession: Summarized<EnvActivities['openSession']>;
  computeReward: Summarized<EnvActivities['computeReward']>;
  recordTrajectory: Summarized<EnvActivities['recordTrajectory']>;
  agentCalls: Summarized<EnvActivities['agentCalls']>;
  /** The turn and close activities of a session held by the worker polling `sessionQueue`. */
  sessionAt(sessionQueue: string): { [K in keyof SessionActivities]: Summarized<SessionActivities[K]> };
}

const GENERATE_RETRY: RetryPolicy = { initialInterval: '1 second', maximumInterval: '10 seconds' };

export function trajectoryActivities(input: TrajectoryInput): TrajectoryActivities {
  const { generate } =
    input.inferenceCalls === 'local'
      ? proxyLocalActivities<InferenceActivities>({ startToCloseTimeout: '10 minutes', retry: GENERATE_RETRY })
      : proxyActivities<InferenceActivities>({
          taskQueue: input.taskQueues.inference,
          startToCloseTimeout: '10 minutes',
          heartbeatTimeout: ACTIVITY_HEARTBEAT_TIMEOUT,
          retry: GENERATE_RETRY,
        });
  const envActivities = proxyActivities<EnvActivities>({
    taskQueue: input.taskQueues.env,
    startToCloseTimeout: '10 minutes',
    heartbeatTimeout: ACTIVITY_HEARTBEAT_TIMEOUT,
    retry: ENV_RETRY,
  });
  if (input.env.sessions === 'local') {
    const { openSession, computeReward, recordTrajectory, agentCalls } = proxyLocalActivities<EnvActivities>({
      startToCloseTimeout: '10 minutes',
      retry: ENV_RETRY,
    });
    const localSession = proxyLocalActivities<SessionActivities>({ startToCloseTimeout: '10 minutes', retry: SESSION_RETRY });
    return { generate, openSession, computeReward, recordTrajectory, agentCalls, sessionAt: () => localSession };
  }
  const { openSession, computeReward, recordTrajectory, agentCalls } = envActivities;
  // Turns must reach the worker holding the session; if it is gone, nobody polls its queue and
  // schedule-to-start times out, which is the signal to rebuild the session. A live worker always
  // has a poll waiting on its own queue, so a turn starts there within milliseconds.
  const sessionAt = (sessionQueue: string) =>
    proxyActivities<SessionActivities>({
      taskQueue: sessionQueue,
      scheduleToStartTimeout: input.env.sessionLostAfterS * 1000,
      startToCloseTimeout: '10 minutes',
      heartbeatTimeout: ACTIVITY_HEARTBEAT_TIMEOUT,
      retry: SESSION_RETRY,
    });
  return { generate, openSession, computeReward, recordTrajectory, agentCalls, sessionAt };
}

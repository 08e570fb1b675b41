/**
 * The failure types that cross between activities and workflows: an activity throws an
 * ApplicationFailure of one of these types, a workflow recognises it by the same constant. Pure
 * strings, no Temporal import, so workflows and activities both import this one file.
 */
import type { TrajectoryStatus } from './records';

/** The session a turn was routed to is not held by the worker (it restarted, or is out of step): rebuild it. */
export const SESSION_LOST = 'SessionLost';

/** A worker whose code or config differs from the run's refused the task (retryable: a matching worker may take it). */
export const WORKER_MISMATCH = 'WorkerMismatch';

/** The trainer was given a config it cannot train with. */
export const INVALID_CONFIG = 'InvalidConfig';

/** Episode failures (non-retryable), by who failed: the environment, the reward, or the agent code. */
export const EPISODE_FAILURES = {
  environment: 'EnvironmentError',
  reward: 'RewardError',
  agent: 'AgentError',
} as const;

/** One environment turn (or opening a session) took longer than the env's `turnTimeoutS`. */
export const ENV_TURN_TIMEOUT = 'EnvStepTimeout';

/** Failure types that end an episode without a result, and the trajectory status each gives. */
export const EPISODE_FAILURE_STATUS: Readonly<Record<string, TrajectoryStatus>> = {
  [EPISODE_FAILURES.environment]: 'failed',
  [EPISODE_FAILURES.reward]: 'failed',
  [EPISODE_FAILURES.agent]: 'failed',
  [ENV_TURN_TIMEOUT]: 'env_timeout',
};

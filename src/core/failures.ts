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

/**
 * A stored file (a turn, a summary, a checkpoint) failed its length or checksum check: its data is
 * never used, and it is not retried (a retry reads the same bytes).
 */
export const CORRUPT_STORED_FILE = 'CorruptStoredFile';

/** The data directory's filesystem is full: the write was undone, and the activity retries. */
export const DISK_FULL = 'DiskFull';

/** Episode failures (non-retryable), by who failed: the environment, the reward, or the agent code. */
export const EPISODE_FAILURES = {
  environment: 'EnvironmentError',
  reward: 'RewardError',
  agent: 'AgentError',
} as const;

/** One environment turn (or opening a session) took longer than the env's `turnTimeoutS`. */
export const ENV_TURN_TIMEOUT = 'EnvStepTimeout';

/** An activity's result is larger than Temporal may carry in workflow history (activities/payloadLimit.ts). */
export const PAYLOAD_TOO_LARGE = 'PayloadTooLarge';

/** An activity's result cannot be serialized for Temporal (a BigInt or a cycle in what a plugin returned). */
export const PAYLOAD_UNSERIALIZABLE = 'PayloadUnserializable';

/** Failure types that end an episode without a result, and the trajectory status each gives. */
export const EPISODE_FAILURE_STATUS: Readonly<Record<string, TrajectoryStatus>> = {
  [EPISODE_FAILURES.environment]: 'failed',
  [EPISODE_FAILURES.reward]: 'failed',
  [EPISODE_FAILURES.agent]: 'failed',
  // A stored turn of the episode is corrupt: the episode cannot go on from it.
  [CORRUPT_STORED_FILE]: 'failed',
  [ENV_TURN_TIMEOUT]: 'env_timeout',
  [PAYLOAD_TOO_LARGE]: 'failed',
  [PAYLOAD_UNSERIALIZABLE]: 'failed',
};

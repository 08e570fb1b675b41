/** Recognising the failures activities report to a workflow (types in src/core/failures). */
import { ActivityFailure, ApplicationFailure, TimeoutFailure } from '@temporalio/workflow';
import { EPISODE_FAILURE_STATUS, SESSION_LOST } from '../src/core/failures';
import type { TrajectoryStatus } from '../src/core/records';

/**
 * What an activity's failure came from: an activity's failure reaches the workflow wrapped in an
 * ActivityFailure, a local activity's as the failure itself.
 */
export function activityCause(err: unknown): unknown {
  return err instanceof ActivityFailure ? err.cause : err;
}

/** Whether the environment session a turn went to is gone, so it must be rebuilt. */
export function isSessionLost(err: unknown): boolean {
  const cause = activityCause(err);
  // A timeout only from an activity: nobody polled the lost worker's session queue.
  return (err instanceof ActivityFailure && cause instanceof TimeoutFailure) || (cause instanceof ApplicationFailure && cause.type === SESSION_LOST);
}

/** The status and reason of an episode that could not finish, or undefined for other errors. */
export function episodeFailure(err: unknown): { status: TrajectoryStatus; reason: string } | undefined {
  const cause = activityCause(err);
  if (!(cause instanceof ApplicationFailure)) return undefined;
  const status = EPISODE_FAILURE_STATUS[cause.type ?? ''];
  return status ? { status, reason: cause.message } : undefined;
}

/** Recognising the failures activities report to a workflow (types in src/core/failures). */
import { ActivityFailure, ApplicationFailure, ChildWorkflowFailure, isCancellation, TemporalFailure, TimeoutFailure } from '@temporalio/workflow';
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

/**
 * The status and reason of an episode that could not finish, or undefined for errors that are no
 * activity's (a cancellation, a bug in workflow code). A failure of a known type gives its status
 * and message; any other activity failure (its retries spent, or refused by the server) fails the
 * episode with the whole chain of causes as the reason.
 */
export function episodeFailure(err: unknown): { status: TrajectoryStatus; reason: string } | undefined {
  if (!(err instanceof TemporalFailure) || isCancellation(err)) return undefined;
  const cause = activityCause(err);
  const status = cause instanceof ApplicationFailure ? EPISODE_FAILURE_STATUS[cause.type ?? ''] : undefined;
  return status ? { status, reason: (cause as ApplicationFailure).message } : { status: 'failed', reason: failureReason(err) };
}

/**
 * A failure in words, cause after cause: `sessionTurn failed: Complete result exceeds size limit.`
 * rather than the outermost "Activity task failed" or "Child Workflow execution failed".
 */
export function failureReason(err: unknown): string {
  const parts: string[] = [];
  for (let at: unknown = err; at !== undefined && at !== null; at = at instanceof Error ? at.cause : undefined) {
    if (at instanceof ChildWorkflowFailure) continue;
    if (at instanceof ActivityFailure) parts.push(`${at.activityType} failed`);
    else if (at instanceof TimeoutFailure) parts.push(at.message || `${at.timeoutType} timeout`);
    else parts.push(at instanceof Error ? at.message : String(at));
  }
  return parts.join(': ') || String(err);
}

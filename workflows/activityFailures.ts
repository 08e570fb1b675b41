import { ActivityFailure } from '@temporalio/workflow';

/**
 * What an activity's failure came from: an activity's failure reaches the workflow wrapped in an
 * ActivityFailure, a local activity's as the failure itself.
 */
export function activityCause(err: unknown): unknown {
  return err instanceof ActivityFailure ? err.cause : err;
}

/**
 * Waiting out workers that do not match the run. A worker whose code or config differs from the
 * run's refuses its tasks (activities/compatibility.ts); once Temporal's retries of such a refusal
 * run out, the workflow keeps asking instead of failing, since a matching worker may yet start.
 */
import { ApplicationFailure, log, sleep } from '@temporalio/workflow';
import { WORKER_MISMATCH } from '../src/core/failures';
import { activityCause } from './activityFailures';
import { timerSummary } from './summaries';

const ASK_AGAIN_AFTER = '10 seconds';

export function isWorkerMismatch(err: unknown): boolean {
  const cause = activityCause(err);
  return cause instanceof ApplicationFailure && cause.type === WORKER_MISMATCH;
}

/** `call`, again and again while only mismatched workers answer it. */
export async function untilMatchingWorker<T>(what: string, call: () => Promise<T>): Promise<T> {
  for (;;) {
    try {
      return await call();
    } catch (err) {
      if (!isWorkerMismatch(err)) throw err;
      log.warn(`no worker matching this run took ${what} yet; asking again in ${ASK_AGAIN_AFTER}`, {
        reason: (activityCause(err) as ApplicationFailure).message,
      });
      await sleep(ASK_AGAIN_AFTER, { summary: timerSummary.askAgain(ASK_AGAIN_AFTER, what) });
    }
  }
}

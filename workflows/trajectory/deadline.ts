/** A time limit on part of a workflow, as a cancellation scope that a timer cancels. */
import { CancellationScope, isCancellation, sleep } from '@temporalio/workflow';

/** Runs `fn`, cancelling it when `ms` pass; says whether the deadline cut it short. `summary` names the timer in the Web UI. */
export async function withDeadline(ms: number, summary: string, fn: () => Promise<void>): Promise<'finished' | 'expired'> {
  let expired = false;
  await CancellationScope.cancellable(async () => {
    const episodeScope = CancellationScope.current();
    const timerScope = new CancellationScope();
    void timerScope
      .run(() => sleep(ms, { summary }))
      .then(
        () => {
          expired = true;
          episodeScope.cancel();
        },
        () => undefined,
      );
    try {
      await fn();
    } catch (err) {
      if (!(expired && isCancellation(err))) throw err;
    } finally {
      timerScope.cancel();
    }
  });
  return expired ? 'expired' : 'finished';
}

/** Polling a running workflow for its progress, without piling up queries or outliving the connection. */
import type { Client } from '@temporalio/client';

export interface Poller {
  /** Stops polling and cancels a query still in flight; resolves once it has settled, so the connection can close after it. */
  stop(): Promise<void>;
}

/**
 * How long one progress query may wait for its answer. A query waits for a workflow worker, and a
 * SIGTERM shuts this process's workers down at once (the Temporal runtime's own handler): a query
 * then waits for its deadline, holding up the caller's stop. Cancelling it on stop is not enough
 * alone: the client cancels a call when its signal aborts, not one started after the abort.
 */
export const PROGRESS_QUERY_DEADLINE_MS = 3_000;

/**
 * Calls `query` every `intervalMs`, at most one call in flight (a slow or retrying query skips
 * ticks instead of piling up), errors ignored: progress is best effort. `query` runs its gRPC call
 * under the signal it is given (`client.withAbortSignal`), which `stop` aborts. A query left
 * running when the caller closes its connection would retry on the closed channel and crash the
 * process.
 */
export function pollEvery(intervalMs: number, query: (signal: AbortSignal) => Promise<void>): Poller {
  let inFlight: { call: Promise<void>; controller: AbortController } | undefined;
  const timer = setInterval(() => {
    if (inFlight) return;
    const controller = new AbortController();
    const call = query(controller.signal)
      .catch(() => undefined)
      .finally(() => {
        inFlight = undefined;
      });
    inFlight = { call, controller };
  }, intervalMs);
  return {
    async stop() {
      clearInterval(timer);
      inFlight?.controller.abort();
      await inFlight?.call;
    },
  };
}

/** A run's progress once a second: `query`'s answer to `onStatus`, each query cancelled on stop and bounded by PROGRESS_QUERY_DEADLINE_MS. */
export function pollProgress<S>(client: Client, query: () => Promise<S>, onStatus: (status: S) => void): Poller {
  return pollEvery(1_000, async (signal) =>
    onStatus(await client.withAbortSignal(signal, () => client.withDeadline(Date.now() + PROGRESS_QUERY_DEADLINE_MS, query))),
  );
}

/** Polling a running workflow for its progress, without piling up queries or outliving the connection. */

export interface Poller {
  /** Stops polling and cancels a query still in flight; resolves once it has settled, so the connection can close after it. */
  stop(): Promise<void>;
}

/**
 * Calls `query` every `intervalMs`, at most one call in flight (a slow or retrying query skips
 * ticks instead of piling up), errors ignored: progress is best effort. `query` runs its gRPC call
 * under the signal it is given (`client.withAbortSignal`), which `stop` aborts: a query waits for
 * a worker to answer, and a SIGTERM shuts this process's workers down at once (the Temporal
 * runtime's own handler), so a query in flight then would wait for its deadline and hold the
 * caller's shutdown with it. A query left running when the caller closes its connection would
 * retry on the closed channel and crash the process.
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

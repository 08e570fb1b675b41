/** Polling a running workflow for its progress, without piling up queries or outliving the connection. */

export interface Poller {
  /** Stops polling and waits for a query still in flight, so the connection can close after it. */
  stop(): Promise<void>;
}

/**
 * Calls `query` every `intervalMs`, at most one call in flight (a slow or retrying query skips
 * ticks instead of piling up), errors ignored: progress is best effort. A query left running when
 * the caller closes its connection would retry on the closed channel and crash the process.
 */
export function pollEvery(intervalMs: number, query: () => Promise<void>): Poller {
  let inFlight: Promise<void> | undefined;
  const timer = setInterval(() => {
    inFlight ??= query()
      .catch(() => undefined)
      .finally(() => {
        inFlight = undefined;
      });
  }, intervalMs);
  return {
    async stop() {
      clearInterval(timer);
      await inFlight;
    },
  };
}

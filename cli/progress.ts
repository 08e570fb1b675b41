/** Progress of long work: a redrawn bar on a TTY, a log line every few seconds otherwise. */
export interface Progress {
  update(done: number, detail: string): void;
  finish(): void;
}

export function createProgress(label: string, total: number, stream: NodeJS.WriteStream = process.stderr, intervalMs = 5_000): Progress {
  let lastLine = 0;
  const startedAt = Date.now();
  const elapsed = () => `${((Date.now() - startedAt) / 1000).toFixed(0)}s`;
  if (stream.isTTY) {
    const width = 30;
    return {
      update(done, detail) {
        const filled = Math.round((Math.min(done, total) / total) * width);
        stream.write(`\r${label} [${'#'.repeat(filled)}${'-'.repeat(width - filled)}] ${done}/${total} ${elapsed()} ${detail}\x1b[K`);
      },
      finish() {
        stream.write('\n');
      },
    };
  }
  return {
    update(done, detail) {
      if (Date.now() - lastLine < intervalMs && done < total) return;
      lastLine = Date.now();
      stream.write(`${label}: ${done}/${total} after ${elapsed()} ${detail}\n`);
    },
    finish() {},
  };
}

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

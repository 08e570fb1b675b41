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

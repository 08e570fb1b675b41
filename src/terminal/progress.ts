/** Progress of long work: a bar on a terminal's status line, else a log record every few seconds. */
import type { Logger } from '../log';
import type { StatusLine } from './statusLine';

export interface Progress {
  update(done: number, detail: string): void;
  finish(): void;
}

export interface ProgressOutput {
  /** Draw a bar here (a person at a terminal); without it, progress is logged. */
  statusLine?: StatusLine;
  logger: Logger;
  /** How often progress is logged (not drawn). */
  intervalMs?: number;
}

const BAR_WIDTH = 30;

export function createProgress(label: string, total: number, output: ProgressOutput): Progress {
  const startedAt = Date.now();
  const elapsedSeconds = () => Math.round((Date.now() - startedAt) / 1000);
  const { statusLine, logger, intervalMs = 5_000 } = output;
  if (statusLine) {
    return {
      update(done, detail) {
        const filled = Math.round((Math.min(done, total) / total) * BAR_WIDTH);
        statusLine.draw(`${label} [${'#'.repeat(filled)}${'-'.repeat(BAR_WIDTH - filled)}] ${done}/${total} ${elapsedSeconds()}s ${detail}`);
      },
      finish: () => statusLine.finish(),
    };
  }
  let loggedAt = 0;
  return {
    update(done, detail) {
      if (Date.now() - loggedAt < intervalMs && done < total) return;
      loggedAt = Date.now();
      logger.info({ progress: label, done, total, elapsedSeconds: elapsedSeconds() }, `${label}: ${done}/${total} after ${elapsedSeconds()}s ${detail}`);
    },
    finish() {},
  };
}

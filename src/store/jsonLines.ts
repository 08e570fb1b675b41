/**
 * JSON Lines files a run appends to (train/metrics.jsonl, train/eval.jsonl): one sealed record a
 * line (files.ts), written by one process, read by any.
 */
import { promises as fs } from 'node:fs';
import { createLogger, type Logger } from '../log';
import { appendLine, CorruptFileError, sealRecord, unsealRecord, type WriteOptions } from './files';

let storeLogger: Logger | undefined;

/** Appends `record` as one sealed line, durably, creating the folder on first use. */
export function appendJsonLine(file: string, record: unknown, options: WriteOptions = {}): Promise<void> {
  return appendLine(file, sealRecord(record).toString('utf8'), options);
}

/**
 * The records of a JSON Lines file (none if there is no file), the last one per key, sorted by
 * key: a retried step or evaluation may have appended its line twice. A line that fails its
 * length or checksum check (torn by a crash mid-append, or corrupt) is skipped, with a warning.
 */
export async function readJsonLines<T>(file: string, keyOf: (record: T) => number, logger?: Logger): Promise<T[]> {
  const bytes = await fs.readFile(file).catch(() => Buffer.alloc(0));
  const byKey = new Map<number, T>();
  let start = 0;
  for (let lineNumber = 1; start < bytes.length; lineNumber++) {
    const newline = bytes.indexOf(0x0a, start);
    const end = newline < 0 ? bytes.length : newline;
    const line = bytes.subarray(start, end);
    start = end + 1;
    if (line.toString('utf8').trim() === '') continue;
    let record: T;
    try {
      record = unsealRecord(line, file) as T;
    } catch (err) {
      if (!(err instanceof CorruptFileError)) throw err;
      const log = logger ?? (storeLogger ??= createLogger('store'));
      log.warn({ file, line: lineNumber, reason: err.reason }, 'skipping a torn or corrupt JSON line');
      continue;
    }
    byKey.set(keyOf(record), record);
  }
  return [...byKey.entries()].sort(([a], [b]) => a - b).map(([, record]) => record);
}

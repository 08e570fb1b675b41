/**
 * JSON Lines files a run appends to (train/metrics.jsonl, train/eval.jsonl): one record a line,
 * written by one process, read by any.
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';

/** Appends `record` as one JSON line, creating the folder on first use. */
export async function appendJsonLine(file: string, record: unknown): Promise<void> {
  await fs.mkdir(path.dirname(file), { recursive: true });
  await fs.appendFile(file, `${JSON.stringify(record)}\n`);
}

/**
 * The records of a JSON Lines file (none if there is no file), the last one per key, sorted by
 * key: a retried step or evaluation may have appended its line twice. A line that does not parse
 * (cut by a crash mid-append) is skipped.
 */
export async function readJsonLines<T>(file: string, keyOf: (record: T) => number): Promise<T[]> {
  const text = await fs.readFile(file, 'utf8').catch(() => '');
  const byKey = new Map<number, T>();
  for (const line of text.split('\n')) {
    if (!line.trim()) continue;
    let record: T;
    try {
      record = JSON.parse(line) as T;
    } catch {
      continue;
    }
    byKey.set(keyOf(record), record);
  }
  return [...byKey.entries()].sort(([a], [b]) => a - b).map(([, record]) => record);
}

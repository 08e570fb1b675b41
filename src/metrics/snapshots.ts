/**
 * Counters a worker process publishes to `<dir>/<workerId>.json` twice a second, so other
 * processes (the CLI, the trainer) can difference two snapshots over an interval without talking
 * to the worker. Used for the inference engine's busy time and the env workers'. A reader's
 * interval is the one between the snapshots it finds (./busy), so the more often they are written,
 * the closer it is to the interval the reader asked about: train steps take one to a few seconds.
 */
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { CorruptFileError, readJson, writeJsonAtomically } from '../store/files';

export type Snapshot<T> = T & { workerId: string; writtenAt: number };

export class SnapshotReporter<T extends object> {
  readonly workerId = `${os.hostname()}-${process.pid}`;
  private timer?: NodeJS.Timeout;

  constructor(
    private readonly read: () => T | Promise<T>,
    private readonly dir: string,
    private readonly intervalMs = 500,
  ) {}

  start(): void {
    this.timer = setInterval(() => void this.flush().catch(() => undefined), this.intervalMs);
    this.timer.unref();
  }

  async flush(): Promise<void> {
    const snapshot: Snapshot<T> = { ...(await this.read()), workerId: this.workerId, writtenAt: Date.now() };
    // Not fsynced: the next snapshot replaces it within a second, and one lost to a machine crash
    // costs a utilization figure, where an fsync twice a second per worker costs disk time.
    await writeJsonAtomically(path.join(this.dir, `${this.workerId}.json`), snapshot, { durable: false });
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.flush().catch(() => undefined);
  }
}

/**
 * Every worker's latest snapshot in `dir` (none if the directory does not exist yet). A corrupt
 * one is left out: a utilization figure is not worth failing a train step for.
 */
export async function readSnapshots<T>(dir: string): Promise<Snapshot<T>[]> {
  const names = await fs.readdir(dir).catch(() => [] as string[]);
  const readSnapshot = (file: string) =>
    readJson<Snapshot<T>>(file).catch((err: unknown) => (err instanceof CorruptFileError ? undefined : Promise.reject(err)));
  const snapshots: (Snapshot<T> | undefined)[] = await Promise.all(names.filter((n) => n.endsWith('.json')).map((n) => readSnapshot(path.join(dir, n))));
  return snapshots.filter((s) => s !== undefined) as Snapshot<T>[];
}

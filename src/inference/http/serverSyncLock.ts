/**
 * One weight sync per model server across processes. A vLLM sync is several calls (pause, label,
 * reload, label, resume); two inference processes interleaving theirs would leave one process's
 * weights under the other's label. Every process that syncs a server takes this lock first: a
 * folder created atomically (mkdir, atomic on local and network filesystems) in a directory all
 * of them share, the data directory's `locks/`.
 *
 * The holder touches the folder while it holds it; a folder untouched for `staleMs` belongs to a
 * process that died holding it and is taken over (its half-done sync is redone by the taker).
 */
import { createHash } from 'node:crypto';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

export interface SyncLockOptions {
  /** A lock untouched this long is taken over (default 60 s). */
  staleMs?: number;
  /** How often a waiter looks again (default 250 ms). */
  pollMs?: number;
}

const DEFAULT_STALE_MS = 60_000;
const DEFAULT_POLL_MS = 250;

export class ServerSyncLock {
  private readonly staleMs: number;
  private readonly pollMs: number;

  constructor(
    readonly dir: string,
    { staleMs = DEFAULT_STALE_MS, pollMs = DEFAULT_POLL_MS }: SyncLockOptions = {},
  ) {
    this.staleMs = staleMs;
    this.pollMs = pollMs;
  }

  /** The lock folder of one server. */
  lockPath(serverUrl: string): string {
    return path.join(this.dir, `server-${createHash('sha256').update(serverUrl).digest('hex').slice(0, 16)}.lock`);
  }

  /** Runs `work` holding `serverUrl`'s lock; waits for it (or until `signal` aborts). */
  async hold<T>(serverUrl: string, work: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    const lock = this.lockPath(serverUrl);
    await this.acquire(lock, serverUrl, signal);
    const touch = setInterval(
      () => {
        const now = new Date();
        fs.utimes(lock, now, now).catch(() => undefined);
      },
      Math.max(10, this.staleMs / 4),
    );
    try {
      return await work();
    } finally {
      clearInterval(touch);
      await fs.rm(lock, { recursive: true, force: true });
    }
  }

  private async isStale(folder: string): Promise<boolean> {
    const stat = await fs.stat(folder).catch(() => undefined);
    return stat !== undefined && Date.now() - stat.mtimeMs > this.staleMs;
  }

  /**
   * Removes a stale lock: renamed aside first, so that of two waiters finding it stale only one
   * removes it. One that finds a live lock aside (another waiter took over between its look and
   * its rename) puts it back.
   */
  private async takeOver(lock: string): Promise<void> {
    const aside = `${lock}.stale-${process.pid}-${Date.now()}`;
    const renamed = await fs.rename(lock, aside).then(
      () => true,
      () => false,
    );
    if (!renamed) return;
    if (await this.isStale(aside)) await fs.rm(aside, { recursive: true, force: true });
    else await fs.rename(aside, lock).catch(() => fs.rm(aside, { recursive: true, force: true }));
  }

  private async acquire(lock: string, serverUrl: string, signal: AbortSignal | undefined): Promise<void> {
    await fs.mkdir(this.dir, { recursive: true });
    for (;;) {
      signal?.throwIfAborted();
      try {
        await fs.mkdir(lock);
        const owner = { server: serverUrl, host: os.hostname(), pid: process.pid, since: new Date().toISOString() };
        await fs.writeFile(path.join(lock, 'owner.json'), JSON.stringify(owner));
        return;
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      }
      if (await this.isStale(lock)) {
        await this.takeOver(lock);
        continue;
      }
      await sleep(this.pollMs, undefined, signal ? { signal } : undefined);
    }
  }
}

/**
 * Publishes an engine's counters to `<dataDir>/engines/<workerId>.json` every few seconds, so the
 * CLI can report how busy the engines were during a run (the difference of two snapshots) without
 * talking to the worker processes.
 */
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { readJson, writeJsonAtomically } from '../store/files';
import type { EngineStats, InferenceProvider } from './provider';

export interface EngineSnapshot extends EngineStats {
  workerId: string;
  writtenAt: number;
}

export class EngineStatsReporter {
  readonly workerId = `${os.hostname()}-${process.pid}`;
  private timer?: NodeJS.Timeout;

  constructor(private readonly provider: InferenceProvider, private readonly dir: string, private readonly intervalMs = 2_000) {}

  start(): void {
    this.timer = setInterval(() => void this.flush().catch(() => undefined), this.intervalMs);
    this.timer.unref();
  }

  async flush(): Promise<void> {
    const snapshot: EngineSnapshot = { ...(await this.provider.stats()), workerId: this.workerId, writtenAt: Date.now() };
    await writeJsonAtomically(path.join(this.dir, `${this.workerId}.json`), snapshot);
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.flush().catch(() => undefined);
  }
}

export async function readEngineSnapshots(dir: string): Promise<EngineSnapshot[]> {
  const names = await fs.readdir(dir).catch(() => [] as string[]);
  const snapshots = await Promise.all(names.filter((n) => n.endsWith('.json')).map((n) => readJson<EngineSnapshot>(path.join(dir, n))));
  return snapshots.filter((s): s is EngineSnapshot => s !== undefined);
}

/**
 * Fraction of wall time the engines spent in forward passes between two sets of snapshots, summed
 * over the engines that reported in both (so with two engines it can reach 2).
 */
export function engineBusyFraction(before: EngineSnapshot[], after: EngineSnapshot[], wallMs: number): number {
  let busy = 0;
  for (const end of after) {
    const start = before.find((s) => s.workerId === end.workerId && s.uptimeMs <= end.uptimeMs);
    busy += end.busyMs - (start?.busyMs ?? 0);
  }
  return wallMs > 0 ? busy / wallMs : 0;
}

/**
 * Publishes an engine's counters to `<dataDir>/engines/<workerId>.json` every few seconds, so the
 * CLI can report how busy the engines were during a run (the difference of two snapshots) without
 * talking to the worker processes.
 */
import { readSnapshots, SnapshotReporter, type Snapshot } from '../metrics/snapshots';
import type { EngineStats, InferenceProvider } from './provider';

export type EngineSnapshot = Snapshot<EngineStats>;

export function engineStatsReporter(provider: InferenceProvider, dir: string): SnapshotReporter<EngineStats> {
  return new SnapshotReporter(() => provider.stats(), dir);
}

export function readEngineSnapshots(dir: string): Promise<EngineSnapshot[]> {
  return readSnapshots<EngineStats>(dir);
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

/**
 * Publishes an engine's counters to `<dataDir>/engines/<workerId>.json` (../metrics/snapshots), so the
 * CLI can report how busy the engines were during a run (the difference of two snapshots) without
 * talking to the worker processes.
 */
import { busyFraction } from '../metrics/busy';
import { readSnapshots, SnapshotReporter, type Snapshot } from '../metrics/snapshots';
import type { EngineStats, InferenceProvider } from './provider';

export type EngineSnapshot = Snapshot<EngineStats>;

export function engineStatsReporter(provider: InferenceProvider, dir: string): SnapshotReporter<EngineStats> {
  return new SnapshotReporter(() => provider.stats(), dir);
}

export function readEngineSnapshots(dir: string): Promise<EngineSnapshot[]> {
  return readSnapshots<EngineStats>(dir);
}

/** Fraction of the engines' time spent in forward passes between two sets of snapshots (see busyFraction). */
export function engineBusyFraction(before: readonly EngineSnapshot[], after: readonly EngineSnapshot[]): number | undefined {
  return busyFraction(before, after);
}

/**
 * How busy something is: the time at least one of its tasks was in flight (busyMs). A worker
 * process counts its activities (the activity interceptor updates the tracker) and publishes the
 * counts like the engine counters (src/inference/statsReporter.ts) to
 * `<dataDir>/env-workers/<workerId>.json` (./snapshots), so the trainer can put each step's env
 * worker busy fraction into metrics.jsonl; the HTTP inference provider counts its requests on the
 * model servers the same way. `busyFraction` reads both kinds of snapshot.
 */
import { readSnapshots, SnapshotReporter, type Snapshot } from './snapshots';

/** Where they publish (named in the data layout; exported here for the workers that import it). */

export interface BusyStats {
  /** Milliseconds since the tracker started, and of those, with at least one activity running. */
  uptimeMs: number;
  busyMs: number;
  /** Sum of activity durations (exceeds busyMs when activities overlap). */
  activityMs: number;
  activities: number;
  inFlight: number;
}

export type BusySnapshot = Snapshot<BusyStats>;

export class BusyTracker {
  private readonly startedAt = performance.now();
  private inFlight = 0;
  private peak = 0;
  private busySince = 0;
  private busyMs = 0;
  private activityMs = 0;
  private completed = 0;

  /** Marks one task started; call the returned function when it ends (extra calls ignored). */
  begin(): () => void {
    const start = performance.now();
    if (this.inFlight++ === 0) this.busySince = start;
    this.peak = Math.max(this.peak, this.inFlight);
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      const now = performance.now();
      this.activityMs += now - start;
      this.completed++;
      if (--this.inFlight === 0) this.busyMs += now - this.busySince;
    };
  }

  stats(): BusyStats {
    const now = performance.now();
    return {
      uptimeMs: now - this.startedAt,
      busyMs: this.busyMs + (this.inFlight > 0 ? now - this.busySince : 0),
      activityMs: this.activityMs,
      activities: this.completed,
      inFlight: this.inFlight,
    };
  }

  /** Most in flight at once since the tracker started (not published: the engine stats carry it). */
  get mostInFlight(): number {
    return this.peak;
  }
}

export function busyReporter(tracker: BusyTracker, dir: string): SnapshotReporter<BusyStats> {
  return new SnapshotReporter(() => tracker.stats(), dir);
}

export function readBusySnapshots(dir: string): Promise<BusySnapshot[]> {
  return readSnapshots<BusyStats>(dir);
}

/** The two counters a busy fraction is read from, both measured by the worker at the same moment. */
export interface BusyCounters {
  uptimeMs: number;
  busyMs: number;
}

/**
 * Fraction of the workers' time they were busy between two sets of snapshots: the busy time each
 * worker counted between its two snapshots over the time that passed for it between them (its
 * uptimes), both summed over the workers, so one busy worker out of two is 0.5. A worker with no
 * earlier snapshot (new, or restarted: its uptime went back) counts from its start.
 *
 * The window is the snapshots' own, not the caller's: a worker publishes every few hundred
 * milliseconds, so its latest snapshot at a step's start or end is that much old, and busy time
 * over a window other than the one it was counted in can exceed it (a 1 s step whose two
 * snapshots were 1.6 s apart, all of it busy, read 160%). Consecutive windows share their
 * snapshots, so no busy time is lost or counted twice across steps. Undefined when no worker's
 * snapshot advanced in between (nothing was measured).
 */
export function busyFraction(before: readonly Snapshot<BusyCounters>[], after: readonly Snapshot<BusyCounters>[]): number | undefined {
  let busyMs = 0;
  let elapsedMs = 0;
  for (const end of after) {
    const start = before.find((s) => s.workerId === end.workerId && s.uptimeMs <= end.uptimeMs) ?? { uptimeMs: 0, busyMs: 0 };
    busyMs += end.busyMs - start.busyMs;
    elapsedMs += end.uptimeMs - start.uptimeMs;
  }
  return elapsedMs > 0 ? busyMs / elapsedMs : undefined;
}

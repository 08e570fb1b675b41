/**
 * How busy something is: the time at least one of its tasks was in flight (busyMs). A worker
 * process counts its activities (the activity interceptor updates the tracker) and publishes the
 * counts like the engine counters (src/inference/statsReporter.ts) to
 * `<dataDir>/env-workers/<workerId>.json` every few seconds, so the trainer can put each step's env
 * worker busy fraction into metrics.jsonl; the HTTP inference provider counts its requests on the
 * model servers the same way.
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

/**
 * Fraction of `wallMs` the workers were busy between two sets of snapshots, summed over the
 * workers that reported in the later set (a worker new since the first counts from its start);
 * undefined when no worker reported.
 */
export function busyFraction(before: readonly BusySnapshot[], after: readonly BusySnapshot[], wallMs: number): number | undefined {
  if (after.length === 0 || wallMs <= 0) return undefined;
  let busy = 0;
  for (const end of after) {
    const start = before.find((s) => s.workerId === end.workerId && s.uptimeMs <= end.uptimeMs);
    busy += Math.max(0, end.busyMs - (start?.busyMs ?? 0));
  }
  return busy / wallMs;
}

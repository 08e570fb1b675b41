/**
 * Busy fractions from published snapshots (src/metrics/busy.ts), the figure behind the "engine
 * busy" column and envBusyFraction. The trainer reads the latest snapshots at a step's start and
 * end; they were written up to one publishing interval earlier, so the fraction must be taken over
 * the snapshots' own window, never the step's wall time.
 */
import { busyFraction } from '../src/metrics/busy';
import { engineBusyFraction, type EngineSnapshot } from '../src/inference/statsReporter';
import { createRng } from '../src/core/random';

const snapshot = (workerId: string, uptimeMs: number, busyMs: number) => ({ workerId, uptimeMs, busyMs, writtenAt: 0 });
const engine = (workerId: string, uptimeMs: number, busyMs: number): EngineSnapshot => ({
  ...snapshot(workerId, uptimeMs, busyMs),
  policyVersion: 0,
  decodeSteps: 0,
  generatedTokens: 0,
  batchSizeSum: 0,
  maxBatchSize: 32,
  running: 0,
  waiting: 0,
});

/**
 * What a worker publishing every `everyMs` shows a reader at time `t` (ms since it started): its
 * counters as of its last publication, busy throughout `busy` ([from, to) intervals).
 */
function publishedAt(workerId: string, t: number, everyMs: number, busy: readonly [number, number][]) {
  const at = Math.floor(t / everyMs) * everyMs;
  const busyMs = busy.reduce((sum, [from, to]) => sum + Math.max(0, Math.min(to, at) - from), 0);
  return engine(workerId, at, busyMs);
}

describe('busy fraction between two sets of snapshots', () => {
  it('reads a short step of an always-busy engine as 100%, not the stale snapshots over the step wall time', () => {
    // Snapshots every 2 s; the step runs from 3.9 s to 5.1 s (1.2 s), so the reader finds the ones
    // written at 2 s and at 4 s: 2 s of busy time in a window of 2 s. Over the step's 1.2 s it
    // read 167%, the "engine busy 164.5%" of npm start.
    const always: [number, number][] = [[0, 60_000]];
    const before = [publishedAt('engine', 3_900, 2_000, always)];
    const after = [publishedAt('engine', 5_100, 2_000, always)];
    expect(engineBusyFraction(before, after)).toBe(1);
  });

  it("counts a worker without an earlier snapshot from its own start, not over the reader's interval", () => {
    // Step 0: the engine started 10 s before the trainer's first look and had not published yet;
    // 6 s of its 12 s were busy. Its whole busy time over the trainer's 2 s step read 300%.
    expect(engineBusyFraction([], [engine('engine', 12_000, 6_000)])).toBe(0.5);
    // Restarted under the same id (its uptime went back): from its new start too.
    expect(busyFraction([snapshot('w', 50_000, 40_000)], [snapshot('w', 2_000, 500)])).toBe(0.25);
  });

  it('averages over workers: one busy engine of two is half busy', () => {
    const before = [engine('a', 1_000, 0), engine('b', 1_000, 0)];
    const after = [engine('a', 3_000, 2_000), engine('b', 3_000, 0)];
    expect(engineBusyFraction(before, after)).toBe(0.5);
  });

  it('says nothing was measured when no snapshot advanced, and ignores a worker gone since', () => {
    const before = [snapshot('a', 1_000, 900), snapshot('gone', 7_000, 7_000)];
    expect(busyFraction(before, before)).toBeUndefined();
    expect(busyFraction(before, [snapshot('a', 2_000, 1_400), snapshot('gone', 7_000, 7_000)])).toBe(0.5);
  });

  it('stays within [0, 1] and adds up over consecutive steps, whatever the step lengths and publishing times', () => {
    const rng = createRng(7);
    for (let run = 0; run < 200; run++) {
      const workers = 1 + Math.floor(rng() * 3);
      const everyMs = 100 + Math.floor(rng() * 2_000);
      const busy = Array.from({ length: workers }, () => {
        const spans: [number, number][] = [];
        for (let t = rng() * 500; t < 60_000; t += rng() * 3_000) spans.push([t, (t += rng() * 3_000)]);
        return spans;
      });
      const marks = [0];
      while (marks[marks.length - 1] < 55_000) marks.push(marks[marks.length - 1] + 50 + rng() * 4_000);
      const look = (t: number) => busy.map((spans, w) => publishedAt(`w${w}`, t, everyMs, spans));
      let busyTotal = 0;
      for (let i = 1; i < marks.length; i++) {
        const [before, after] = [look(marks[i - 1]), look(marks[i])];
        const fraction = busyFraction(before, after);
        if (fraction === undefined) continue;
        expect(fraction).toBeGreaterThanOrEqual(0);
        expect(fraction).toBeLessThanOrEqual(1);
        const windowMs = after.reduce((sum, s, w) => sum + s.uptimeMs - before[w].uptimeMs, 0);
        busyTotal += fraction * windowMs;
      }
      // Consecutive windows tile: their busy time is all the busy time published by the last look.
      const last = look(marks[marks.length - 1]);
      expect(busyTotal).toBeCloseTo(
        last.reduce((sum, s) => sum + s.busyMs, 0),
        3,
      );
    }
  });
});

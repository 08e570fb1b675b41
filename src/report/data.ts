/**
 * A run's data for the report, read from what the run wrote under <dataDir>/runs/<runId>/:
 * train/metrics.jsonl (or learning-curve.csv when it is all there is), train/eval.jsonl,
 * trajectories/<id>/summary.json and the trace files; and what is derived from the trace spans
 * (each derived value says so in its name or the chart note):
 *
 * - per trajectory: generation time = the sum of its `generate` activity spans; environment time =
 *   the sum of its env.reset / env.step / env.close / reward spans; waiting (other) time = the rest
 *   of its trajectory span (Temporal scheduling and queues, records, retries);
 * - env worker busy fraction per train step, for runs whose metrics lack envBusyFraction: the time
 *   at least one env activity ran, per env process, over the step's interval (previous train.step
 *   end to this one's), summed over processes;
 * - finished trajectories per time bin;
 * - for rollout runs (no train steps): engine busy spans (prefill / decode) per inference process and
 *   the policy version of every sampled turn, for per-time-bucket charts.
 */
import { promises as fs } from 'node:fs';
import { isTrajectoryId } from '../core/ids';
import type { TrajectorySummary } from '../core/records';
import type { StepMetrics } from '../rl/stepMetrics';
import { readJson } from '../store/files';
import { readJsonLines } from '../store/jsonLines';
import { runLayout, runsDir, type RunLayout } from '../store/runLayout';
import { readRunTrace, type TraceSegment } from '../trace/perfetto';

export interface EvalRecord {
  version: number;
  successRate: number;
  elapsedS?: number;
  episodes?: number;
}

export interface TrajectoryTiming {
  trajectoryId: string;
  startUs: number;
  endUs: number;
  generationMs: number;
  environmentMs: number;
  /** Trajectory span time in neither generation nor the environment: queues, scheduling, records. */
  waitingMs: number;
  /** True when no trajectory span was traced and the span was taken from first to last activity. */
  derivedSpan: boolean;
}

/** What the report reads of a trajectory's summary.json, and when that file was written. */
export type StoredTrajectory = Pick<TrajectorySummary, 'trajectoryId' | 'status' | 'reward' | 'envReturn' | 'turns'> & {
  /** Epoch µs summary.json was last written: the finish time of a trajectory the trace lacks. */
  writtenUs?: number;
};

export interface RunData {
  runId: string;
  runDir: string;
  metrics: Partial<StepMetrics>[];
  evaluations: EvalRecord[];
  /** From trajectories/<id>/summary.json. */
  trajectories: StoredTrajectory[];
  timings: TrajectoryTiming[];
  /** Durations of every env.step span (ms). */
  envStepMs: number[];
  /** Train step -> [start, end] epoch µs of its interval (previous step end -> this step end). */
  stepIntervals: Map<number, [number, number]>;
  /** Env activity spans per env process: [start, end] epoch µs. */
  envBusySpans: Map<string, [number, number][]>;
  /** Engine prefill / decode spans per inference process: [start, end] epoch µs. */
  engineBusySpans: Map<string, [number, number][]>;
  /** Policy version -> turns sampled with it (the trace's `sample` spans). */
  generatedVersions: Map<number, number>;
  /** Epoch µs that elapsed time 0 corresponds to (the run start when the metrics tell it). */
  originUs?: number;
  traceFiles: number;
}

const ENV_STAGES = new Set(['env.reset', 'env.step', 'env.close', 'reward']);

/** learning-curve.csv rows (numbers; empty cells left out). */
export function parseCurveCsv(text: string): Record<string, number>[] {
  const [head, ...rows] = text.split('\n').filter((l) => l.trim());
  if (!head) return [];
  const columns = head.split(',');
  return rows.map((row) => {
    const record: Record<string, number> = {};
    row.split(',').forEach((cell, i) => {
      if (cell !== '' && Number.isFinite(Number(cell))) record[columns[i]] = Number(cell);
    });
    return record;
  });
}

async function readStoredTrajectories(run: RunLayout): Promise<StoredTrajectory[]> {
  const names = await fs.readdir(run.trajectoriesDir).catch(() => [] as string[]);
  const out: StoredTrajectory[] = [];
  for (const name of names) {
    const file = run.trajectorySummaryFile(name);
    // A report draws what it can: a corrupt summary is left out, as a missing one is.
    const s = await readJson<TrajectorySummary>(file).catch(() => undefined);
    if (!s) continue;
    const writtenUs = await fs.stat(file).then(
      (st) => st.mtimeMs * 1000,
      () => undefined,
    );
    out.push({ trajectoryId: s.trajectoryId, status: s.status, reward: s.reward, envReturn: s.envReturn, turns: s.turns, writtenUs });
  }
  return out;
}

/** Total length of the union of intervals clipped to [from, to]. */
export function unionLength(intervals: readonly [number, number][], from = -Infinity, to = Infinity): number {
  const clipped = intervals
    .map(([a, b]) => [Math.max(a, from), Math.min(b, to)] as [number, number])
    .filter(([a, b]) => b > a)
    .sort((x, y) => x[0] - y[0]);
  let total = 0;
  let [curA, curB] = [NaN, NaN];
  for (const [a, b] of clipped) {
    if (!(a <= curB)) {
      if (curB > curA) total += curB - curA;
      [curA, curB] = [a, b];
    } else curB = Math.max(curB, b);
  }
  if (curB > curA) total += curB - curA;
  return total;
}

function pushTo<K, V>(map: Map<K, V[]>, key: K, value: V): void {
  const list = map.get(key);
  if (list) list.push(value);
  else map.set(key, [value]);
}

/** Per-trajectory timings, env step durations, train step intervals, env and engine busy spans. */
export function analyzeTrace(
  segments: readonly TraceSegment[],
): Pick<RunData, 'timings' | 'envStepMs' | 'stepIntervals' | 'envBusySpans' | 'engineBusySpans' | 'generatedVersions'> & { stepEnds: Map<number, number> } {
  interface Acc {
    span?: [number, number];
    first: number;
    last: number;
    gen: number;
    env: number;
  }
  const byTrajectory = new Map<string, Acc>();
  const envStepMs: number[] = [];
  const envBusySpans = new Map<string, [number, number][]>();
  const engineBusySpans = new Map<string, [number, number][]>();
  const generatedVersions = new Map<number, number>();
  const stepEnds = new Map<number, number>();
  const acc = (id: string) => {
    let a = byTrajectory.get(id);
    if (!a) byTrajectory.set(id, (a = { first: Infinity, last: -Infinity, gen: 0, env: 0 }));
    return a;
  };
  for (const segment of segments) {
    const processKey = `${segment.header.host}-${segment.header.pid}`;
    for (const e of segment.events) {
      if (e.ph !== 'X') continue;
      const end = e.ts + e.dur;
      const wf = typeof e.args?.wf === 'string' ? e.args.wf : undefined;
      if (e.name === 'train.step' && typeof e.args?.step === 'number' && !e.args.error)
        stepEnds.set(e.args.step, Math.max(stepEnds.get(e.args.step) ?? 0, end));
      if (segment.header.role === 'env' && e.cat === 'activity') pushTo(envBusySpans, processKey, [e.ts, end]);
      if (e.cat === 'engine') pushTo(engineBusySpans, processKey, [e.ts, end]);
      if (e.name === 'sample' && typeof e.args?.version === 'number') generatedVersions.set(e.args.version, (generatedVersions.get(e.args.version) ?? 0) + 1);
      if (e.name === 'env.step') envStepMs.push(e.dur / 1000);
      if (!wf || !isTrajectoryId(wf)) continue;
      const a = acc(wf);
      if (e.name === 'trajectory') {
        a.span = a.span ? [Math.min(a.span[0], e.ts), Math.max(a.span[1], end)] : [e.ts, end];
        continue;
      }
      if (e.cat !== 'activity') continue;
      a.first = Math.min(a.first, e.ts);
      a.last = Math.max(a.last, end);
      if (e.name === 'generate') a.gen += e.dur / 1000;
      else if (ENV_STAGES.has(e.name)) a.env += e.dur / 1000;
    }
  }
  const timings: TrajectoryTiming[] = [];
  for (const [trajectoryId, a] of byTrajectory) {
    const span = a.span ?? (Number.isFinite(a.first) ? ([a.first, a.last] as [number, number]) : undefined);
    if (!span) continue;
    const totalMs = (span[1] - span[0]) / 1000;
    timings.push({
      trajectoryId,
      startUs: span[0],
      endUs: span[1],
      generationMs: a.gen,
      environmentMs: a.env,
      waitingMs: Math.max(0, totalMs - a.gen - a.env),
      derivedSpan: !a.span,
    });
  }
  timings.sort((x, y) => x.endUs - y.endUs);
  const stepIntervals = new Map<number, [number, number]>();
  const steps = [...stepEnds.keys()].sort((a, b) => a - b);
  for (const [i, step] of steps.entries()) {
    const start = i > 0 ? stepEnds.get(steps[i - 1])! : Math.min(...timings.map((t) => t.startUs), stepEnds.get(step)!);
    stepIntervals.set(step, [start, stepEnds.get(step)!]);
  }
  return { timings, envStepMs, stepIntervals, envBusySpans, engineBusySpans, generatedVersions, stepEnds };
}

export async function loadRunData(dataDir: string, runId: string): Promise<RunData> {
  const run = runLayout(dataDir, runId);
  const runDir = run.dir;
  await fs.access(runDir).catch(() => {
    throw new Error(`no run ${runId} under ${runsDir(dataDir)}`);
  });
  let metrics: Partial<StepMetrics>[] = await readJsonLines<StepMetrics>(run.metricsFile, (m) => m.step);
  let evaluations = await readJsonLines<EvalRecord>(run.evaluationsFile, (e) => e.version);
  if (metrics.length === 0) {
    // Only the learning curve survived (a copied run folder): its columns are a subset of the metrics.
    const rows = parseCurveCsv(await fs.readFile(run.learningCurveFile, 'utf8').catch(() => ''));
    metrics = rows.filter((r) => r.step !== undefined) as Partial<StepMetrics>[];
    if (evaluations.length === 0) {
      evaluations = rows
        .filter((r) => r.heldOutSuccessRate !== undefined)
        .map((r) => ({ version: r.version ?? 0, successRate: r.heldOutSuccessRate, elapsedS: r.elapsedS }));
    }
  }
  const trajectories = await readStoredTrajectories(run);
  let segments: TraceSegment[] = [];
  let traceFiles = 0;
  try {
    const read = await readRunTrace(dataDir, runId);
    segments = read.segments;
    traceFiles = read.files.length;
  } catch {
    // no trace files: the trace-derived charts say there is no data
  }
  const trace = analyzeTrace(segments);
  // Elapsed time 0 on the trace clock: a step's end minus its elapsedS.
  const anchor = metrics.find((m) => m.step !== undefined && m.elapsedS !== undefined && trace.stepEnds.has(m.step));
  const firstUs = trace.timings.length ? Math.min(...trace.timings.map((t) => t.startUs)) : undefined;
  const originUs = anchor ? trace.stepEnds.get(anchor.step!)! - anchor.elapsedS! * 1e6 : firstUs;
  return {
    runId,
    runDir,
    metrics,
    evaluations,
    trajectories,
    timings: trace.timings,
    envStepMs: trace.envStepMs,
    stepIntervals: trace.stepIntervals,
    envBusySpans: trace.envBusySpans,
    engineBusySpans: trace.engineBusySpans,
    generatedVersions: trace.generatedVersions,
    originUs,
    traceFiles,
  };
}

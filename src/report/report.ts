/**
 * `trajflow report <run>`: chart specs from a run's data (pure), rendered to SVG and PNG, and one
 * HTML page with the charts, a per-step utilization table and links into the Temporal Web UI.
 *
 * Training runs chart per train step (x: elapsed time from the metrics, else the step). Rollout
 * runs (no train steps) chart per bucket of wall time since the run's start: trajectories by their
 * finish time (trace trajectory span end), engines and env workers by the spans in the bucket.
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { chartScene, type BarChart, type ChartSpec, type LineChart, type LineSeries } from './charts';
import { loadRunData, unionLength, type RunData, type TrajectoryTiming } from './data';
import { renderPng } from './raster';
import { escapeXml, renderSvg } from './svg';
import { runLayout } from '../store/runLayout';
import { DEFAULT_NAMESPACE, LOCAL_UI_URL } from '../temporal/defaults';

/** Mean per-trajectory times (ms) of some trajectories with trace timings. */
export interface MeanTimes {
  timedTrajectories: number;
  generationMs?: number;
  environmentMs?: number;
  waitingMs?: number;
}

/** One train step's utilization, as the report derives it (also written to utilization.csv). */
export interface StepUtilization extends MeanTimes {
  step: number;
  elapsedS?: number;
  engineBusyFraction?: number;
  trainerIdleFraction?: number;
  envBusyFraction?: number;
  /** Where envBusyFraction came from: the trainer's metrics, or derived from trace spans. */
  envBusySource?: 'metrics' | 'trace';
}

const pct = (x: number | undefined) => (x === undefined ? '' : `${(100 * x).toFixed(1)}%`);
const mean = (xs: readonly number[]) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : undefined);

export function meanTimes(timed: readonly TrajectoryTiming[]): MeanTimes {
  return {
    timedTrajectories: timed.length,
    generationMs: mean(timed.map((t) => t.generationMs)),
    environmentMs: mean(timed.map((t) => t.environmentMs)),
    waitingMs: mean(timed.map((t) => t.waitingMs)),
  };
}

/** Busy time in [from, to] (µs) over its length, summed over processes (each: the union of its spans). */
export function busyFraction(spansByProcess: ReadonlyMap<string, [number, number][]>, from: number, to: number): number | undefined {
  if (spansByProcess.size === 0 || !(to > from)) return undefined;
  let busy = 0;
  for (const spans of spansByProcess.values()) busy += unionLength(spans, from, to);
  return busy / (to - from);
}

export function stepUtilization(data: RunData): StepUtilization[] {
  const timingById = new Map(data.timings.map((t) => [t.trajectoryId, t]));
  return data.metrics
    .filter((m) => m.step !== undefined)
    .map((m) => {
      const step = m.step!;
      const timed = (m.groupIds ?? []).flatMap((g) => [...timingById.entries()].filter(([id]) => id.startsWith(`${g}.t`)).map(([, t]) => t));
      const interval = data.stepIntervals.get(step);
      const traced = m.envBusyFraction === undefined && interval ? busyFraction(data.envBusySpans, interval[0], interval[1]) : undefined;
      const envBusyFraction = m.envBusyFraction ?? traced;
      return {
        step,
        elapsedS: m.elapsedS,
        engineBusyFraction: m.engineBusyFraction,
        trainerIdleFraction: m.trainerIdleFraction,
        envBusyFraction,
        envBusySource: m.envBusyFraction !== undefined ? 'metrics' : traced !== undefined ? 'trace' : undefined,
        ...meanTimes(timed),
      };
    });
}

/** Log-spaced latency bins (ms) and their counts. */
export function latencyHistogram(values: readonly number[]): { categories: string[]; counts: number[] } {
  const edges = [0, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000];
  const counts = new Array(edges.length).fill(0);
  for (const v of values) {
    let i = edges.length - 1;
    while (i > 0 && v < edges[i]) i--;
    counts[i]++;
  }
  const label = (x: number) => (x >= 1000 ? `${x / 1000}s` : String(x));
  let last = counts.length - 1;
  while (last > 0 && counts[last] === 0) last--;
  let first = 0;
  while (first < last && counts[first] === 0) first++;
  const categories = edges
    .slice(first, last + 1)
    .map((e, i) => (first + i === edges.length - 1 ? `>=${label(e)}` : `${label(e)}-${label(edges[first + i + 1])}`));
  return { categories, counts: counts.slice(first, last + 1) };
}

/** The smallest 1-2-5 width (s, at least 1) that covers `spanS` in at most `count` buckets. */
export function bucketWidthS(spanS: number, count = 10): number {
  const raw = spanS / count;
  if (!(raw > 1)) return 1;
  const magnitude = 10 ** Math.floor(Math.log10(raw));
  return [1, 2, 5, 10].map((m) => m * magnitude).find((w) => w >= raw)!;
}

/** [from, to] (s) buckets of `width` covering [0, endS]; the last one ends at endS. */
export function timeBuckets(endS: number, width: number): [number, number][] {
  const n = Math.max(1, Math.ceil(endS / width));
  return Array.from({ length: n }, (_, i) => [i * width, i === n - 1 && endS > i * width ? endS : (i + 1) * width]);
}

/** A trajectory's finish time (s since the run start) and outcome. */
export interface FinishedTrajectory {
  trajectoryId: string;
  finishS: number;
  reward?: number;
  /** The environment's return was > 0 (the reward when the summary has no envReturn). */
  solved?: boolean;
  timing?: TrajectoryTiming;
}

/**
 * Every trajectory with a finish time: its trace trajectory span end (or its last activity's end),
 * else when its summary.json was written; seconds since the run start (the first trajectory's start).
 */
export function finishedTrajectories(data: RunData): FinishedTrajectory[] {
  const timingById = new Map(data.timings.map((t) => [t.trajectoryId, t]));
  const summaryById = new Map(data.trajectories.map((s) => [s.trajectoryId, s]));
  const ids = new Set([...timingById.keys(), ...summaryById.keys()]);
  const endOf = (id: string) => timingById.get(id)?.endUs ?? summaryById.get(id)?.writtenUs;
  const ends = [...ids].map(endOf).filter((e): e is number => e !== undefined);
  const origin = data.originUs ?? Math.min(...ends);
  return [...ids].flatMap((trajectoryId) => {
    const end = endOf(trajectoryId);
    if (end === undefined) return [];
    const s = summaryById.get(trajectoryId);
    return [
      {
        trajectoryId,
        finishS: Math.max(0, (end - origin) / 1e6),
        reward: s?.reward,
        solved: s ? s.envReturn > 0 : undefined,
        timing: timingById.get(trajectoryId),
      },
    ];
  });
}

/** A bucket of wall time of a rollout run: what finished in it and how busy engines and env workers were. */
export interface TimeBucket extends MeanTimes {
  fromS: number;
  toS: number;
  finished: number;
  rewardMean?: number;
  successRate?: number;
  engineBusyFraction?: number;
  envBusyFraction?: number;
}

export function rolloutBuckets(data: RunData, count = 10): { widthS: number; buckets: TimeBucket[] } {
  const done = finishedTrajectories(data);
  if (done.length === 0) return { widthS: 0, buckets: [] };
  const endS = Math.max(...done.map((d) => d.finishS));
  const widthS = bucketWidthS(endS, count);
  const origin = data.originUs ?? 0;
  const ranges = timeBuckets(endS, widthS);
  const buckets = ranges.map(([fromS, toS], i): TimeBucket => {
    const inBucket = done.filter((d) => d.finishS >= fromS && (d.finishS < toS || i === ranges.length - 1));
    const [fromUs, toUs] = [origin + fromS * 1e6, origin + toS * 1e6];
    return {
      fromS,
      toS,
      finished: inBucket.length,
      rewardMean: mean(inBucket.flatMap((d) => (d.reward === undefined ? [] : [d.reward]))),
      successRate: mean(inBucket.flatMap((d) => (d.solved === undefined ? [] : [d.solved ? 1 : 0]))),
      engineBusyFraction: data.originUs === undefined ? undefined : busyFraction(data.engineBusySpans, fromUs, toUs),
      envBusyFraction: data.originUs === undefined ? undefined : busyFraction(data.envBusySpans, fromUs, toUs),
      ...meanTimes(inBucket.flatMap((d) => (d.timing ? [d.timing] : []))),
    };
  });
  return { widthS, buckets };
}

/** What differs between the charts of a training run and of a rollout run. */
interface ChartInputs {
  xLabel: string;
  reward: LineSeries[];
  rewardNote?: string;
  throughput: LineSeries[];
  throughputNote?: string;
  busy: LineSeries[];
  busyNote: string;
  trainerIdle: LineSeries[];
  trainerNote: string;
  trainerEmpty?: string;
  versions: Omit<BarChart, 'kind' | 'name'>;
  times: { xLabel: string; categories: string[]; rows: MeanTimes[]; note?: string };
}

function trainingInputs(data: RunData, utilization: StepUtilization[]): ChartInputs {
  const byTime = data.metrics.length > 0 && data.metrics.every((m) => m.elapsedS !== undefined);
  const xOf = (m: { step?: number; elapsedS?: number }) => (byTime ? m.elapsedS! : m.step!);
  const pts = (key: 'rewardMean' | 'successRate' | 'engineBusyFraction' | 'trainerIdleFraction') =>
    data.metrics.filter((m) => typeof m[key] === 'number').map((m) => [xOf(m), m[key] as number] as [number, number]);

  // Throughput: trajectories finished per time bin (trace) and trained per step (metrics).
  const origin = data.originUs ?? 0;
  const ends = data.timings.map((t) => (t.endUs - origin) / 1e6);
  const span = ends.length ? Math.max(...ends) : 0;
  const bin = Math.max(5, Math.ceil(span / 60 / 5) * 5);
  const finished: [number, number][] = [];
  if (ends.length && byTime) {
    const counts = new Map<number, number>();
    for (const e of ends) counts.set(Math.floor(e / bin), (counts.get(Math.floor(e / bin)) ?? 0) + 1);
    const lo = Math.min(...counts.keys());
    const hi = Math.max(...counts.keys());
    for (let b = lo; b <= hi; b++) finished.push([(b + 0.5) * bin, (counts.get(b) ?? 0) / bin]);
  }
  const trained: [number, number][] = [];
  let previousElapsed: number | undefined;
  for (const m of data.metrics) {
    if (byTime && previousElapsed !== undefined && m.trajectories !== undefined && m.elapsedS! > previousElapsed)
      trained.push([m.elapsedS!, m.trajectories / (m.elapsedS! - previousElapsed)]);
    previousElapsed = m.elapsedS;
  }

  const utilPoints = (key: 'envBusyFraction') =>
    utilization
      .filter((u) => u[key] !== undefined && (!byTime || u.elapsedS !== undefined))
      .map((u) => [byTime ? u.elapsedS! : u.step, u[key]!] as [number, number]);
  const envSources = new Set(utilization.map((u) => u.envBusySource).filter(Boolean));

  const staleness = new Map<number, number>();
  for (const m of data.metrics) for (const [k, v] of Object.entries(m.stalenessHistogram ?? {})) staleness.set(Number(k), (staleness.get(Number(k)) ?? 0) + v);
  const maxStale = staleness.size ? Math.max(...staleness.keys()) : -1;
  const timed = utilization.filter((u) => u.timedTrajectories > 0);
  return {
    xLabel: byTime ? 'time since run start (s)' : 'train step',
    reward: [
      { name: 'mean reward (sampled)', points: pts('rewardMean') },
      { name: 'success rate (sampled)', points: pts('successRate') },
      {
        name: 'held-out success (eval)',
        points: data.evaluations.filter((e) => (byTime ? e.elapsedS !== undefined : true)).map((e) => [byTime ? e.elapsedS! : e.version - 1, e.successRate]),
        markers: true,
      },
    ],
    throughput: [
      { name: `finished (trace, ${bin} s bins)`, points: finished },
      { name: 'trained (per train step)', points: trained },
    ],
    throughputNote: byTime ? undefined : "no elapsed time in this run's metrics: throughput needs it",
    busy: [
      { name: 'inference engines (forward passes)', points: pts('engineBusyFraction') },
      { name: `env workers (any activity running)${envSources.has('trace') ? ', from trace' : ''}`, points: utilPoints('envBusyFraction') },
    ],
    busyNote: 'per train step interval; summed over engines / env worker processes, so can pass 100%',
    trainerIdle: [{ name: 'trainer waiting for groups', points: pts('trainerIdleFraction') }],
    trainerNote: 'per train step: time since the previous step ended that the trainer waited for data',
    versions: {
      title: 'Staleness of trained tokens',
      xLabel: 'staleness (policy versions behind the trained one)',
      yLabel: 'trained tokens (whole run)',
      categories: Array.from({ length: maxStale + 1 }, (_, i) => String(i)),
      series: [{ name: 'tokens', values: Array.from({ length: maxStale + 1 }, (_, i) => staleness.get(i) ?? 0) }],
    },
    times: { xLabel: 'train step (trajectories of its groups)', categories: timed.map((u) => String(u.step)), rows: timed },
  };
}

function rolloutInputs(data: RunData): ChartInputs {
  const { widthS, buckets } = rolloutBuckets(data);
  const mid = (b: TimeBucket) => (b.fromS + b.toS) / 2;
  const pts = (key: 'rewardMean' | 'successRate' | 'engineBusyFraction' | 'envBusyFraction') =>
    buckets.filter((b) => b[key] !== undefined).map((b) => [mid(b), b[key]!] as [number, number]);
  const versions = [...data.generatedVersions.keys()].sort((a, b) => a - b);
  const timed = buckets.filter((b) => b.timedTrajectories > 0);
  const done = buckets.reduce((n, b) => n + b.finished, 0);
  const overall = meanTimes(data.timings);
  const ms0 = (x?: number) => (x === undefined ? '-' : x.toFixed(0));
  const whole = (key: 'rewardMean' | 'successRate') => mean(buckets.flatMap((b) => (b[key] === undefined ? [] : new Array<number>(b.finished).fill(b[key]!))));
  return {
    xLabel: `time since run start (s), ${widthS} s buckets`,
    reward: [
      { name: 'mean reward', points: pts('rewardMean'), markers: true },
      { name: 'success rate (env return > 0)', points: pts('successRate'), markers: true },
    ],
    rewardNote: `rollout run: trajectories finished in each bucket (trace trajectory span end), at the bucket middle; equal values overlap. Whole run: ${done} finished, mean reward ${whole('rewardMean')?.toFixed(3) ?? '-'}, success ${pct(whole('successRate'))}`,
    throughput: [{ name: `finished (${widthS} s buckets)`, points: buckets.map((b) => [mid(b), b.finished / (b.toS - b.fromS)]), markers: true }],
    throughputNote: 'rollout run: trajectories finished in each bucket / bucket length; finish = trace trajectory span end, else summary.json write time',
    busy: [
      { name: 'inference engines (prefill + decode spans)', points: pts('engineBusyFraction'), markers: true },
      { name: 'env workers (any env activity running)', points: pts('envBusyFraction'), markers: true },
    ],
    busyNote: `rollout run, from trace spans: per ${widthS} s bucket, time a process had a span running / bucket length, summed over engine / env worker processes, so can pass 100%`,
    trainerIdle: [],
    trainerNote: 'this run only generated trajectories (no train steps), so there is no trainer and no trainer idle time; a training run has this chart',
    trainerEmpty: 'rollout run: no trainer, so no trainer idle time',
    versions: {
      title: 'Policy version of generated turns',
      xLabel: 'policy version that sampled the turn',
      yLabel: 'generated turns (whole run)',
      categories: versions.map(String),
      series: [{ name: 'turns (trace sample spans)', values: versions.map((v) => data.generatedVersions.get(v)!) }],
      note: 'rollout run: nothing was trained, so no staleness of trained tokens; this counts the policy versions that generated the turns',
      empty: 'rollout run: no trained tokens, and no sample spans with a policy version',
    },
    times: {
      xLabel: `trajectory finish time since run start (s), ${widthS} s buckets`,
      categories: timed.map((b) => `${b.fromS}-${Number(b.toS.toFixed(1))}`),
      rows: timed,
      note: `rollout run, from trace spans; whole-run means: generation ${ms0(overall.generationMs)} ms, environment ${ms0(overall.environmentMs)} ms, waiting / other ${ms0(overall.waitingMs)} ms per trajectory`,
    },
  };
}

/** Seven charts; a run with no train steps but finished trajectories is charted as a rollout run. */
export function buildCharts(data: RunData, utilization = stepUtilization(data)): ChartSpec[] {
  const rollout = data.metrics.length === 0 && (data.timings.length > 0 || data.trajectories.length > 0);
  const inputs = rollout ? rolloutInputs(data) : trainingInputs(data, utilization);
  const rewardMax = Math.max(...inputs.reward.flatMap((s) => s.points.map(([, y]) => y)));
  const reward: LineChart = {
    kind: 'line',
    name: 'reward-success',
    title: `Reward and success rate: ${data.runId}`,
    xLabel: inputs.xLabel,
    yLabel: 'reward / success rate (0-1)',
    yMin: 0,
    yMax: rollout && rewardMax <= 1 ? 1 : undefined,
    series: inputs.reward,
    note: inputs.rewardNote,
  };
  const throughput: LineChart = {
    kind: 'line',
    name: 'throughput',
    title: 'Trajectories per second',
    xLabel: inputs.xLabel,
    yLabel: 'trajectories / s',
    yMin: 0,
    series: inputs.throughput,
    note: inputs.throughputNote,
  };
  const engine: LineChart = {
    kind: 'line',
    name: 'engine-busy',
    title: 'Inference engine and env worker busy time',
    xLabel: inputs.xLabel,
    yLabel: 'busy, % of wall time',
    yFormat: 'percent',
    yMin: 0,
    series: inputs.busy,
    note: inputs.busyNote,
  };
  const trainer: LineChart = {
    kind: 'line',
    name: 'trainer-idle',
    title: 'Trainer idle time',
    xLabel: inputs.xLabel,
    yLabel: 'idle, % of wall time',
    yFormat: 'percent',
    yMin: 0,
    yMax: 1,
    series: inputs.trainerIdle,
    note: inputs.trainerNote,
    empty: inputs.trainerEmpty,
  };
  const stalenessChart: BarChart = { kind: 'bar', name: 'staleness', ...inputs.versions };

  const histogram = latencyHistogram(data.envStepMs);
  const latency: BarChart = {
    kind: 'bar',
    name: 'env-latency',
    title: 'Environment step latency',
    xLabel: 'env.step activity duration (ms)',
    yLabel: 'env steps',
    categories: histogram.categories,
    series: [{ name: `env.step spans (n=${data.envStepMs.length})`, values: histogram.counts }],
    note: 'from trace spans; bins are log-spaced',
  };

  const rows = inputs.times.rows;
  const perTrajectory: BarChart = {
    kind: 'bar',
    name: 'trajectory-time',
    title: 'Time per trajectory: generation, environment, waiting',
    xLabel: inputs.times.xLabel,
    yLabel: 'mean ms per trajectory',
    categories: inputs.times.categories,
    stacked: true,
    series: [
      { name: 'generation', values: rows.map((u) => u.generationMs ?? 0) },
      { name: 'environment', values: rows.map((u) => u.environmentMs ?? 0) },
      { name: 'waiting / other', values: rows.map((u) => u.waitingMs ?? 0) },
    ],
    note: [inputs.times.note, 'derived from trace spans: generate, env.* + reward activity spans, rest of trajectory span'].filter(Boolean).join('; '),
  };
  return [reward, throughput, engine, trainer, stalenessChart, latency, perTrajectory];
}

export interface ReportOptions {
  /** Temporal Web UI base address. */
  uiUrl?: string;
  namespace?: string;
  /** PNG device pixels per SVG pixel. */
  pngScale?: number;
}

const ms = (x: number | undefined) => (x === undefined ? '' : x.toFixed(1));

export function temporalLinks(runId: string, options: ReportOptions = {}): { run: string; trajectories: string; all: string } {
  const ui = (options.uiUrl ?? LOCAL_UI_URL).replace(/\/$/, '');
  const ns = encodeURIComponent(options.namespace ?? DEFAULT_NAMESPACE);
  const query = (q: string) => `${ui}/namespaces/${ns}/workflows?query=${encodeURIComponent(q)}`;
  return {
    run: `${ui}/namespaces/${ns}/workflows/${encodeURIComponent(runId)}`,
    trajectories: query(`TrajflowRun="${runId}" AND TrajflowKind="trajectory"`),
    all: query(`TrajflowRun="${runId}"`),
  };
}

export function renderHtml(data: RunData, charts: ChartSpec[], utilization: StepUtilization[], options: ReportOptions = {}): string {
  const links = temporalLinks(data.runId, options);
  const last = data.metrics[data.metrics.length - 1];
  const lastEval = data.evaluations[data.evaluations.length - 1];
  const statuses = new Map<string, number>();
  for (const t of data.trajectories) statuses.set(t.status, (statuses.get(t.status) ?? 0) + 1);
  const summary: [string, string][] = [
    ['train steps', String(data.metrics.length)],
    ['elapsed', last?.elapsedS === undefined ? '' : `${last.elapsedS.toFixed(0)} s`],
    ['trajectories stored', `${data.trajectories.length} (${[...statuses].map(([s, n]) => `${n} ${s}`).join(', ')})`],
    ['last step success rate (sampled)', pct(last?.successRate)],
    ['last held-out success', lastEval ? `${pct(lastEval.successRate)} (version ${lastEval.version})` : ''],
    ['trace files', String(data.traceFiles)],
  ];
  const e = escapeXml;
  const rows = utilization
    .map(
      (u) =>
        `<tr><td>${u.step}</td><td>${u.elapsedS?.toFixed(1) ?? ''}</td><td>${pct(u.engineBusyFraction)}</td><td>${pct(u.envBusyFraction)}${u.envBusySource === 'trace' ? ' *' : ''}</td><td>${pct(u.trainerIdleFraction)}</td><td>${u.timedTrajectories}</td><td>${ms(u.generationMs)}</td><td>${ms(u.environmentMs)}</td><td>${ms(u.waitingMs)}</td></tr>`,
    )
    .join('\n');
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>trajflow report: ${e(data.runId)}</title>
<style>body{font-family:sans-serif;margin:2em;max-width:1700px}img{width:800px;border:1px solid #ddd;margin:4px}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}th{background:#f4f4f4}.charts{display:flex;flex-wrap:wrap}</style>
</head><body>
<h1>trajflow report: ${e(data.runId)}</h1>
<p>Temporal Web UI: <a href="${e(links.run)}">the run's workflow</a> ·
<a href="${e(links.trajectories)}">its trajectories</a> (visibility query <code>${e(`TrajflowRun="${data.runId}" AND TrajflowKind="trajectory"`)}</code>) ·
<a href="${e(links.all)}">all its workflows</a></p>
<table>${summary.map(([k, v]) => `<tr><th style="text-align:left">${e(k)}</th><td style="text-align:left">${e(v)}</td></tr>`).join('')}</table>
<h2>Charts</h2>
<div class="charts">
${charts.map((c) => `<figure><a href="${c.name}.svg"><img src="${c.name}.png" alt="${e(c.title)}"></a><figcaption>${e(c.title)} (<a href="${c.name}.svg">SVG</a>, <a href="${c.name}.png">PNG</a>)</figcaption></figure>`).join('\n')}
</div>
<h2>Utilization per train step</h2>
<p>Engine busy and trainer idle from the trainer's metrics; env worker busy from the metrics, or (*) derived from trace spans.
Per-trajectory times are means over the step's trajectories, derived from trace spans: generation = generate activities,
environment = env.reset/step/close and reward activities, waiting = the rest of the trajectory workflow's span. Also in <a href="utilization.csv">utilization.csv</a>.</p>
<table><tr><th>step</th><th>elapsed s</th><th>engine busy</th><th>env workers busy</th><th>trainer idle</th><th>trajectories timed</th><th>generation ms</th><th>environment ms</th><th>waiting ms</th></tr>
${rows}
</table>
</body></html>
`;
}

export function utilizationCsv(utilization: readonly StepUtilization[]): string {
  const columns = [
    'step',
    'elapsedS',
    'engineBusyFraction',
    'envBusyFraction',
    'envBusySource',
    'trainerIdleFraction',
    'timedTrajectories',
    'generationMs',
    'environmentMs',
    'waitingMs',
  ] as const;
  return [columns.join(','), ...utilization.map((u) => columns.map((c) => u[c] ?? '').join(','))].join('\n') + '\n';
}

export interface WrittenReport {
  outDir: string;
  files: string[];
  charts: ChartSpec[];
  utilization: StepUtilization[];
}

export async function writeReport(dataDir: string, runId: string, outDir?: string, options: ReportOptions = {}): Promise<WrittenReport> {
  const data = await loadRunData(dataDir, runId);
  const out = outDir ?? runLayout(dataDir, runId).reportDir;
  await fs.mkdir(out, { recursive: true });
  const utilization = stepUtilization(data);
  const charts = buildCharts(data, utilization);
  const files: string[] = [];
  const write = async (name: string, content: string | Buffer) => {
    await fs.writeFile(path.join(out, name), content);
    files.push(path.join(out, name));
  };
  for (const chart of charts) {
    const scene = chartScene(chart);
    await write(`${chart.name}.svg`, renderSvg(scene));
    await write(`${chart.name}.png`, renderPng(scene, options.pngScale ?? 2));
  }
  await write('utilization.csv', utilizationCsv(utilization));
  await write('index.html', renderHtml(data, charts, utilization, options));
  return { outDir: out, files, charts, utilization };
}

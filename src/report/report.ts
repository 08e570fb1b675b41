/**
 * `trajflow report <run>`: chart specs from a run's data (pure), rendered to SVG and PNG, and one
 * HTML page with the charts, a per-step utilization table and links into the Temporal Web UI.
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { chartScene, type BarChart, type ChartSpec, type LineChart } from './charts';
import { loadRunData, unionLength, type RunData } from './data';
import { renderPng } from './raster';
import { escapeXml, renderSvg } from './svg';

/** One train step's utilization, as the report derives it (also written to utilization.csv). */
export interface StepUtilization {
  step: number;
  elapsedS?: number;
  engineBusyFraction?: number;
  trainerIdleFraction?: number;
  envBusyFraction?: number;
  /** Where envBusyFraction came from: the trainer's metrics, or derived from trace spans. */
  envBusySource?: 'metrics' | 'trace';
  /** Trajectories of the step's groups with trace timings, and their mean times (ms). */
  timedTrajectories: number;
  generationMs?: number;
  environmentMs?: number;
  waitingMs?: number;
}

const mean = (xs: readonly number[]) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : undefined);

export function stepUtilization(data: RunData): StepUtilization[] {
  const timingById = new Map(data.timings.map((t) => [t.trajectoryId, t]));
  return data.metrics
    .filter((m) => m.step !== undefined)
    .map((m) => {
      const step = m.step!;
      const timed = (m.groupIds ?? []).flatMap((g) => [...timingById.entries()].filter(([id]) => id.startsWith(`${g}.t`)).map(([, t]) => t));
      let envBusyFraction = m.envBusyFraction;
      let envBusySource: StepUtilization['envBusySource'] = envBusyFraction === undefined ? undefined : 'metrics';
      const interval = data.stepIntervals.get(step);
      if (envBusyFraction === undefined && interval && data.envBusySpans.size > 0 && interval[1] > interval[0]) {
        let busy = 0;
        for (const spans of data.envBusySpans.values()) busy += unionLength(spans, interval[0], interval[1]);
        envBusyFraction = busy / (interval[1] - interval[0]);
        envBusySource = 'trace';
      }
      return {
        step,
        elapsedS: m.elapsedS,
        engineBusyFraction: m.engineBusyFraction,
        trainerIdleFraction: m.trainerIdleFraction,
        envBusyFraction,
        envBusySource,
        timedTrajectories: timed.length,
        generationMs: mean(timed.map((t) => t.generationMs)),
        environmentMs: mean(timed.map((t) => t.environmentMs)),
        waitingMs: mean(timed.map((t) => t.waitingMs)),
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
  const categories = edges.slice(first, last + 1).map((e, i) => (first + i === edges.length - 1 ? `>=${label(e)}` : `${label(e)}-${label(edges[first + i + 1])}`));
  return { categories, counts: counts.slice(first, last + 1) };
}

export function buildCharts(data: RunData, utilization = stepUtilization(data)): ChartSpec[] {
  const byTime = data.metrics.length > 0 && data.metrics.every((m) => m.elapsedS !== undefined);
  const xOf = (m: { step?: number; elapsedS?: number }) => (byTime ? m.elapsedS! : m.step!);
  const xLabel = byTime ? 'time since run start (s)' : 'train step';
  const pts = (key: 'rewardMean' | 'successRate' | 'engineBusyFraction' | 'trainerIdleFraction') =>
    data.metrics.filter((m) => typeof m[key] === 'number').map((m) => [xOf(m), m[key] as number] as [number, number]);

  const reward: LineChart = {
    kind: 'line',
    name: 'reward-success',
    title: `Reward and success rate: ${data.runId}`,
    xLabel,
    yLabel: 'reward / success rate (0-1)',
    yMin: 0,
    series: [
      { name: 'mean reward (sampled)', points: pts('rewardMean') },
      { name: 'success rate (sampled)', points: pts('successRate') },
      { name: 'held-out success (eval)', points: data.evaluations.filter((e) => (byTime ? e.elapsedS !== undefined : true)).map((e) => [byTime ? e.elapsedS! : e.version - 1, e.successRate]), markers: true },
    ],
  };

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
    if (byTime && previousElapsed !== undefined && m.trajectories !== undefined && m.elapsedS! > previousElapsed) trained.push([m.elapsedS!, m.trajectories / (m.elapsedS! - previousElapsed)]);
    previousElapsed = m.elapsedS;
  }
  const throughput: LineChart = {
    kind: 'line',
    name: 'throughput',
    title: 'Trajectories per second',
    xLabel,
    yLabel: 'trajectories / s',
    yMin: 0,
    series: [
      { name: `finished (trace, ${bin} s bins)`, points: finished },
      { name: 'trained (per train step)', points: trained },
    ],
    note: byTime ? undefined : 'no elapsed time in this run\'s metrics: throughput needs it',
  };

  const utilPoints = (key: 'envBusyFraction') => utilization.filter((u) => u[key] !== undefined && (!byTime || u.elapsedS !== undefined)).map((u) => [byTime ? u.elapsedS! : u.step, u[key]!] as [number, number]);
  const envSources = new Set(utilization.map((u) => u.envBusySource).filter(Boolean));
  const engine: LineChart = {
    kind: 'line',
    name: 'engine-busy',
    title: 'Inference engine and env worker busy time',
    xLabel,
    yLabel: 'busy, % of wall time',
    yFormat: 'percent',
    yMin: 0,
    series: [
      { name: 'inference engines (forward passes)', points: pts('engineBusyFraction') },
      { name: `env workers (any activity running)${envSources.has('trace') ? ', from trace' : ''}`, points: utilPoints('envBusyFraction') },
    ],
    note: 'per train step interval; summed over engines / env worker processes, so can pass 100%',
  };

  const trainer: LineChart = {
    kind: 'line',
    name: 'trainer-idle',
    title: 'Trainer idle time',
    xLabel,
    yLabel: 'idle, % of wall time',
    yFormat: 'percent',
    yMin: 0,
    yMax: 1,
    series: [{ name: 'trainer waiting for groups', points: pts('trainerIdleFraction') }],
    note: 'per train step: time since the previous step ended that the trainer waited for data',
  };

  const staleness = new Map<number, number>();
  for (const m of data.metrics) for (const [k, v] of Object.entries(m.stalenessHistogram ?? {})) staleness.set(Number(k), (staleness.get(Number(k)) ?? 0) + v);
  const maxStale = staleness.size ? Math.max(...staleness.keys()) : -1;
  const stalenessChart: BarChart = {
    kind: 'bar',
    name: 'staleness',
    title: 'Staleness of trained tokens',
    xLabel: 'staleness (policy versions behind the trained one)',
    yLabel: 'trained tokens (whole run)',
    categories: Array.from({ length: maxStale + 1 }, (_, i) => String(i)),
    series: [{ name: 'tokens', values: Array.from({ length: maxStale + 1 }, (_, i) => staleness.get(i) ?? 0) }],
  };

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

  const timed = utilization.filter((u) => u.timedTrajectories > 0);
  const perTrajectory: BarChart = {
    kind: 'bar',
    name: 'trajectory-time',
    title: 'Time per trajectory: generation, environment, waiting',
    xLabel: 'train step (trajectories of its groups)',
    yLabel: 'mean ms per trajectory',
    categories: timed.map((u) => String(u.step)),
    stacked: true,
    series: [
      { name: 'generation', values: timed.map((u) => u.generationMs ?? 0) },
      { name: 'environment', values: timed.map((u) => u.environmentMs ?? 0) },
      { name: 'waiting / other', values: timed.map((u) => u.waitingMs ?? 0) },
    ],
    note: 'derived from trace spans: generate, env.* + reward activity spans, rest of trajectory span',
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

const pct = (x: number | undefined) => (x === undefined ? '' : `${(100 * x).toFixed(1)}%`);
const ms = (x: number | undefined) => (x === undefined ? '' : x.toFixed(1));

export function temporalLinks(runId: string, options: ReportOptions = {}): { run: string; trajectories: string; all: string } {
  const ui = (options.uiUrl ?? 'http://127.0.0.1:8233').replace(/\/$/, '');
  const ns = encodeURIComponent(options.namespace ?? 'default');
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
  for (const t of data.trajectories) statuses.set(t.status ?? 'unknown', (statuses.get(t.status ?? 'unknown') ?? 0) + 1);
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
    .map((u) => `<tr><td>${u.step}</td><td>${u.elapsedS?.toFixed(1) ?? ''}</td><td>${pct(u.engineBusyFraction)}</td><td>${pct(u.envBusyFraction)}${u.envBusySource === 'trace' ? ' *' : ''}</td><td>${pct(u.trainerIdleFraction)}</td><td>${u.timedTrajectories}</td><td>${ms(u.generationMs)}</td><td>${ms(u.environmentMs)}</td><td>${ms(u.waitingMs)}</td></tr>`)
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
  const columns = ['step', 'elapsedS', 'engineBusyFraction', 'envBusyFraction', 'envBusySource', 'trainerIdleFraction', 'timedTrajectories', 'generationMs', 'environmentMs', 'waitingMs'] as const;
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
  const out = outDir ?? path.join(data.runDir, 'report');
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

/** The bench's printed report: workload, engine fit, one row per configuration, the targets. */
import type { PipelineBenchResult } from './benchmark';
import { comparisons } from './summary';
import { sigmaForTail } from './lognormal';
import { batchTrajectories } from './workload';

const pct = (fraction: number) => `${(100 * fraction).toFixed(1)}%`;

/** Tokens at lag 0/1/2/... as shares of all trained tokens. */
function stalenessText(histogram: Record<string, number>): string {
  const total = Object.values(histogram).reduce((a, b) => a + b, 0);
  const lags = Object.keys(histogram)
    .map(Number)
    .sort((a, b) => a - b);
  if (total === 0) return '-';
  return lags.map((lag) => `${lag}:${pct(histogram[lag] / total)}`).join(' ');
}

function cpuText(processMs: number, serverMs: number | undefined): string {
  return serverMs === undefined ? processMs.toFixed(0) : `${processMs.toFixed(0)}+${serverMs.toFixed(0)}`;
}

export function formatReport(result: PipelineBenchResult): string {
  const { options: o, engineCost: fit } = result;
  const lines: string[] = [];
  lines.push(
    `workload: ${o.steps} train steps per run x ${o.rounds} rounds; batch ${o.batchGroups} groups x ${o.groupSize} = ${batchTrajectories(o)} trajectories; ` +
      `streaming maxConcurrency ${o.maxConcurrency}; episodes 1..${o.maxTurns} turns; completions ${Math.ceil(o.maxTokens / 4)}..${o.maxTokens} tokens; ` +
      `on Temporal, model calls ${o.inferenceCalls === 'local' ? 'local activities' : 'on inference workers'}, env sessions ${o.envSessions === 'local' ? 'local activities' : 'on env workers'}`,
  );
  lines.push(
    `env step latency: lognormal, median ${o.envMedianMs} ms, p99/p50 ${o.p99OverP50} (sigma ${sigmaForTail(o.p99OverP50).toFixed(3)}); ` +
      `trainer ${o.trainerMsPerToken} ms/token (fast), ${o.slowTrainerMsPerToken} ms/token (slow); fixed-latency model ${o.fixedModelLatencyMs} ms/call`,
  );
  const samples = fit.samples.map((s) => `b=${s.batch}: ${s.msPerStep.toFixed(3)}`).join(', ');
  lines.push(
    `embedded engine decode step (measured, prompt ${fit.promptLength} tokens): ${samples} ms; fit cost(b) = ${fit.fixedMs.toFixed(3)} + ${fit.perSequenceMs.toFixed(4)} x b ms (load average ${fit.loadAverage.toFixed(1)})`,
  );
  lines.push('');
  const header = ['configuration', 'traj/s', 'tokens/s', 'engine busy', 'trainer idle', 'CPU ms/traj', 'per round traj/s', 'staleness (lag:share of tokens)'];
  const rows = result.configurations.map((c) => [
    c.spec.label,
    c.trajectoriesPerSecond.toFixed(2),
    c.trainedTokensPerSecond.toFixed(0),
    pct(c.engineBusyFraction),
    pct(c.trainerIdleFraction),
    cpuText(c.processCpuMsPerTrajectory, c.serverCpuMsPerTrajectory),
    c.runs.map((r) => r.trajectoriesPerSecond.toFixed(2)).join(' / '),
    stalenessText(c.staleness),
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (cells: string[]) => cells.map((cell, i) => (i === 0 || i === cells.length - 1 ? cell.padEnd(widths[i]) : cell.padStart(widths[i]))).join('  ');
  lines.push(line(header), ...rows.map(line));
  lines.push('(throughput: run start to the last published version; busy/idle: between the first and the last train step;');
  lines.push(
    ' CPU ms/traj: this process [+ the dev server]; 1-minute load average at the end of each run: ' +
      result.runs.map((r) => r.loadAverage.toFixed(1)).join(' ') +
      ')',
  );
  lines.push('');
  for (const t of result.targets) {
    const figure = t.unit === 'x' ? `${t.measured.toFixed(2)}x` : `${t.measured.toFixed(1)}%`;
    const target = t.unit === 'x' ? `${t.target}x` : `${t.target}%`;
    lines.push(`${t.name.padEnd(56)} ${figure.padStart(8)}   target ${t.atLeast ? '>=' : '<='} ${target.padEnd(5)} ${t.met ? 'met' : 'NOT MET'}`);
  }
  for (const c of comparisons(result.configurations)) lines.push(`${c.name.padEnd(56)} ${`${c.ratio.toFixed(2)}x`.padStart(8)}   (no target)`);
  lines.push('published async speed-ups over synchronous: AReaL 2.77x, veRL 2.35-2.67x, SkyRL 1.55x');
  lines.push(`bench wall time ${result.wallSeconds.toFixed(0)} s`);
  return lines.join('\n');
}

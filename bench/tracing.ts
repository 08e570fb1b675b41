/**
 * What always-on tracing costs: throughput with tracing on vs off, measured side by side in one
 * process (alternating off/on/on/off runs, so drift hits both alike), as a ratio (target: on/off
 * >= 0.98, i.e. overhead under 2%).
 *
 *   1. the recorder alone: microseconds per span recorded and written to disk;
 *   2. the batching engine in this thread (the densest instrumented loop: a span per prefill and
 *      decode step, a counter on every occupancy change), tokens/s of full-batch bursts;
 *   3. rollouts through Temporal with the embedded model in its thread (every activity,
 *      workflow, engine step and counter traced), completion tokens/s;
 *   4. the same with a zero-latency model stand-in: orchestration only, the worst case for the
 *      relative cost of tracing (most events per second of work), turns/s.
 *
 * Beside each throughput ratio it prints the ratio of this process's CPU time per unit of work,
 * which other load on a shared machine disturbs less than wall-clock throughput.
 *
 *   npx tsc -p tsconfig.json && node dist/bench/tracing.js [--rounds N] [--groups G]   (about 10 min at N = 5, G = 8)
 */
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseRunConfig } from '../src/runConfig';
import { runRollout } from '../client/runRollout';
import type { InferenceProvider } from '../src/inference/provider';
import { createLogger } from '../src/log';
import { modelConfig } from '../src/model/config';
import { BatchingEngine } from '../src/model/engine';
import { initWeights } from '../src/model/weights';
import { freePort } from '../src/ports';
import { TrajectoryStore } from '../src/store/trajectoryStore';
import { startDevServer, stopDevServer } from '../src/temporal/devServer';
import { readRunTrace } from '../src/trace/perfetto';
import { Recorder, tracer } from '../src/trace/recorder';
import { ROLLOUT_ROLES, startWorkers } from '../workers/start';
import { ZeroLatencyProvider } from './zeroLatencyProvider';

export interface OnOff {
  /** Median figure with tracing off and on. */
  off: number;
  on: number;
  /** Median over consecutive (off, on) pairs of run on / run off: drift between pairs cancels. */
  ratio: number;
  /** Lowest and highest pair ratio. */
  ratioRange: [number, number];
  /** Every run's figure, in run order, with its mode. */
  runs: { on: boolean; value: number }[];
  /**
   * Median pair ratio of this process's CPU time (all threads) per unit of work, on / off: what
   * tracing adds in work, less sensitive than throughput to other load on the machine.
   */
  cpuRatio: number;
}

interface Run {
  on: boolean;
  value: number;
  /** CPU microseconds of this process per unit of work. */
  cpuPerUnit: number;
}

/** Process CPU time (user + system, every thread) in microseconds. */
function cpuUs(): number {
  const { user, system } = process.cpuUsage();
  return user + system;
}

export interface TracingBenchResult {
  recorderUsPerSpan: number;
  engineTokensPerSec: OnOff;
  /** Completion tokens per second of wall time (runs differ in episode lengths, so not trajectories/s). */
  rolloutTokensPerSec: OnOff;
  trajectoriesPerRun: number;
  /** Turns (model call + env step) per second of wall time. */
  zeroLatencyTurnsPerSec: OnOff;
  /** Trace events per second of wall time in the traced embedded-model rollouts. */
  rolloutEventsPerSec: number;
  /** Events found in the trace folders of runs with tracing off (must be none), as `role/name`. */
  eventsWhileOff: string[];
}

/** Trajectories per group of the rollout runs. */
const GROUP_SIZE = 4;

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
};

/** off, on | on, off | off, on | ...: `rounds` pairs, each mode first in half of them. */
function schedule(rounds: number): boolean[] {
  return Array.from({ length: 2 * rounds }, (_, i) => i % 4 === 1 || i % 4 === 2);
}

function summarize(runs: Run[]): OnOff {
  const off = median(runs.filter((r) => !r.on).map((r) => r.value));
  const on = median(runs.filter((r) => r.on).map((r) => r.value));
  const ratios: number[] = [];
  const cpuRatios: number[] = [];
  for (let i = 0; i + 1 < runs.length; i += 2) {
    const [traced, plain] = runs[i].on ? [runs[i], runs[i + 1]] : [runs[i + 1], runs[i]];
    ratios.push(traced.value / plain.value);
    cpuRatios.push(traced.cpuPerUnit / plain.cpuPerUnit);
  }
  return {
    off,
    on,
    ratio: median(ratios),
    ratioRange: [Math.min(...ratios), Math.max(...ratios)],
    runs: runs.map(({ on, value }) => ({ on, value })),
    cpuRatio: median(cpuRatios),
  };
}

/** Cost of recording and writing one span, from 100k spans into a temp folder. */
async function recorderCost(dataDir: string): Promise<number> {
  const recorder = new Recorder();
  recorder.configure({ enabled: true, flushIntervalMs: 3_600_000 });
  const scope = { dataDir, role: 'inference', run: 'bench-recorder' };
  const n = 100_000;
  const started = performance.now();
  for (let i = 0; i < n; i++) {
    if (i % 2) recorder.complete('decode', 1e15 + i, 1e15 + i + 5, { cat: 'engine', scope, attrs: { batch: i % 32 } });
    else
      recorder.begin('generate', { cat: 'activity', scope, parent: null, attrs: { activity: 'generate', attempt: 1, wf: 'bench.g00000.t000', turn: i } }).end();
    if (i % 20_000 === 19_999) await recorder.flush();
  }
  await recorder.flush();
  recorder.setEnabled(false);
  return ((performance.now() - started) * 1000) / n;
}

/** Decode tokens/s of a full batch, tracing on vs off. */
async function engineOnOff(dataDir: string, rounds: number): Promise<OnOff> {
  const engine = await BatchingEngine.create({ weights: initWeights(modelConfig(), 0), maxBatch: 32 });
  tracer.configure({ enabled: true });
  // A run open in this process, so the engine's events are written (as in an inference worker).
  const anchor = tracer.begin('bench', { scope: { dataDir, role: 'inference', run: 'bench-engine' }, parent: null });
  const burst = async (on: boolean): Promise<Run> => {
    const started = performance.now();
    const cpu = cpuUs();
    const results = await Promise.all(
      Array.from({ length: 32 }, (_, i) =>
        engine.generate({
          promptIds: Array.from({ length: 64 }, (_, t) => (t * 7 + i) % 256),
          sampling: { maxTokens: 32, temperature: 1, topP: 1, seed: i, stopTokens: [] },
        }),
      ),
    );
    const tokens = results.reduce((sum, r) => sum + r.completionIds.length, 0);
    return { on, value: (1000 * tokens) / (performance.now() - started), cpuPerUnit: (cpuUs() - cpu) / tokens };
  };
  try {
    await burst(false); // warm-up
    const runs: Run[] = [];
    for (const on of schedule(rounds * 4)) {
      tracer.setEnabled(on);
      runs.push(await burst(on));
    }
    return summarize(runs);
  } finally {
    tracer.setEnabled(true);
    anchor.end();
    await tracer.flush();
    engine.close();
  }
}

/**
 * Throughput of small rollouts through Temporal, alternating tracing off and on, in units of
 * `unit` (each run's trajectories differ, their seeds coming from the run id, so work is counted
 * in turns or tokens, not trajectories).
 */
async function rolloutOnOff(
  address: string,
  dataDir: string,
  label: string,
  rounds: number,
  unit: 'turns' | 'completionTokens',
  groups: number,
  provider?: InferenceProvider,
): Promise<OnOff & { eventsPerSec: number; eventsWhileOff: string[] }> {
  const logger = createLogger('bench');
  logger.level = 'warn';
  const config = parseRunConfig({
    dataDir,
    temporal: { address, taskQueuePrefix: `bench-${label}` },
    env: { name: 'frozenlake', size: 4, map: 'classic', maxSteps: 8 },
    agent: { maxTurns: 6 },
    sampling: { maxTokens: 12 },
    rollout: { groups, groupSize: GROUP_SIZE, maxConcurrency: 16 },
    inference: { maxBatch: 16 },
  });
  const workers = await startWorkers(config, ROLLOUT_ROLES, logger, provider ? { provider } : {});
  const store = new TrajectoryStore(dataDir);
  const workOf = async (runId: string) => {
    let work = 0;
    for (const id of await store.listTrajectories(runId)) work += (await store.getTrajectory(runId, id))?.[unit] ?? 0;
    return work;
  };
  const runs: (Run & { runId: string; wallS: number })[] = [];
  try {
    tracer.setEnabled(false);
    await runRollout(config, { runId: `bench-${label}-warmup`, local: false, logger });
    for (const [i, on] of schedule(rounds).entries()) {
      tracer.setEnabled(on);
      const runId = `bench-${label}-${i}-${on ? 'on' : 'off'}`;
      const cpu = cpuUs();
      const summary = await runRollout(config, { runId, local: false, logger });
      const cpuSpent = cpuUs() - cpu;
      const work = await workOf(runId);
      runs.push({ on, value: work / summary.wallSeconds, cpuPerUnit: cpuSpent / work, runId, wallS: summary.wallSeconds });
    }
  } finally {
    tracer.setEnabled(true);
    await workers.shutdown();
  }
  let events = 0;
  let tracedSeconds = 0;
  const eventsWhileOff: string[] = [];
  for (const run of runs) {
    const written = await readRunTrace(dataDir, run.runId).then(
      ({ segments }) => segments.flatMap((s) => s.events.map((event) => `${s.header.role}/${event.name}`)),
      () => [],
    );
    if (run.on) {
      events += written.length;
      tracedSeconds += run.wallS;
    } else {
      eventsWhileOff.push(...written);
    }
  }
  return { ...summarize(runs), eventsPerSec: events / tracedSeconds, eventsWhileOff };
}

/** `groups` of GROUP_SIZE trajectories per rollout run. */
export async function benchmarkTracing(rounds = 5, groups = 8): Promise<TracingBenchResult> {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'trajflow-bench-tracing-'));
  const recorderUsPerSpan = await recorderCost(dataDir);
  const engineTokensPerSec = await engineOnOff(dataDir, rounds);
  const server = await startDevServer({ dataDir, port: await freePort(), headless: true });
  try {
    const embedded = await rolloutOnOff(server.address, dataDir, 'embedded', rounds, 'completionTokens', groups);
    const zero = await rolloutOnOff(server.address, dataDir, 'zero', rounds, 'turns', groups, new ZeroLatencyProvider());
    return {
      recorderUsPerSpan,
      engineTokensPerSec,
      rolloutTokensPerSec: embedded,
      zeroLatencyTurnsPerSec: zero,
      trajectoriesPerRun: groups * GROUP_SIZE,
      rolloutEventsPerSec: embedded.eventsPerSec,
      eventsWhileOff: [...embedded.eventsWhileOff, ...zero.eventsWhileOff],
    };
  } finally {
    await stopDevServer(dataDir);
  }
}

export function formatTracingBench(r: TracingBenchResult): string {
  const row = (label: string, unit: string, x: OnOff, digits: number) => {
    const spread = (on: boolean) => {
      const values = x.runs.filter((run) => run.on === on).map((run) => run.value);
      return `${Math.min(...values).toFixed(digits)}-${Math.max(...values).toFixed(digits)}`;
    };
    return [
      `  ${label}`,
      `    off ${x.off.toFixed(digits)} ${unit} (runs ${spread(false)}), on ${x.on.toFixed(digits)} ${unit} (runs ${spread(true)})`,
      `    throughput ratio on/off ${x.ratio.toFixed(3)} (median of ${x.runs.length / 2} adjacent pairs, range ${x.ratioRange[0].toFixed(3)}-${x.ratioRange[1].toFixed(3)}): overhead ${((1 - x.ratio) * 100).toFixed(1)}%`,
      `    CPU per unit of work, on/off ${x.cpuRatio.toFixed(3)}: ${((x.cpuRatio - 1) * 100).toFixed(1)}% more work with tracing`,
    ].join('\n');
  };
  const runs = r.rolloutTokensPerSec.runs.length / 2;
  return [
    `tracing on vs off, alternating runs in one process (target: ratio on/off >= 0.98)`,
    `  recorder: ${r.recorderUsPerSpan.toFixed(2)} us per span recorded and written`,
    row(`batching engine, full batch (${r.engineTokensPerSec.runs.length / 2} runs each)`, 'tokens/s', r.engineTokensPerSec, 0),
    row(
      `rollouts through Temporal, embedded model (${r.trajectoriesPerRun} trajectories per run, ${runs} runs each)`,
      'completion tokens/s',
      r.rolloutTokensPerSec,
      1,
    ),
    row(`rollouts through Temporal, zero-latency model: orchestration only (${runs} runs each)`, 'turns/s', r.zeroLatencyTurnsPerSec, 1),
    `  trace volume (embedded-model rollouts): ${r.rolloutEventsPerSec.toFixed(0)} events/s x ${r.recorderUsPerSpan.toFixed(2)} us = ` +
      `${((r.rolloutEventsPerSec * r.recorderUsPerSpan) / 1e4).toFixed(2)}% of one core`,
    `  events written while tracing was off: ${r.eventsWhileOff.length}${r.eventsWhileOff.length ? ` (${r.eventsWhileOff.join(', ')})` : ''}`,
  ].join('\n');
}

if (require.main === module) {
  const flag = (name: string, fallback: number) => {
    const i = process.argv.indexOf(name);
    const value = i > 0 ? Number(process.argv[i + 1]) : fallback;
    if (!Number.isInteger(value) || value < 1) throw new Error(`${name} needs a positive integer, got ${JSON.stringify(process.argv[i + 1])}`);
    return value;
  };
  const rounds = flag('--rounds', 5);
  const groups = flag('--groups', 8);
  // runRollout adds its interrupt handlers once per run.
  process.setMaxListeners(100);
  benchmarkTracing(rounds, groups).then(
    (result) => {
      console.log(formatTracingBench(result));
      // The engine thread and Temporal's native runtime may hold the process open.
      process.exit(0);
    },
    (err) => {
      console.error(err);
      process.exit(1);
    },
  );
}

/**
 * `npm run bench:scale`: one dev server with 1,000 trajectories in flight. A rollout of cheap
 * FrozenLake episodes (sessions as local activities) and a zero-latency model stand-in, so
 * Temporal and the workflow worker are all that is measured. Prints:
 *   - errors (failed trajectories) and the most trajectories in flight at once;
 *   - workflow-task latency under that load: schedule-to-start (waiting for the worker) and
 *     start-to-complete (the worker running it), median and p99, from the stored histories;
 *   - server and worker memory per in-flight trajectory (resident set growth at the peak over the
 *     idle baseline, divided by the trajectories in flight then);
 *   - trajectories/s: over the whole run and over its steady middle (10%..90% finished), and the
 *     Temporal actions per trajectory, which is what sizes a cluster (docs/benchmarks.md: "Sizing a cluster").
 *
 *   npm run bench:scale -- [--trajectories 2000] [--concurrency 1000] [--group-size 16] [--data-dir DIR]
 */
import { readFileSync, mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { runRollout } from '../client/runRollout';
import { groupIdOf, trajectoryIdOf } from '../src/core/ids';
import { createLogger } from '../src/log';
import { freePort } from '../src/ports';
import { parseRunConfig } from '../src/runConfig';
import { startDevServer, stopDevServer } from '../src/temporal/devServer';
import { eventTimeMs, type HistoryEvent } from '../src/temporal/history';
import type { RolloutStatus } from '../workflows/signals';
import { ROLLOUT_ROLES, startWorkers } from '../workers/start';
import { percentile } from './stats';
import { ZeroLatencyProvider } from './zeroLatencyProvider';

export interface ScaleOptions {
  trajectories: number;
  concurrency: number;
  groupSize: number;
  /** Histories read for latencies and action counts (evenly spread over the run's trajectories). */
  sampledHistories: number;
  /** Where the server and the run's trajectories go (kept); by default a temporary folder. */
  dataDir?: string;
}

export interface Latency {
  medianMs: number;
  p99Ms: number;
}

export interface ScaleResult {
  options: ScaleOptions;
  trajectoriesFinished: number;
  trajectoriesFailed: number;
  meanTurns: number;
  peakInFlight: number;
  wallSeconds: number;
  trajectoriesPerSecond: number;
  /** Completions per second between 10% and 90% of the run finished. */
  steadyTrajectoriesPerSecond: number;
  workflowTaskScheduleToStart: Latency;
  workflowTaskStartToComplete: Latency;
  /** Of the rollout controller, the one workflow every slot passes through. */
  controllerTaskScheduleToStart: Latency;
  serverBytesPerTrajectory: number;
  workerBytesPerTrajectory: number;
  serverPeakRssBytes: number;
  workerPeakRssBytes: number;
  /** Temporal actions per trajectory, its group's and the controller's shares included. */
  actionsPerTrajectory: number;
  /** History events per trajectory, likewise (each one a write to the trajectory's shard). */
  eventsPerTrajectory: number;
}

/** Resident set size of a process, from /proc (Linux). */
function rssBytes(pid: number): number {
  const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return match ? Number(match[1]) * 1024 : NaN;
}

/**
 * Events Temporal Cloud bills as actions (docs.temporal.io/cloud/actions): a workflow started,
 * an activity scheduled, a batch of local activities in one workflow task (counted here per
 * marker, an upper bound), a signal or child workflow started, a timer. Queries and the workflow
 * tasks themselves are not actions.
 */
function isAction(event: HistoryEvent): boolean {
  return Boolean(
    event.workflowExecutionStartedEventAttributes ||
    event.activityTaskScheduledEventAttributes ||
    event.markerRecordedEventAttributes ||
    event.signalExternalWorkflowExecutionInitiatedEventAttributes ||
    event.startChildWorkflowExecutionInitiatedEventAttributes ||
    event.timerStartedEventAttributes,
  );
}

interface WorkflowTaskTimes {
  scheduleToStart: number[];
  startToComplete: number[];
  actions: number;
  events: number;
}

async function workflowTaskTimes(client: Client, workflowId: string): Promise<WorkflowTaskTimes> {
  const history = await client.workflow.getHandle(workflowId).fetchHistory();
  const at = new Map<string, number>();
  const times: WorkflowTaskTimes = { scheduleToStart: [], startToComplete: [], actions: 0, events: 0 };
  for (const event of history.events ?? []) {
    at.set(String(event.eventId), eventTimeMs(event));
    times.events++;
    if (isAction(event)) times.actions++;
    const started = event.workflowTaskStartedEventAttributes;
    if (started) times.scheduleToStart.push(eventTimeMs(event) - at.get(String(started.scheduledEventId))!);
    const completed = event.workflowTaskCompletedEventAttributes;
    if (completed) times.startToComplete.push(eventTimeMs(event) - at.get(String(completed.startedEventId))!);
  }
  return times;
}

function latency(values: number[]): Latency {
  return { medianMs: percentile(values, 50), p99Ms: percentile(values, 99) };
}

/** Runs `fn` over `items`, `width` at a time. */
async function inBatches<T, R>(items: T[], width: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const results: R[] = [];
  for (let i = 0; i < items.length; i += width) results.push(...(await Promise.all(items.slice(i, i + width).map(fn))));
  return results;
}

export async function benchmarkScale(options: Partial<ScaleOptions> = {}): Promise<ScaleResult> {
  const opts: ScaleOptions = { trajectories: 2000, concurrency: 1000, groupSize: 16, sampledHistories: 300, ...options };
  const groups = Math.ceil(opts.trajectories / opts.groupSize);
  const dataDir = opts.dataDir ?? mkdtempSync(path.join(os.tmpdir(), 'trajflow-scale-'));
  const server = await startDevServer({ dataDir, port: await freePort(), headless: true });
  const logger = createLogger('bench');
  logger.level = 'warn';
  try {
    const config = parseRunConfig({
      dataDir,
      temporal: { address: server.address, taskQueuePrefix: 'scale' },
      env: { name: 'frozenlake', size: 4, map: 'classic', maxSteps: 12, sessions: 'local' },
      agent: { maxTurns: 12, history: 'none' },
      rollout: { groups, groupSize: opts.groupSize, maxConcurrency: opts.concurrency },
    });
    const workers = await startWorkers(config, ROLLOUT_ROLES, logger, { provider: new ZeroLatencyProvider() });
    const runId = 'scale';
    const baseline = { server: rssBytes(server.pid), worker: process.memoryUsage().rss };
    let peak = { inFlight: 0, server: baseline.server, worker: baseline.worker };
    const finishedAt: { at: number; finished: number }[] = [];
    const startedAt = performance.now();
    let summary;
    try {
      summary = await runRollout(config, {
        runId,
        local: false,
        logger,
        onStatus: (status: RolloutStatus) => {
          finishedAt.push({ at: performance.now() - startedAt, finished: status.trajectoriesFinished });
          if (status.trajectoriesInFlight >= peak.inFlight) {
            peak = { inFlight: status.trajectoriesInFlight, server: rssBytes(server.pid), worker: process.memoryUsage().rss };
          }
        },
      });
    } finally {
      await workers.shutdown();
    }

    const connection = await Connection.connect({ address: server.address });
    try {
      const client = new Client({ connection });
      const ids = Array.from({ length: groups * opts.groupSize }, (_, i) =>
        trajectoryIdOf(groupIdOf(runId, Math.floor(i / opts.groupSize)), i % opts.groupSize),
      );
      const stride = Math.max(1, Math.floor(ids.length / opts.sampledHistories));
      const sampled = await inBatches(
        ids.filter((_, i) => i % stride === 0),
        16,
        (id) => workflowTaskTimes(client, id),
      );
      const groupTimes = await inBatches(
        Array.from({ length: groups }, (_, g) => groupIdOf(runId, g)),
        16,
        (id) => workflowTaskTimes(client, id),
      );
      const controller = await workflowTaskTimes(client, runId);
      const mean = (values: number[]) => values.reduce((a, b) => a + b, 0) / Math.max(1, values.length);
      const shared = (field: 'actions' | 'events') => (groupTimes.reduce((sum, g) => sum + g[field], 0) + controller[field]) / summary.trajectories;
      return {
        options: opts,
        trajectoriesFinished: summary.trajectories,
        trajectoriesFailed: summary.failedTrajectories,
        meanTurns: summary.meanTurns,
        peakInFlight: peak.inFlight,
        wallSeconds: summary.wallSeconds,
        trajectoriesPerSecond: summary.trajectoriesPerSecond,
        steadyTrajectoriesPerSecond: steadyRate(finishedAt, summary.trajectories),
        workflowTaskScheduleToStart: latency(sampled.flatMap((t) => t.scheduleToStart)),
        workflowTaskStartToComplete: latency(sampled.flatMap((t) => t.startToComplete)),
        controllerTaskScheduleToStart: latency(controller.scheduleToStart),
        serverBytesPerTrajectory: (peak.server - baseline.server) / Math.max(1, peak.inFlight),
        workerBytesPerTrajectory: (peak.worker - baseline.worker) / Math.max(1, peak.inFlight),
        serverPeakRssBytes: peak.server,
        workerPeakRssBytes: peak.worker,
        actionsPerTrajectory: mean(sampled.map((t) => t.actions)) + shared('actions'),
        eventsPerTrajectory: mean(sampled.map((t) => t.events)) + shared('events'),
      };
    } finally {
      await connection.close();
    }
  } finally {
    await stopDevServer(dataDir);
  }
}

/** Completions per second between the polls where 10% and 90% of the run had finished. */
function steadyRate(samples: { at: number; finished: number }[], total: number): number {
  const first = samples.find((s) => s.finished >= 0.1 * total);
  const last = samples.find((s) => s.finished >= 0.9 * total);
  if (!first || !last || last.at <= first.at) return NaN;
  return (last.finished - first.finished) / ((last.at - first.at) / 1000);
}

function parseFlags(argv: string[]): Partial<ScaleOptions> {
  const counts: Record<string, 'trajectories' | 'concurrency' | 'groupSize' | 'sampledHistories'> = {
    '--trajectories': 'trajectories',
    '--concurrency': 'concurrency',
    '--group-size': 'groupSize',
    '--sampled-histories': 'sampledHistories',
  };
  const options: Partial<ScaleOptions> = {};
  for (let i = 0; i < argv.length; i += 2) {
    const [flag, text] = [argv[i], argv[i + 1]];
    if (flag === '--data-dir') {
      if (!text) throw new Error('--data-dir needs a folder');
      options.dataDir = path.resolve(text);
      continue;
    }
    const key = counts[flag];
    if (!key) throw new Error(`unknown flag ${JSON.stringify(flag)}; flags: ${[...Object.keys(counts), '--data-dir'].join(', ')}`);
    const value = Number(text);
    if (!Number.isInteger(value) || value < 1) throw new Error(`${flag} needs a positive integer, got ${JSON.stringify(text)}`);
    options[key] = value;
  }
  return options;
}

const MiB = 1024 * 1024;
const ms = (l: Latency) => `median ${l.medianMs.toFixed(1)} ms, p99 ${l.p99Ms.toFixed(1)} ms`;

export function printScale(r: ScaleResult): void {
  const { options: o } = r;
  console.log(
    `one dev server, ${o.trajectories} trajectories, ${o.concurrency} in flight at most (groups of ${o.groupSize}, zero-latency model, FrozenLake local sessions)`,
  );
  console.log(`  finished:            ${r.trajectoriesFinished}, failed ${r.trajectoriesFailed}, most in flight at once ${r.peakInFlight}`);
  const steady = Number.isNaN(r.steadyTrajectoriesPerSecond) ? 'n/a (run too short for a steady middle)' : r.steadyTrajectoriesPerSecond.toFixed(1);
  console.log(`  trajectories/s:      ${r.trajectoriesPerSecond.toFixed(1)} over ${r.wallSeconds.toFixed(0)} s; ${steady} in the steady middle`);
  console.log(`  workflow tasks:      schedule-to-start ${ms(r.workflowTaskScheduleToStart)}; start-to-complete ${ms(r.workflowTaskStartToComplete)}`);
  console.log(`  rollout controller:  schedule-to-start ${ms(r.controllerTaskScheduleToStart)}`);
  console.log(
    `  memory:              server ${(r.serverBytesPerTrajectory / 1024).toFixed(0)} KiB and worker ${(r.workerBytesPerTrajectory / 1024).toFixed(0)} KiB per in-flight trajectory (peaks ${(r.serverPeakRssBytes / MiB).toFixed(0)} MiB, ${(r.workerPeakRssBytes / MiB).toFixed(0)} MiB)`,
  );
  console.log(
    `  per trajectory:      ${r.actionsPerTrajectory.toFixed(1)} actions, ${r.eventsPerTrajectory.toFixed(1)} history events (its group's and the controller's shares included), ${r.meanTurns.toFixed(1)} turns`,
  );
  const rate = Number.isNaN(r.steadyTrajectoriesPerSecond) ? r.trajectoriesPerSecond : r.steadyTrajectoriesPerSecond;
  console.log(`  one server sustained ${(rate * r.actionsPerTrajectory).toFixed(0)} actions/s, ${(rate * r.eventsPerTrajectory).toFixed(0)} history events/s`);
}

if (require.main === module) {
  // Flags are read inside the chain, so a bad one is reported as one line like any other error.
  Promise.resolve()
    .then(() => benchmarkScale(parseFlags(process.argv.slice(2))))
    .then(printScale)
    .catch((err) => {
      console.error(err instanceof Error ? err.message : err);
      process.exit(1);
    });
}

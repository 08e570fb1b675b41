/**
 * What Temporal adds per activity: FrozenLake episodes with a zero-latency model stand-in, once
 * through the durable workflows on a real dev server and once as the same loop of the same
 * activity functions called in-process, measured side by side in one run.
 *
 * An activity's own work is not orchestration: `generate`, `openSession` and `recordTrajectory`
 * write to the trajectory store, fsync included, in both halves. So the overhead is measured per
 * activity type: each Temporal latency less the in-process median of its own type.
 */
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection, Worker } from '@temporalio/worker';
import { MockActivityEnvironment } from '@temporalio/testing';
import { parseRunConfig } from '../src/runConfig';
import type { RunConfig } from '../config/schema';
import { createEnvActivities, createSessionActivities, SessionRegistry } from '../activities/environment';
import { createInferenceActivities } from '../activities/inference';
import { ServedWeights } from '../activities/servedWeights';
import { embeddedChatFormat } from '../src/chat/format';
import { runRollout } from '../client/runRollout';
import type { ChatMessage } from '../src/core/tokenizer';
import type { TrajectorySummary } from '../src/core/records';
import { compatibilityOf } from '../src/core/compatibility';
import { createLogger } from '../src/log';
import { buildId } from '../src/paths';
import { CheckpointStore } from '../src/store/checkpointStore';
import { TrajectoryStore } from '../src/store/trajectoryStore';
import { startDevServer, stopDevServer } from '../src/temporal/devServer';
import { envSeedOf } from '../workflows/rollout';
import { endsEpisode } from '../src/core/episode';
import { groupIdOf, sessionIdOf, trajectoryIdOf } from '../src/core/ids';
import { ROLLOUT_ROLES, startWorkers } from '../workers/start';
import { ZeroLatencyProvider } from './zeroLatencyProvider';
import { freePort } from '../src/ports';
import { percentile } from './stats';
import { eventTimeMs } from '../src/temporal/history';

/** One activity execution through Temporal, from its workflow's history. */
interface TemporalTiming {
  type: string;
  /** Scheduled to completed. */
  totalMs: number;
  /** Scheduled to started: the server's dispatch to a worker. */
  dispatchMs: number;
}

/** One activity execution in-process. */
interface InProcessTiming {
  type: string;
  ms: number;
}

export interface ActivityTypeResult {
  type: string;
  count: number;
  temporalMedianMs: number;
  dispatchMedianMs: number;
  inProcessMedianMs: number;
}

/** A no-op activity on the same server through the bare SDK (bench/bareSdk/workflows.ts). */
export interface BareSdkResult {
  activities: number;
  medianMs: number;
  dispatchMedianMs: number;
  p99Ms: number;
}

export interface OrchestrationResult {
  activities: number;
  temporalMedianMs: number;
  temporalP99Ms: number;
  inProcessMedianMs: number;
  inProcessP99Ms: number;
  /** Each Temporal latency less the in-process median of its activity type. */
  overheadMedianMs: number;
  overheadP99Ms: number;
  byType: ActivityTypeResult[];
  bareSdk: BareSdkResult;
  temporalEpisodeMs: number;
  inProcessEpisodeMs: number;
}

/** Every completed activity in one workflow history, timed from its events. */
async function activityTimings(client: Client, workflowId: string): Promise<TemporalTiming[]> {
  const history = await client.workflow.getHandle(workflowId).fetchHistory();
  const scheduled = new Map<string, { at: number; type: string }>();
  const startedAt = new Map<string, number>();
  const timings: TemporalTiming[] = [];
  for (const event of history.events ?? []) {
    const schedule = event.activityTaskScheduledEventAttributes;
    if (schedule) scheduled.set(String(event.eventId), { at: eventTimeMs(event), type: schedule.activityType?.name ?? '?' });
    const started = event.activityTaskStartedEventAttributes;
    if (started) startedAt.set(String(started.scheduledEventId), eventTimeMs(event));
    const completed = event.activityTaskCompletedEventAttributes;
    if (completed) {
      const id = String(completed.scheduledEventId);
      const { at, type } = scheduled.get(id)!;
      timings.push({ type, totalMs: eventTimeMs(event) - at, dispatchMs: startedAt.get(id)! - at });
    }
  }
  return timings;
}

/** The same server's floor: `count` no-op activities in a row through the SDK alone, one workflow. */
async function benchmarkBareSdk(address: string, count: number): Promise<BareSdkResult> {
  const workflowQueue = 'bare-sdk-workflows';
  const activityQueue = 'bare-sdk-activities';
  const connection = await NativeConnection.connect({ address });
  const clientConnection = await Connection.connect({ address });
  try {
    const workflowWorker = await Worker.create({ connection, taskQueue: workflowQueue, workflowsPath: require.resolve('./bareSdk/workflows') });
    const activityWorker = await Worker.create({ connection, taskQueue: activityQueue, activities: { noop: async (i: number) => i } });
    const client = new Client({ connection: clientConnection });
    const workflowId = 'bare-sdk-noop-loop';
    await Promise.all([
      workflowWorker.run(),
      activityWorker.run(),
      client.workflow.execute('noopLoop', { taskQueue: workflowQueue, workflowId, args: [count, activityQueue] }).finally(() => {
        workflowWorker.shutdown();
        activityWorker.shutdown();
      }),
    ]);
    const timings = await activityTimings(client, workflowId);
    const totals = timings.map((t) => t.totalMs);
    return {
      activities: timings.length,
      medianMs: percentile(totals, 50),
      dispatchMedianMs: percentile(
        timings.map((t) => t.dispatchMs),
        50,
      ),
      p99Ms: percentile(totals, 99),
    };
  } finally {
    await clientConnection.close();
    await connection.close();
  }
}

/** Per activity type, and the overhead: each Temporal latency less its type's in-process median. */
function overheadByType(temporal: TemporalTiming[], inProcess: InProcessTiming[]): Pick<OrchestrationResult, 'overheadMedianMs' | 'overheadP99Ms' | 'byType'> {
  const types = [...new Set(temporal.map((t) => t.type))];
  const byType = types.map((type) => {
    const through = temporal.filter((t) => t.type === type);
    const local = inProcess.filter((t) => t.type === type).map((t) => t.ms);
    if (local.length === 0) throw new Error(`activity ${type} ran through Temporal but not in-process: the two halves no longer run the same loop`);
    return {
      type,
      count: through.length,
      temporalMedianMs: percentile(
        through.map((t) => t.totalMs),
        50,
      ),
      dispatchMedianMs: percentile(
        through.map((t) => t.dispatchMs),
        50,
      ),
      inProcessMedianMs: percentile(local, 50),
    };
  });
  const ownWork = new Map(byType.map((t) => [t.type, t.inProcessMedianMs]));
  const overheads = temporal.map((t) => t.totalMs - ownWork.get(t.type)!);
  return { overheadMedianMs: percentile(overheads, 50), overheadP99Ms: percentile(overheads, 99), byType };
}

/** The trajectory loop of workflows/trajectory.ts, minus Temporal: same activities, same order. */
async function runEpisodeInProcess(
  config: RunConfig,
  { runId, groupId, trajectoryId, envSeed }: { runId: string; groupId: string; trajectoryId: string; envSeed: number },
  recorded: TrajectorySummary,
  timings: InProcessTiming[],
): Promise<void> {
  const logger = createLogger('bench');
  logger.level = 'warn';
  const store = new TrajectoryStore(config.dataDir);
  const sessions = new SessionRegistry();
  const compatibility = compatibilityOf(config, buildId());
  const env = createEnvActivities({ sessions, sessionQueue: 'in-process', compatibility, store, logger });
  const session = createSessionActivities({ sessions, logger });
  const checkpoints = new CheckpointStore(config.dataDir);
  const provider = new ZeroLatencyProvider();
  const { generate } = createInferenceActivities({
    provider,
    store,
    weights: new ServedWeights(provider, checkpoints, logger),
    chat: embeddedChatFormat,
    maxContext: config.model.maxContext,
    compatibility,
    logger,
  });
  // Activities expect their Temporal context (heartbeats, cancellation); the testing package's
  // mock gives them one without a server.
  const context = new MockActivityEnvironment();
  const timed = async <T>(type: string, fn: () => Promise<T>): Promise<T> => {
    const start = performance.now();
    const value = (await context.run(fn)) as T;
    timings.push({ type, ms: performance.now() - start });
    return value;
  };
  const sessionId = sessionIdOf(trajectoryId, 0);
  const opened = await timed('openSession', () => env.openSession({ sessionId, runId, env: config.env, agent: config.agent, envSeed, replayAnswers: [] }));
  let messages: ChatMessage[] = opened.next.messages;
  let turns = 0;
  let sessionClosed = false;
  while (turns < config.agent.maxTurns) {
    const reply = await timed('generate', () => generate({ runId, runSeed: config.run.seed, trajectoryId, turn: turns, messages, sampling: config.sampling }));
    const outcome = await timed('sessionTurn', () => session.sessionTurn({ sessionId, turn: turns++, text: reply.text }));
    if (outcome.kind === 'invalid') throw new Error('the stand-in always answers in format');
    sessionClosed = outcome.sessionClosed === true;
    if (endsEpisode(outcome)) break;
    messages = outcome.next!.messages;
  }
  if (!sessionClosed) await timed('closeSession', () => session.closeSession({ sessionId }));
  // The reward and summary are workflow code; the record written is the Temporal run's own
  // summary of the same episode under this run's ids, so both halves store the same bytes.
  await timed('recordTrajectory', () => env.recordTrajectory({ ...recorded, runId, groupId, trajectoryId }));
}

export async function benchmarkOrchestration(groups = 6, groupSize = 4): Promise<OrchestrationResult> {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'trajflow-bench-'));
  const server = await startDevServer({ dataDir, port: await freePort(), headless: true });
  const logger = createLogger('bench');
  logger.level = 'warn';
  try {
    const config = parseRunConfig({
      dataDir,
      temporal: { address: server.address, taskQueuePrefix: 'bench' },
      env: { name: 'frozenlake', size: 4, map: 'classic', maxSteps: 12 },
      agent: { maxTurns: 12 },
      // One trajectory at a time: latency per activity, not contention, is what is measured.
      rollout: { groups, groupSize, maxConcurrency: 1 },
    });
    const workers = await startWorkers(config, ROLLOUT_ROLES, logger, { provider: new ZeroLatencyProvider() });
    const runId = 'bench-orchestration';
    let summary;
    try {
      summary = await runRollout(config, { runId, local: false, logger });
    } finally {
      await workers.shutdown();
    }
    const connection = await Connection.connect({ address: server.address });
    const temporal: TemporalTiming[] = [];
    try {
      const client = new Client({ connection });
      for (let g = 0; g < groups; g++) {
        for (let t = 0; t < groupSize; t++) temporal.push(...(await activityTimings(client, trajectoryIdOf(groupIdOf(runId, g), t))));
      }
    } finally {
      await connection.close();
    }

    const store = new TrajectoryStore(config.dataDir);
    const inProcess: InProcessTiming[] = [];
    const started = performance.now();
    for (let g = 0; g < groups; g++) {
      for (let t = 0; t < groupSize; t++) {
        const recorded = await store.getTrajectory(runId, trajectoryIdOf(groupIdOf(runId, g), t));
        if (!recorded) throw new Error(`the Temporal run stored no summary of trajectory ${t} of group ${g}`);
        const groupId = groupIdOf('bench-in-process', g);
        const episode = { runId: 'bench-in-process', groupId, trajectoryId: trajectoryIdOf(groupId, t), envSeed: envSeedOf(config.run.seed, g) };
        await runEpisodeInProcess(config, episode, recorded, inProcess);
      }
    }
    const episodes = groups * groupSize;
    const inProcessEpisodeMs = (performance.now() - started) / episodes;
    const bareSdk = await benchmarkBareSdk(server.address, temporal.length);
    const totals = temporal.map((t) => t.totalMs);
    const local = inProcess.map((t) => t.ms);
    return {
      activities: temporal.length,
      temporalMedianMs: percentile(totals, 50),
      temporalP99Ms: percentile(totals, 99),
      inProcessMedianMs: percentile(local, 50),
      inProcessP99Ms: percentile(local, 99),
      ...overheadByType(temporal, inProcess),
      bareSdk,
      temporalEpisodeMs: (summary.wallSeconds * 1000) / episodes,
      inProcessEpisodeMs,
    };
  } finally {
    await stopDevServer(dataDir);
  }
}

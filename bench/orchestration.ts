/**
 * What Temporal adds per activity: FrozenLake episodes with a zero-latency model stand-in, once
 * through the durable workflows on a real dev server and once as the same loop of the same
 * activity functions called in-process, measured side by side in one run.
 */
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { MockActivityEnvironment } from '@temporalio/testing';
import { parseRunConfig } from '../src/runConfig';
import type { RunConfig } from '../config/schema';
import { createEnvActivities, createSessionActivities, SessionRegistry } from '../activities/environment';
import { createInferenceActivities } from '../activities/inference';
import { embeddedChatFormat } from '../src/chat/format';
import { runRollout } from '../client/runRollout';
import type { ChatMessage } from '../src/core/tokenizer';
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

export interface OrchestrationResult {
  activities: number;
  temporalMedianMs: number;
  temporalP99Ms: number;
  inProcessMedianMs: number;
  inProcessP99Ms: number;
  temporalEpisodeMs: number;
  inProcessEpisodeMs: number;
}

/** Scheduled-to-completed time of every activity in one workflow history. */
async function activityLatencies(client: Client, workflowId: string): Promise<number[]> {
  const history = await client.workflow.getHandle(workflowId).fetchHistory();
  const scheduledAt = new Map<string, number>();
  const latencies: number[] = [];
  /** An event time (protobuf Timestamp) in ms. */
  const ms = (t: { seconds?: unknown; nanos?: number | null } | null | undefined) => Number(t?.seconds) * 1000 + (t?.nanos ?? 0) / 1e6;
  for (const event of history.events ?? []) {
    if (event.activityTaskScheduledEventAttributes) scheduledAt.set(String(event.eventId), ms(event.eventTime));
    const completed = event.activityTaskCompletedEventAttributes;
    if (completed) latencies.push(ms(event.eventTime) - scheduledAt.get(String(completed.scheduledEventId))!);
  }
  return latencies;
}

/** The trajectory loop of workflows/trajectory.ts, minus Temporal: same activities, same order. */
async function runEpisodeInProcess(config: RunConfig, runId: string, trajectoryId: string, envSeed: number, timings: number[]): Promise<void> {
  const logger = createLogger('bench');
  logger.level = 'warn';
  const store = new TrajectoryStore(config.dataDir);
  const sessions = new SessionRegistry();
  const compatibility = compatibilityOf(config, buildId());
  const env = createEnvActivities({ sessions, sessionQueue: 'in-process', compatibility, store, logger });
  const session = createSessionActivities({ sessions, logger });
  const checkpoints = new CheckpointStore(config.dataDir);
  const { generate } = createInferenceActivities({
    provider: new ZeroLatencyProvider(),
    store,
    checkpoints,
    chat: embeddedChatFormat,
    maxContext: config.model.maxContext,
    compatibility,
    logger,
  });
  // Activities expect their Temporal context (heartbeats, cancellation); the testing package's
  // mock gives them one without a server.
  const context = new MockActivityEnvironment();
  const timed = async <T>(fn: () => Promise<T>): Promise<T> => {
    const start = performance.now();
    const value = (await context.run(fn)) as T;
    timings.push(performance.now() - start);
    return value;
  };
  const sessionId = sessionIdOf(trajectoryId, 0);
  const opened = await timed(() => env.openSession({ sessionId, runId, env: config.env, agent: config.agent, envSeed, replayAnswers: [] }));
  let messages: ChatMessage[] = opened.next.messages;
  let turns = 0;
  let sessionClosed = false;
  while (turns < config.agent.maxTurns) {
    const reply = await timed(() => generate({ runId, runSeed: config.run.seed, trajectoryId, turn: turns, messages, sampling: config.sampling }));
    const outcome = await timed(() => session.sessionTurn({ sessionId, turn: turns++, text: reply.text }));
    if (outcome.kind === 'invalid') throw new Error('the stand-in always answers in format');
    sessionClosed = outcome.sessionClosed === true;
    if (endsEpisode(outcome)) break;
    messages = outcome.next!.messages;
  }
  if (!sessionClosed) await timed(() => session.closeSession({ sessionId }));
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
    const temporal: number[] = [];
    try {
      const client = new Client({ connection });
      for (let g = 0; g < groups; g++) {
        for (let t = 0; t < groupSize; t++) temporal.push(...(await activityLatencies(client, trajectoryIdOf(groupIdOf(runId, g), t))));
      }
    } finally {
      await connection.close();
    }

    const inProcess: number[] = [];
    const started = performance.now();
    for (let g = 0; g < groups; g++) {
      for (let t = 0; t < groupSize; t++) {
        await runEpisodeInProcess(config, 'bench-in-process', trajectoryIdOf(groupIdOf('bench-in-process', g), t), envSeedOf(config.run.seed, g), inProcess);
      }
    }
    const episodes = groups * groupSize;
    return {
      activities: temporal.length,
      temporalMedianMs: percentile(temporal, 50),
      temporalP99Ms: percentile(temporal, 99),
      inProcessMedianMs: percentile(inProcess, 50),
      inProcessP99Ms: percentile(inProcess, 99),
      temporalEpisodeMs: (summary.wallSeconds * 1000) / episodes,
      inProcessEpisodeMs: (performance.now() - started) / episodes,
    };
  } finally {
    await stopDevServer(dataDir);
  }
}

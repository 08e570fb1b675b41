/**
 * Environment worker: polls `<prefix>-env` (session reset, reward, trajectory and group records)
 * and its own session queue (steps and close of the sessions it holds in memory).
 */
import { NativeConnection, Worker } from '@temporalio/worker';
import type { RunConfig } from '../config/schema';
import { createEnvActivities, createSessionActivities, SessionRegistry } from '../activities/environment';
import { compatibilityOf } from '../src/core/compatibility';
import type { Logger } from '../src/log';
import { buildId } from '../src/paths';
import { sweepStaleSandboxes } from '../src/sandbox/bash';
import type { TrajectoryStore } from '../src/store/trajectoryStore';
import { traceActivities } from '../src/trace/activityInterceptor';
import { busyReporter, BusyTracker, envWorkersDir, type BusyStats } from '../src/metrics/busy';
import type { SnapshotReporter } from '../src/metrics/snapshots';
import { meterActivities } from '../src/metrics/activityMetrics';
import { sessionQueueFor, taskQueuesFor } from './taskQueues';

export interface EnvWorkers {
  workers: Worker[];
  sessions: SessionRegistry;
  /** Publishes this process's env busy time to <dataDir>/env-workers/ (read by the trainer). */
  busy: SnapshotReporter<BusyStats>;
}

/** A sandbox directory idle this long whose worker process is gone is a crash leftover. */
const STALE_SANDBOX_MS = 10 * 60_000;

export async function createEnvWorkers(config: RunConfig, connection: NativeConnection, store: TrajectoryStore, logger: Logger): Promise<EnvWorkers> {
  // Sessions close their sandboxes, but a SIGKILLed worker cannot: its successor cleans up.
  const swept = await sweepStaleSandboxes(STALE_SANDBOX_MS);
  if (swept.length > 0) logger.info({ removed: swept.length }, 'removed sandbox directories of dead env workers');
  const sessions = new SessionRegistry();
  const sessionQueue = sessionQueueFor(config.temporal.taskQueuePrefix);
  const tracker = new BusyTracker();
  const common = { connection, namespace: config.temporal.namespace, interceptors: { activity: [traceActivities(config.dataDir, 'env'), meterActivities('env', tracker)] } };
  const shared = await Worker.create({
    ...common,
    taskQueue: taskQueuesFor(config.temporal.taskQueuePrefix).env,
    activities: createEnvActivities({ sessions, sessionQueue, compatibility: compatibilityOf(config, buildId()), store, logger }),
  });
  const own = await Worker.create({ ...common, taskQueue: sessionQueue, activities: createSessionActivities({ sessions }) });
  return { workers: [shared, own], sessions, busy: busyReporter(tracker, envWorkersDir(config.dataDir)) };
}

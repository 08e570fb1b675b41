/**
 * Environment worker: polls `<prefix>-env` (opening sessions, reward, trajectory and group records)
 * and its own session queue (turns and close of the sessions it holds in memory).
 */
import { NativeConnection, Worker } from '@temporalio/worker';
import type { RunConfig } from '../config/schema';
import type { Logger } from '../src/log';
import { sweepStaleSandboxes } from '../src/sandbox/bash';
import type { SessionHost } from './sessionHost';
import { taskQueuesFor } from './taskQueues';

/** A sandbox directory idle this long whose worker process is gone is a crash leftover. */
const STALE_SANDBOX_MS = 10 * 60_000;

export async function createEnvWorkers(config: RunConfig, connection: NativeConnection, host: SessionHost, logger: Logger): Promise<Worker[]> {
  // Sessions close their sandboxes, but a SIGKILLed worker cannot: its successor cleans up.
  const swept = await sweepStaleSandboxes(STALE_SANDBOX_MS);
  if (swept.length > 0) logger.info({ removed: swept.length }, 'removed sandbox directories of dead env workers');
  const common = { connection, namespace: config.temporal.namespace, interceptors: { activity: host.activityInterceptors } };
  const shared = await Worker.create({ ...common, taskQueue: taskQueuesFor(config.temporal.taskQueuePrefix).env, activities: host.envActivities });
  const own = await Worker.create({ ...common, taskQueue: host.sessionQueue, activities: host.sessionActivities });
  return [shared, own];
}

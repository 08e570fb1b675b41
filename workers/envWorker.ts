/**
 * Environment worker: polls `<prefix>-env` (opening sessions, reward, trajectory and group records, agent programs)
 * and its own session queue (turns and close of the sessions it holds in memory).
 */
import { createAgentProgramActivities } from '../activities/agentProgram';
import { Worker } from '@temporalio/worker';
import type { RunConfig } from '../config/schema';
import type { Logger } from '../src/log';
import type { WorkerConnection } from '../src/temporal/connection';
import { environmentIsolation } from '../src/plugins/registry';
import { sweepStaleSandboxes } from '../src/sandbox/bash';
import { versioningOptions } from './deployment';
import type { SessionHost } from './sessionHost';
import { taskQueuesOf, type QueueScopedConfig } from './taskQueues';

/** A sandbox directory idle this long whose worker process is gone is a crash leftover. */
const STALE_SANDBOX_MS = 10 * 60_000;

export async function createEnvWorkers(
  config: QueueScopedConfig & Pick<RunConfig, 'env'>,
  temporal: WorkerConnection,
  host: SessionHost,
  logger: Logger,
): Promise<Worker[]> {
  // Sessions close their sandboxes, but a SIGKILLed worker cannot: its successor cleans up.
  const swept = await sweepStaleSandboxes(STALE_SANDBOX_MS);
  if (swept.length > 0) logger.info({ removed: swept.length }, 'removed sandbox directories of dead env workers');
  // Refused here (it throws) rather than at each episode, where the environment is confined weaker than configured.
  const isolation = environmentIsolation(config.env);
  if (isolation !== undefined) logger.info({ env: config.env.name, isolation }, 'environment isolation on this worker');
  const common = { ...temporal, interceptors: { activity: host.activityInterceptors } };
  const shared = await Worker.create({
    ...common,
    taskQueue: taskQueuesOf(config).env,
    ...versioningOptions(config),
    // Agent programs (`agent.name: program`) run here too: long activities with heartbeats, as sessions' turns are.
    activities: { ...host.envActivities, ...createAgentProgramActivities() },
  });
  // Never versioned: only this process polls it, so a session's turns reach its own build anyway,
  // and a versioned build would register every session queue it ever had with the deployment
  // (switching builds requires the new one to poll all the queues of the old).
  const own = await Worker.create({ ...common, taskQueue: host.sessionQueue, activities: host.sessionActivities });
  return [shared, own];
}

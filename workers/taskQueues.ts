/**
 * Task queue names of a deployment, derived from its prefix so the names live in one place.
 *
 * The prefix workers poll and runs are started on is the config's `temporal.taskQueuePrefix` plus
 * a scope: a hash of what a worker must share with a run to serve it, the model and plugin module
 * fingerprints (src/core/compatibility.ts) and the data directory it reads and writes. Workers of
 * another project on the same Temporal server (a run left open there, a second config on one dev
 * server) then poll other queues and are never offered its tasks; they would only refuse them, or
 * worse, serve them from the wrong data directory. Workers started with the same config, on any
 * host (the data directory is mounted at the same path on every host) or after a restart, get the
 * same queues, so `trajflow worker --role X` scales out and a run resumes as before. The build is
 * not part of the scope: a new build's workers must poll the same queues for versioned upgrades
 * (workers/deployment.ts), and unversioned workers of another build still refuse a run's tasks
 * with a message saying so (activities/compatibility.ts).
 */
import os from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import type { RunConfig } from '../config/schema';
import { compatibilityOf } from '../src/core/compatibility';
import { hashString } from '../src/core/random';
import type { TaskQueues } from '../workflows/types';

/** The parts of a config that decide which queues its workers poll. */
export type QueueScopedConfig = Pick<RunConfig, 'temporal' | 'model' | 'modules' | 'dataDir'>;

/** The build plays no part in the scope (see above), so any placeholder does for the fingerprint's code part. */
const ANY_BUILD = '';

/** The hash of what a worker must share with a run to serve its tasks. */
export function queueScopeOf(config: QueueScopedConfig): string {
  const { model, modules } = compatibilityOf(config, ANY_BUILD);
  return hashString(JSON.stringify({ model, modules, dataDir: path.resolve(config.dataDir) }))
    .toString(16)
    .padStart(8, '0');
}

/** The prefix every task queue (and the worker deployment) of this config's workers starts with. */
export function taskQueuePrefixOf(config: QueueScopedConfig): string {
  return `${config.temporal.taskQueuePrefix}-${queueScopeOf(config)}`;
}

/** The role queues this config's workers poll and its runs are started on. */
export function taskQueuesOf(config: QueueScopedConfig): TaskQueues {
  return taskQueuesFor(taskQueuePrefixOf(config));
}

export function taskQueuesFor(prefix: string): TaskQueues {
  return { workflows: `${prefix}-workflows`, inference: `${prefix}-inference`, env: `${prefix}-env`, trainer: `${prefix}-trainer` };
}

/**
 * The Temporal Worker Deployment whose versions (one per build) the workers of this prefix form,
 * when versioning is on (workers/deployment.ts).
 */
export function deploymentNameFor(prefix: string): string {
  return prefix;
}

/** A queue only this env worker process polls: where the turns and close of its sessions are routed. */
export function sessionQueueFor(prefix: string): string {
  return `${prefix}-env-session-${os.hostname()}-${process.pid}-${randomUUID().slice(0, 8)}`;
}

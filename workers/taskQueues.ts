/** Task queue names of a deployment, derived from its prefix so the names live in one place. */
import os from 'node:os';
import { randomUUID } from 'node:crypto';
import type { TaskQueues } from '../workflows/types';

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

/** A queue only this env worker process polls: where its sessions' steps are routed. */
export function sessionQueueFor(prefix: string): string {
  return `${prefix}-env-session-${os.hostname()}-${process.pid}-${randomUUID().slice(0, 8)}`;
}

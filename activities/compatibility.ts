/**
 * Refusing work a worker cannot do right: a run records the fingerprint of the code and config it
 * started with, and a worker whose own differs in a part its role depends on refuses the task
 * with a retryable failure that says what differs. Temporal retries it, so once a matching worker
 * polls the same queue it takes the task and nothing is lost; until then the pending activity
 * shows the message in the Web UI and `trajflow status`.
 */
import { ApplicationFailure } from '@temporalio/activity';
import os from 'node:os';
import type { Logger } from 'pino';
import { incompatibilities, ROLE_PARTS, type Compatibility } from '../src/core/compatibility';
import { WORKER_MISMATCH } from '../src/core/failures';

/** Throws the refusal when the run's fingerprint (absent in runs started before it existed) differs. */
export function refuseIfIncompatible(
  role: keyof typeof ROLE_PARTS,
  runId: string,
  run: Compatibility | undefined,
  worker: Compatibility,
  logger: Logger,
): void {
  if (!run) return;
  const differences = incompatibilities(run, worker, ROLE_PARTS[role]);
  if (differences.length === 0) return;
  const message =
    `${role} worker ${os.hostname()}/${process.pid} refuses run ${runId}: ${differences.join('; ')}. ` +
    `Start ${role} workers with the run's config and build; a matching worker will take this task.`;
  logger.warn({ runId, differences }, 'refusing a task of a run this worker does not match');
  throw ApplicationFailure.retryable(message, WORKER_MISMATCH);
}

/**
 * A run's workflows on the server, found by their `TrajflowRun` search attribute.
 *
 * The workflow a caller follows can close before the rest of its run: a group signals its end to
 * the controller and closes a workflow task later, so a rollout's result can arrive while its last
 * groups are still open; a training run ends at its last step while the controller finishes the
 * groups it had started. A run is done once none of its workflows is open. Workers stopped before
 * that leave the rest waiting in Temporal, to resume on whatever workers poll its queues next:
 * another run's of the same config (workers/taskQueues.ts).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Client } from '@temporalio/client';
import type { Logger } from '../src/log';
import { openWorkflowsQuery } from './runQueries';
import { RunInterrupted, unlessInterrupted } from './launch';

export { OPEN_WORKFLOWS_QUERY, openWorkflowsQuery } from './runQueries';

/** How long a run's caller waits, once its workflow has its result, for the rest of the run to close. */
const RUN_SETTLE_MS = 120_000;

/**
 * Waits until visibility lists no open workflow of `runId`, at most `timeoutMs` (RUN_SETTLE_MS by
 * default); returns how many were still open then, and warns of them (0 once the run has closed).
 * Visibility lags a close by a little, so a count read at once may still include a workflow that
 * has just closed; polling absorbs that. Throws RunInterrupted when `signal` aborts.
 */
export async function awaitRunClosed(client: Client, runId: string, options: { logger: Logger; timeoutMs?: number; signal?: AbortSignal }): Promise<number> {
  const { logger, timeoutMs = RUN_SETTLE_MS, signal } = options;
  const timeout = AbortSignal.timeout(timeoutMs);
  let open: number | undefined;
  try {
    await unlessInterrupted(runId, signal ? AbortSignal.any([signal, timeout]) : timeout, async (calls) => {
      // Short sleeps first: usually only the groups' last workflow tasks are left.
      for (let pauseMs = 25; ; pauseMs = Math.min(2 * pauseMs, 1_000)) {
        open = (await client.withAbortSignal(calls, () => client.workflow.count(openWorkflowsQuery(runId)))).count;
        if (open === 0) return;
        await sleep(pauseMs, undefined, { signal: calls });
      }
    });
    return 0;
  } catch (err) {
    if (!(err instanceof RunInterrupted) || signal?.aborted) throw err;
    if (open === undefined) throw new Error(`could not count the open workflows of run ${runId} within ${timeoutMs} ms`, { cause: err });
    logger.warn({ runId, open, waitedMs: timeoutMs }, 'workflows of the run are still open; they finish when workers next poll');
    return open;
  }
}

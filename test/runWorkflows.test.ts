/**
 * awaitRunClosed on the dev server: a run with a workflow no worker polls stays open until that
 * workflow closes, and the wait says so instead of returning early.
 */
import { awaitRunClosed, openWorkflowsQuery } from '../client/runWorkflows';
import { RunInterrupted } from '../client/launch';
import { createLogger } from '../src/log';
import { SEARCH_ATTRIBUTES } from '../src/temporal/searchAttributes';
import { eventually, withClient } from './support/harness';

const logger = createLogger('test');
logger.level = 'error';

describe('awaitRunClosed', () => {
  it('waits for every workflow of the run to close, and reports those still open at its deadline', async () => {
    const runId = `settle-${process.pid}-${Date.now()}`;
    await withClient(async (client) => {
      // A workflow on a task queue no worker polls stays open until it is terminated.
      const handle = await client.workflow.start('groupWorkflow', {
        workflowId: `${runId}.g00000`,
        taskQueue: `${runId}-nobody-polls`,
        args: [],
        typedSearchAttributes: [{ key: SEARCH_ATTRIBUTES.run, value: runId }],
      });
      await eventually(async () => ((await client.workflow.count(openWorkflowsQuery(runId))).count === 1 ? true : undefined));

      expect(await awaitRunClosed(client, runId, { logger, timeoutMs: 1_000 })).toBe(1);

      const interrupt = new AbortController();
      const interrupted = awaitRunClosed(client, runId, { logger, timeoutMs: 30_000, signal: interrupt.signal });
      interrupt.abort();
      await expect(interrupted).rejects.toBeInstanceOf(RunInterrupted);

      const started = Date.now();
      const terminated = new Promise((resolve) => setTimeout(resolve, 500)).then(() => handle.terminate('test: closing the run'));
      expect(await awaitRunClosed(client, runId, { logger, timeoutMs: 30_000 })).toBe(0);
      expect(Date.now() - started).toBeGreaterThanOrEqual(500);
      await terminated;
    });
  });

  it('returns at once for a run with nothing open', async () => {
    await withClient(async (client) => {
      expect(await awaitRunClosed(client, `no-such-run-${process.pid}`, { logger, timeoutMs: 5_000 })).toBe(0);
    });
  });
});

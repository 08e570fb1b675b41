/**
 * The progress poll of `trajflow rollout|train` stops at once even with a query in flight that no
 * worker will answer: a SIGTERM shuts the command's workers down before its own handler stops the
 * poll, and a query to a workflow whose worker stopped polling waits for its deadline.
 */
import { createLogger } from '../src/log';
import { pollProgress, PROGRESS_QUERY_DEADLINE_MS } from '../client/poll';
import { rolloutStartOptions } from '../client/runRollout';
import { rolloutWorkflow } from '../workflows/rollout';
import { rolloutStatusQuery } from '../workflows/signals';
import { ROLLOUT_ROLES, startWorkers } from '../workers/start';
import { waitFor } from './support/faultKit';
import { testConfig, withClient } from './support/harness';

it('ends a progress query that waits for a worker that is gone at its deadline, and at once on stop', async () => {
  const config = testConfig('poll-stop');
  const logger = createLogger('test');
  logger.level = 'warn';
  const workers = await startWorkers(config, ROLLOUT_ROLES, logger);
  await withClient(async (client) => {
    const handle = await client.workflow.start(rolloutWorkflow, rolloutStartOptions(config, 'poll-stop-run'));
    try {
      // Answered while the workers run.
      expect((await handle.query(rolloutStatusQuery)).groupsTotal).toBe(config.rollout.groups);
      await workers.shutdown();
      let asked = 0;
      let answered = 0;
      const poll = pollProgress(
        client,
        () => {
          asked++;
          return handle.query(rolloutStatusQuery);
        },
        () => answered++,
      );
      // A query a second at most, none answered: the first ends at its deadline, then the next is sent.
      await waitFor('a second query', async () => asked >= 2 || undefined, 1_000 + PROGRESS_QUERY_DEADLINE_MS + 5_000, 50);
      expect(answered).toBe(0);
      // The second is in flight (it started a moment ago): cancelled on stop, not left to its deadline.
      const stopping = Date.now();
      await poll.stop();
      expect(Date.now() - stopping).toBeLessThan(1_000);
    } finally {
      await handle.terminate();
    }
  });
}, 60_000);

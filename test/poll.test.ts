/**
 * The progress poll of `trajflow rollout|train` stops at once even with a query in flight that no
 * worker will answer: a SIGTERM shuts the command's workers down before its own handler stops the
 * poll, and a query to a workflow whose worker stopped polling waits for its deadline.
 */
import { createLogger } from '../src/log';
import { pollEvery } from '../client/poll';
import { rolloutStartOptions } from '../client/runRollout';
import { rolloutWorkflow } from '../workflows/rollout';
import { rolloutStatusQuery } from '../workflows/signals';
import { ROLLOUT_ROLES, startWorkers } from '../workers/start';
import { testConfig, withClient } from './support/harness';

it('stops a poll whose query waits for a worker that is gone', async () => {
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
      const poll = pollEvery(100, async (call) => {
        asked++;
        await client.withAbortSignal(call, () => handle.query(rolloutStatusQuery));
        answered++;
      });
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      // One query sent, unanswered, and no other piled up behind it.
      expect([asked, answered]).toEqual([1, 0]);
      const stopping = Date.now();
      await poll.stop();
      expect(Date.now() - stopping).toBeLessThan(5_000);
    } finally {
      await handle.terminate();
    }
  });
}, 60_000);

/**
 * A 32k-token trajectory through the durable pipeline: 24 turns of ~1,500-token contexts. It
 * completes, every token is stored and replayed into its training sequences, and no workflow
 * history event grows with the trajectory: token ids never enter history (claim check), and each
 * event carries at most one turn's text.
 */
import path from 'node:path';
import { runRollout } from '../client/runRollout';
import { buildTrainingSequences } from '../src/core/sequence';
import { createLogger } from '../src/log';
import { TrajectoryStore } from '../src/store/trajectoryStore';
import { ROLLOUT_ROLES, startWorkers } from '../workers/start';
import { testConfig, withClient } from './support/harness';

const PLUGIN = path.join(__dirname, 'support', 'plugins', 'customPlugin.ts');
const OBSERVATION_CHARS = 1500;
const TURNS = 24;

describe('a 32k-token trajectory', () => {
  const logger = createLogger('test');
  logger.level = 'error';

  it('completes with every token stored and no history event larger than one turn', async () => {
    const config = testConfig(
      'long',
      {
        env: { name: 'long-talk', observationChars: OBSERVATION_CHARS, steps: TURNS },
        agent: { name: 'verbatim', maxTurns: TURNS, history: 'none' },
        model: { maxContext: 2048 },
        sampling: { maxTokens: 8 },
        rollout: { groups: 1, groupSize: 1, maxConcurrency: 1 },
      },
      { modules: [PLUGIN] },
    );
    const workers = await startWorkers(config, ROLLOUT_ROLES, logger);
    try {
      const summary = await runRollout(config, { runId: 'long-run', local: false, logger });
      expect(summary.failedTrajectories).toBe(0);
    } finally {
      await workers.shutdown();
    }

    const store = new TrajectoryStore(config.dataDir);
    const [id] = await store.listTrajectories('long-run');
    const trajectory = (await store.getTrajectory('long-run', id))!;
    expect(trajectory).toMatchObject({ status: 'max_steps', turns: TURNS, envSteps: TURNS });
    const turns = await store.getTurns('long-run', id);
    const tokens = turns.reduce((sum, t) => sum + t.promptDeltaIds.length + t.completionIds.length, 0);
    const sequences = buildTrainingSequences(turns);
    expect(sequences).toHaveLength(TURNS);
    expect(sequences.reduce((sum, s) => sum + s.ids.length, 0)).toBe(tokens);
    expect(tokens).toBeGreaterThanOrEqual(32 * 1024);

    const events = await withClient(async (client) => (await client.workflow.getHandle(id).fetchHistory()).events ?? []);
    const sizes = events.map((event) => JSON.stringify(event).length);
    const historyBytes = sizes.reduce((a, b) => a + b, 0);
    console.log(
      `32k-token trajectory: ${tokens} tokens in ${TURNS} turns; history ${events.length} events, ${historyBytes} bytes, largest event ${Math.max(...sizes)} bytes`,
    );
    // An event carries at most one turn's new text (the observation, in the session's answer and
    // in the next generate input); the ~1,500-token contexts, let alone 32k token ids, never.
    expect(Math.max(...sizes)).toBeLessThan(2 * OBSERVATION_CHARS + 2048);
  }, 300_000);
});

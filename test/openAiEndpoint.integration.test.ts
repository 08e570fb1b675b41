/**
 * An agent program outside Temporal, on OpenAI's client, trained through trajflow's
 * OpenAI-compatible endpoint: an env worker runs it per trajectory, its calls (one plain, one
 * streamed) become updates of the trajectory's workflow and turns in the store, the second
 * continuing the first's sampled ids exactly; its own reward is the trajectory's. Bad requests get
 * OpenAI-style errors naming what is wrong.
 */
import path from 'node:path';
import type { RunConfig } from '../config/schema';
import { runRollout } from '../client/runRollout';
import { nextPromptIds } from '../src/core/sequence';
import { createLogger } from '../src/log';
import { createProvider } from '../src/model/createProvider';
import { freePort } from '../src/ports';
import { TrajectoryStore } from '../src/store/trajectoryStore';
import { ROLLOUT_ROLES, startWorkers, type RunningWorkers } from '../workers/start';
import { testConfig } from './support/harness';
import { recordingProvider, type ModelCall } from './support/recordingProvider';

const PROGRAM = path.join(__dirname, 'support', 'agentPrograms', 'checked.js');

describe('an agent program through the OpenAI-compatible endpoint', () => {
  const logger = createLogger('test');
  logger.level = 'error';
  const calls: ModelCall[] = [];
  let config: RunConfig;
  let workers: RunningWorkers;

  beforeAll(async () => {
    config = testConfig('agent-program', {
      env: { name: 'arithmetic', digits: 3, terms: 2, operators: ['*'] },
      agent: { name: 'program', command: [process.execPath, PROGRAM], maxTurns: 4 },
      inference: { endpoint: { port: await freePort() } },
      rollout: { groups: 1, groupSize: 2, maxConcurrency: 4 },
      sampling: { maxTokens: 8 },
    });
    workers = await startWorkers(config, ROLLOUT_ROLES, logger, { provider: recordingProvider(await createProvider(config, logger), calls) });
  }, 120_000);
  afterAll(async () => {
    await workers?.shutdown();
  });

  it("stores the program's calls as turns continuing the sampled ids, and takes its reported reward", async () => {
    const runId = 'agent-program-1';
    const summary = await runRollout(config, { runId, local: false, logger });
    expect(summary).toMatchObject({ trajectories: 2, failedTrajectories: 0 });

    const store = new TrajectoryStore(config.dataDir);
    for (const trajectoryId of await store.listTrajectories(runId)) {
      const trajectory = (await store.getTrajectory(runId, trajectoryId))!;
      expect(trajectory).toMatchObject({ status: 'ended', reason: 'episode ended: the agent reported reward 0.25', reward: 0.25, turns: 2 });
      const turns = await store.getTurns(runId, trajectoryId, trajectory.turns);
      expect(turns[0].messages).toEqual([
        { role: 'system', content: 'Answer with the number only.' },
        { role: 'user', content: expect.stringMatching(/^What is \d{3} \* \d{3}\?$/) },
      ]);
      // The streamed check continues the conversation: only its new message was rendered.
      expect(turns[1].startsContext).toBeUndefined();
      expect(turns[1].messages).toEqual([{ role: 'user', content: 'Check it.' }]);
      turns.forEach((turn, index) => {
        const prompt = nextPromptIds(turns.slice(0, index), turn.promptDeltaIds, index === 0);
        const given = calls.filter((call) => call.promptIds.join() === prompt.join() && call.completionIds.join() === turn.completionIds.join());
        expect(given).toHaveLength(1);
      });
    }
  }, 180_000);

  it('answers bad requests with an error naming what is wrong', async () => {
    const url = `http://127.0.0.1:${config.inference.endpoint!.port}/v1`;
    const post = (route: string, body: unknown, key?: string) =>
      fetch(`${url}${route}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}) },
        body: JSON.stringify(body),
      });
    const noKey = await post('/chat/completions', { model: 'm', messages: [{ role: 'user', content: 'hi' }] });
    expect(noKey.status).toBe(401);
    const badBody = await post('/chat/completions', { model: 'm', messages: [] }, 'some-trajectory');
    expect(badBody.status).toBe(400);
    expect(((await badBody.json()) as { error: { message: string } }).error.message).toContain('messages');
    const image = await post('/chat/completions', { model: 'm', messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'x' } }] }] }, 't');
    expect(image.status).toBe(400);
    expect(((await image.json()) as { error: { message: string } }).error.message).toContain('messages[0].content[0]: image_url');
    const unknown = await post('/chat/completions', { model: 'm', messages: [{ role: 'user', content: 'hi' }] }, 'no-such-trajectory');
    expect(unknown.status).toBe(404);
    const badReward = await post('/trajflow/reward', { reward: 'high' }, 'no-such-trajectory');
    expect(badReward.status).toBe(400);
  });
});

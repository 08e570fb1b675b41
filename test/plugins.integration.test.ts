/**
 * Bring-your-own environment and agent, and bad input, through the durable pipeline: a config
 * names a plugin module defined only in this test tree; its environment and agent run through the
 * controller, group and trajectory workflows like the built-in ones. Then environments that throw
 * in reset or step, a reward that throws, a hanging tool, and turns and episodes past their time
 * limits: each trajectory ends with its status and a reason naming what failed, what was done
 * before the failure stays stored, and failed trajectories are listed apart in their group,
 * never scored. Output too large for workflow history is cut (observations) or fails the
 * trajectory with a reason naming the activity, the size and the limit (anything else).
 */
import path from 'node:path';
import type { z } from 'zod';
import { EnvConfigSchema, type RunConfig } from '../config/schema';
import { runRollout } from '../client/runRollout';
import { createLogger } from '../src/log';
import { TrajectoryStore } from '../src/store/trajectoryStore';
import { ROLLOUT_ROLES, startWorkers, type RunningWorkers } from '../workers/start';
import { testConfig } from './support/harness';
import { HUGE_TEXT } from './support/plugins/customPlugin';

const PLUGIN = path.join(__dirname, 'support', 'plugins', 'customPlugin.ts');

describe('plugin environments and bad input on the dev server', () => {
  const logger = createLogger('test');
  logger.level = 'error';
  const base = testConfig('plugins', { rollout: { groups: 1, groupSize: 2, maxConcurrency: 4 }, sampling: { maxTokens: 4 } }, { modules: [PLUGIN] });
  const store = new TrajectoryStore(base.dataDir);
  let workers: RunningWorkers;
  let runs = 0;

  beforeAll(async () => {
    workers = await startWorkers(base, ROLLOUT_ROLES, logger);
  });
  afterAll(async () => {
    await workers.shutdown();
  });

  /** Runs one group of two trajectories with this env and agent on the shared workers. */
  async function rollout(env: z.input<typeof EnvConfigSchema>, agent: Partial<RunConfig['agent']> = {}) {
    const runId = `plugins-${++runs}`;
    const config: RunConfig = { ...base, env: EnvConfigSchema.parse(env), agent: { ...base.agent, name: 'verbatim', ...agent } };
    const summary = await runRollout(config, { runId, local: false, logger });
    const ids = await store.listTrajectories(runId);
    const trajectories = await Promise.all(ids.map(async (id) => (await store.getTrajectory(runId, id))!));
    const group = (await store.getGroup(runId, `${runId}.g00000`))!;
    return { runId, summary, trajectories, group };
  }

  it('runs a custom environment and agent from a module the config names', async () => {
    const { summary, trajectories, group } = await rollout({ name: 'say-the-word', turnTimeoutS: 60 });
    expect(summary.trajectories).toBe(2);
    expect(summary.failedTrajectories).toBe(0);
    for (const t of trajectories) {
      expect(t).toMatchObject({ env: 'say-the-word', status: 'ended', reason: 'episode ended: answered', turns: 1, envSteps: 1 });
    }
    expect(group.trajectoryIds).toHaveLength(2);
    expect(group.failed).toEqual([]);
  });

  const faults = [
    ['reset throws', { fault: 'reset' }, {}, 'failed', /environment "faulty": reset failed: the map file is missing/, 0],
    ['step throws after a good step', { fault: 'step', atStep: 1 }, {}, 'failed', /environment "faulty": step 1 failed: the simulator crashed at step 1/, 2],
    ['the reward throws', { fault: 'reward' }, {}, 'failed', /reward "test-throws" threw: the grading service is down/, 1],
    [
      'a step charges a negative penalty',
      { fault: 'penalty' },
      {},
      'failed',
      /environment "faulty": step 0 failed: penalty must be a finite number >= 0, got -1/,
      1,
    ],
    [
      'a step prices an action below 0',
      { fault: 'price' },
      {},
      'failed',
      /environment "faulty": step 0 failed: actionPenalties\[1\] must be a finite number >= 0, got -1/,
      1,
    ],
    [
      'a turn outlives env.turnTimeoutS',
      { fault: 'slow-step', slowStepMs: 4000, turnTimeoutS: 1 },
      {},
      'env_timeout',
      /took longer than 1 s \(env\.turnTimeoutS\)/,
      1,
    ],
    [
      'the episode outlives agent.episodeTimeoutS',
      { fault: 'slow-step', slowStepMs: 1500, maxSteps: 10 },
      { maxTurns: 10, episodeTimeoutS: 2 },
      'timeout',
      /longer than 2 s \(agent\.episodeTimeoutS\)/,
      undefined,
    ],
    [
      'a step returns 3 MiB of info',
      { fault: 'huge-info' },
      {},
      'failed',
      /^sessionTurn returned 3 MiB \(\d+ bytes\), over the 1 MiB limit on what a trajectory activity may return \(Temporal refuses a payload over 2 MiB\)$/,
      1,
    ],
    ['a step returns info JSON cannot write', { fault: 'bigint-info' }, {}, 'failed', /^sessionTurn returned a result Temporal cannot serialize: .*BigInt/, 1],
  ] as const;
  // Sessions in env workers (activities) and in the workflow worker (local activities) alike.
  const faultCases = faults.flatMap(([name, ...fault]) => (['env-worker', 'local'] as const).map((sessions) => [name, sessions, ...fault] as const));
  it.each(faultCases)(
    '%s (sessions: %s): the trajectory records why, keeps its turns, and is not scored',
    async (_case, sessions, env, agent, status, reason, turns) => {
      const { summary, trajectories, group, runId } = await rollout({ name: 'faulty', turnTimeoutS: 60, sessions, ...env }, agent);
      expect(summary.failedTrajectories).toBe(2);
      expect(trajectories).toHaveLength(2);
      for (const t of trajectories) {
        expect(t.status).toBe(status);
        expect(t.reason).toMatch(reason);
        if (turns !== undefined) expect(t.turns).toBe(turns);
        // The model turns done before the failure are stored, token for token.
        expect(await store.getTurns(runId, t.trajectoryId)).toHaveLength(t.turns);
      }
      expect(group.trajectoryIds).toEqual([]);
      expect(group.failed.map((f) => f.reason)).toEqual(trajectories.map(() => expect.stringContaining(`${status}: `)));
    },
  );

  it.each(['env-worker', 'local'] as const)(
    'a 3 MiB observation is cut to agent.maxTurnTextBytes with a note, and the episode plays on (sessions: %s)',
    async (sessions) => {
      const budget = 256;
      const { summary, trajectories, runId } = await rollout(
        { name: 'faulty', turnTimeoutS: 60, sessions, fault: 'huge-observation', maxSteps: 2 },
        { maxTurnTextBytes: budget },
      );
      expect(summary.failedTrajectories).toBe(0);
      for (const t of trajectories) {
        expect(t).toMatchObject({ status: 'max_steps', reason: 'environment step limit reached', turns: 2, envSteps: 2 });
        const turns = await store.getTurns(runId, t.trajectoryId);
        expect(turns.map((turn) => turn.messages.map((m) => m.role))).toEqual([['system', 'user'], ['user']]);
        for (const { messages } of turns) {
          const shown = messages.at(-1)!.content;
          const [kept, note] = shown.split('\n[cut: ');
          expect(HUGE_TEXT.startsWith(kept)).toBe(true);
          expect(note).toBe(`the last ${HUGE_TEXT.length - kept.length} of ${HUGE_TEXT.length} bytes are not shown (agent.maxTurnTextBytes)]`);
          expect(messages.reduce((bytes, m) => bytes + Buffer.byteLength(m.content), 0)).toBeLessThanOrEqual(budget);
        }
      }
    },
  );

  it('with the default agent.maxTurnTextBytes, a 3 MiB observation fills the context: the trajectory ends max_context', async () => {
    const { summary, trajectories } = await rollout({ name: 'faulty', turnTimeoutS: 60, fault: 'huge-observation' });
    expect(summary.failedTrajectories).toBe(0);
    for (const t of trajectories) {
      expect(t).toMatchObject({ status: 'max_context', turns: 0 });
      // 64 KiB of text is some 65,600 tokens of the embedded model's byte-level tokenizer.
      expect(t.reason).toMatch(/^context full \(65\d{3} tokens\) before turn 0$/);
    }
  });

  it('a hanging tool times out into a result the model reads; the episode goes on', async () => {
    const { summary, trajectories, runId } = await rollout({ name: 'faulty', turnTimeoutS: 60, fault: 'tool', atStep: 0, maxSteps: 2 });
    expect(summary.failedTrajectories).toBe(0);
    for (const t of trajectories) {
      expect(t).toMatchObject({ status: 'max_steps', envSteps: 2, turns: 2 });
      const [, second] = await store.getTurns(runId, t.trajectoryId);
      expect(second.messages).toEqual([{ role: 'user', content: 'tool "test-hangs" timed out after 300 ms' }]);
    }
  });
});

/**
 * The session activities over a real FrozenLake session (a mock activity context in place of a
 * worker): a session closes itself after its last turn, so the trajectory sends no close, and a
 * close that fails then does not fail the turn.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { MockActivityEnvironment } from '@temporalio/testing';
import { createEnvActivities, createSessionActivities, SessionRegistry } from '../activities/environment';
import { z } from 'zod';
import { compatibilityOf } from '../src/core/compatibility';
import { SESSION_LOST } from '../src/core/failures';
import { FrozenLake } from '../src/envs/frozenlake';
import { createLogger } from '../src/log';
import { pluginApi } from '../src/plugins/registry';
import { parseRunConfig } from '../src/runConfig';
import { TrajectoryStore } from '../src/store/trajectoryStore';

const CLASSIC = { name: 'frozenlake', size: 4, map: 'classic', slippery: false, maxSteps: 12 };

/** The classic 4x4 map, whose close fails. */
class ClosesBadly extends FrozenLake {
  close(): void {
    throw new Error('the simulator would not stop');
  }
}
pluginApi.registerEnvironment('frozenlake-closes-badly', {
  options: z.strictObject({}),
  create: (_options, { seed }) => new ClosesBadly({ size: 4, map: 'classic', mapSeed: seed, slippery: false, seed, maxSteps: 12 }),
});

/** A session on the classic 4x4 map (not slippery) and the session activities over it. */
async function openClassicSession(dataDir: string, maxTurns: number, envConfig: Record<string, unknown> = CLASSIC) {
  const config = parseRunConfig({ dataDir, env: envConfig, agent: { maxTurns } });
  const sessions = new SessionRegistry();
  const logger = createLogger('test');
  const warnings: unknown[] = [];
  jest.spyOn(logger, 'warn').mockImplementation((...args: unknown[]) => void warnings.push(args));
  const env = createEnvActivities({
    sessions,
    sessionQueue: 'here',
    compatibility: compatibilityOf(config, 'test'),
    store: new TrajectoryStore(dataDir),
    logger,
  });
  const session = createSessionActivities({ sessions, logger });
  const context = new MockActivityEnvironment();
  const call = <T>(fn: () => Promise<T>): Promise<T> => context.run(fn) as Promise<T>;
  const sessionId = 'run.g00000.t000.s0';
  await call(() => env.openSession({ sessionId, runId: 'run', env: config.env, agent: config.agent, envSeed: 1, replayAnswers: [] }));
  const turn = (turn: number, text: string) => call(() => session.sessionTurn({ sessionId, turn, text }));
  return { sessions, turn, sessionId, warnings };
}

/** Runs `fn` with a fresh data directory, removed after. */
async function withTempDir(fn: (dir: string) => Promise<void>): Promise<void> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'trajflow-sessions-'));
  try {
    await fn(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

describe('session activities', () => {
  it('a session closes itself on the turn that ends its episode, and says so', () =>
    withTempDir(async (dir) => {
      const { sessions, turn } = await openClassicSession(dir, 12);
      // The classic map: S at the top left, G at the bottom right, this path avoids the holes.
      const moves = ['down', 'down', 'right', 'right', 'down', 'right'];
      for (const [i, move] of moves.slice(0, -1).entries()) {
        const outcome = await turn(i, `Action: ${move}`);
        expect(outcome).toMatchObject({ kind: 'stepped', done: false });
        expect(outcome.sessionClosed).toBeUndefined();
        expect(sessions.size).toBe(1);
      }
      const last = await turn(moves.length - 1, 'Action: right');
      expect(last).toMatchObject({ kind: 'stepped', done: true, reward: 1, sessionClosed: true });
      expect(sessions.size).toBe(0);
    }));

  it('a close that fails after the last turn is logged; the turn keeps its outcome', () =>
    withTempDir(async (dir) => {
      const { sessions, turn, sessionId, warnings } = await openClassicSession(dir, 1, { name: 'frozenlake-closes-badly' });
      expect(await turn(0, 'Action: down')).toMatchObject({ kind: 'stepped', done: false, sessionClosed: true });
      expect(sessions.size).toBe(0);
      expect(warnings).toEqual([[{ sessionId, err: 'Error: the simulator would not stop' }, 'closing a finished session failed']]);
    }));

  it("a session closes itself after the agent's last turn, an unparseable answer included", () =>
    withTempDir(async (dir) => {
      const { sessions, turn, sessionId } = await openClassicSession(dir, 2);
      expect((await turn(0, 'Action: right')).sessionClosed).toBeUndefined();
      const last = await turn(1, 'no idea');
      expect(last).toMatchObject({ kind: 'invalid', sessionClosed: true });
      expect(sessions.size).toBe(0);
      // A turn after that finds no session: the trajectory would rebuild it, never act on a closed one.
      await expect(turn(2, 'Action: right')).rejects.toMatchObject({ type: SESSION_LOST, message: `no environment session ${sessionId} on this worker` });
    }));
});

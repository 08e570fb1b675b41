import { parseRunConfig } from '../src/runConfig';
import { isHeldOut } from '../src/core/heldOut';
import { FrozenLake, isHeldOutMap } from '../src/envs/frozenlake';
import { createEnvironment } from '../src/plugins/registry';
import { modelConfig } from '../src/model/config';
import { initWeights } from '../src/model/weights';
import { evaluatePolicy, evaluationSeeds } from '../src/rl/evaluate';

describe('held-out evaluation', () => {
  const config = parseRunConfig({ env: { name: 'frozenlake', map: 'random', heldOutShare: 0.2 }, agent: { maxTurns: 4, history: 'none' } });

  it('holds out the share of instances whose key hashes below it', () => {
    const keys = Array.from({ length: 2000 }, (_, i) => `task-${i}`);
    expect(keys.filter((key) => isHeldOut(key, 0)).length).toBe(0);
    expect(keys.filter((key) => isHeldOut(key, 1)).length).toBe(keys.length);
    const share = keys.filter((key) => isHeldOut(key, 0.2)).length / keys.length;
    expect(share).toBeGreaterThan(0.17);
    expect(share).toBeLessThan(0.23);
    // A smaller share holds out a subset of a larger one's instances.
    expect(keys.every((key) => !isHeldOut(key, 0.1) || isHeldOut(key, 0.2))).toBe(true);
  });

  it('draws its seeds from a stream of its own, deterministically', () => {
    expect(evaluationSeeds(1, 4)).toEqual(evaluationSeeds(1, 4));
    expect(evaluationSeeds(1, 4)).not.toEqual(evaluationSeeds(2, 4));
    expect(new Set(evaluationSeeds(1, 64)).size).toBe(64);
  });

  it('plays every episode on held-out maps and counts answers and outcomes', async () => {
    const weights = initWeights(modelConfig({ maxContext: 256 }), 3);
    const result = await evaluatePolicy({
      weights,
      env: config.env,
      agent: config.agent,
      envSeeds: evaluationSeeds(1, 6),
      temperature: 1,
      maxTokens: 8,
      maxBatch: 6,
    });
    expect(result.episodes).toBe(6);
    // An untrained policy answers garbage: every episode uses all its turns, none is solved.
    expect(result.meanTurns).toBe(4);
    expect(result.solved).toBe(0);
    expect(result.validAnswerShare).toBeGreaterThanOrEqual(0);
    expect(result.validAnswerShare).toBeLessThan(0.5);
    // The evaluator's environments come from the held-out pool, training's never do.
    for (const seed of evaluationSeeds(1, 6)) {
      expect(isHeldOutMap((createEnvironment(config.env, seed, 'eval') as FrozenLake).grid, 0.2)).toBe(true);
      expect(isHeldOutMap((createEnvironment(config.env, seed, 'train') as FrozenLake).grid, 0.2)).toBe(false);
    }
    // Exploring starts are for training: every evaluation episode starts on S.
    const exploring = parseRunConfig({ env: { name: 'frozenlake', map: 'random', exploringStarts: 1 } }).env;
    const starts = (pool: 'eval' | 'train') => evaluationSeeds(1, 20).map((seed) => (createEnvironment(exploring, seed, pool) as FrozenLake).reset());
    expect(starts('eval').every(({ row, col }) => row === 0 && col === 0)).toBe(true);
    expect(starts('train').some(({ row, col }) => row !== 0 || col !== 0)).toBe(true);
  }, 60_000);
});

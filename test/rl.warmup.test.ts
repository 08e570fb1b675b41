import { parseRunConfig } from '../src/runConfig';
import { FROZENLAKE_SYSTEM_PROMPT, legalMoves, parseAction, renderObservation } from '../src/agents/frozenlakeAgent';
import { decode, describe as describeIds, renderConversationStart, SPECIAL_TOKENS, STOP_TOKENS } from '../src/core/tokenizer';
import { generateMap } from '../src/envs/frozenlake';
import { modelConfig } from '../src/model/config';
import { BatchingEngine } from '../src/model/engine';
import { initWeights, type ModelWeights } from '../src/model/weights';
import { formatWarmupSamples, runFormatWarmup, type WarmupSetup } from '../src/rl/formatWarmup';
import { PolicyTrainer } from '../src/rl/trainer';

/** Runs of consecutive indices where the mask is 1, as [start, end). */
function maskedRuns(lossMask: number[]): [number, number][] {
  const runs: [number, number][] = [];
  lossMask.forEach((m, i) => {
    if (m === 1 && lossMask[i - 1] !== 1) runs.push([i, i]);
    if (m === 1) runs[runs.length - 1][1] = i + 1;
  });
  return runs;
}

/** FrozenLake on random maps, with or without history: the warm-up plays the run's own episodes. */
function frozenLake(history: 'full' | 'none'): WarmupSetup {
  const { env, agent } = parseRunConfig({ env: { name: 'frozenlake', map: 'random' }, agent: { history } });
  return { env, agent };
}

describe('formatWarmupSamples', () => {
  let samples: Awaited<ReturnType<typeof formatWarmupSamples>>;
  beforeAll(async () => {
    samples = await formatWarmupSamples(64, 3, frozenLake('full'));
  });

  it('are conversations whose loss mask covers exactly the answers', () => {
    const answers: string[] = [];
    let multiTurn = 0;
    for (const { ids, lossMask } of samples) {
      expect(ids.slice(0, 2)).toEqual([SPECIAL_TOKENS.bos, SPECIAL_TOKENS.system]);
      const runs = maskedRuns(lossMask);
      if (runs.length > 1) multiTurn++;
      for (const [start, end] of runs) {
        expect(ids[start - 1]).toBe(SPECIAL_TOKENS.assistant);
        expect(ids[end - 1]).toBe(SPECIAL_TOKENS.end);
        answers.push(describeIds(ids.slice(start, end)));
      }
      // Everything else is prompt: no answer text hides outside the mask.
      const unmasked = describeIds(ids.filter((_, i) => lossMask[i] === 0));
      expect(unmasked).not.toMatch(/<\|assistant\|>(left|down|right|up)<\|end\|>/);
      expect(ids.length).toBe(lossMask.length);
    }
    answers.forEach((answer) => expect(answer).toMatch(/^(left|down|right|up)<\|end\|>$/));
    // Random moves: all four appear; some conversations run several turns.
    expect(new Set(answers).size).toBe(4);
    expect(multiTurn).toBeGreaterThan(10);
  });

  it('without history are single turns, one per move of the episode', async () => {
    const turns = await formatWarmupSamples(16, 3, frozenLake('none'));
    expect(turns.length).toBeGreaterThan(16);
    for (const { ids, lossMask } of turns) {
      expect(ids.slice(0, 2)).toEqual([SPECIAL_TOKENS.bos, SPECIAL_TOKENS.system]);
      const runs = maskedRuns(lossMask);
      expect(runs).toHaveLength(1);
      expect(runs[0][1]).toBe(ids.length);
      expect(describeIds(ids.slice(...runs[0]))).toMatch(/^(left|down|right|up)<\|end\|>$/);
    }
  });

  it('answer only legal moves: never into the edge of the map', async () => {
    expect(legalMoves({ grid: [], row: 0, col: 0, size: 4, steps: 0 })).toEqual([1, 2]);
    expect(legalMoves({ grid: [], row: 3, col: 3, size: 4, steps: 0 })).toEqual([0, 3]);
    expect(legalMoves({ grid: [], row: 1, col: 2, size: 4, steps: 0 })).toEqual([0, 1, 2, 3]);
    for (const { ids, lossMask } of await formatWarmupSamples(16, 5, frozenLake('none'))) {
      const start = lossMask.indexOf(1);
      const move = describeIds(ids.slice(start, lossMask.lastIndexOf(1)));
      // The neighbour line of the observation marks the edge with '#'.
      expect(decode(ids.slice(0, start))).not.toContain(`${move} #`);
    }
  });

  it('are a pure function of the seed', async () => {
    expect(await formatWarmupSamples(64, 3, frozenLake('full'))).toEqual(samples);
    expect(await formatWarmupSamples(8, 4, frozenLake('full'))).not.toEqual(samples.slice(0, 8));
  });
});

/** Fraction of 64 first-turn answers, sampled at temperature 1, that parse as an action. */
async function parseRate(weights: ModelWeights): Promise<number> {
  const engine = await BatchingEngine.create({ weights, maxBatch: 64 });
  try {
    const results = await Promise.all(
      Array.from({ length: 64 }, (_, i) => {
        const grid = generateMap(4, 10_000 + i);
        const promptIds = renderConversationStart([
          { role: 'system', content: FROZENLAKE_SYSTEM_PROMPT },
          { role: 'user', content: renderObservation({ grid, row: 0, col: 0, size: 4, steps: 0 }) },
        ]);
        return engine.generate({ promptIds, sampling: { maxTokens: 16, temperature: 1, topP: 1, seed: i, stopTokens: STOP_TOKENS } });
      }),
    );
    return results.filter(({ completionIds }) => parseAction(decode(completionIds)).ok).length / results.length;
  } finally {
    engine.close();
  }
}

describe('runFormatWarmup', () => {
  it('teaches an untrained policy to answer in a parseable format', async () => {
    const trainer = await PolicyTrainer.create({ weights: initWeights(modelConfig(), 11) });
    const before = await parseRate(trainer.snapshot());
    const started = performance.now();
    const { losses } = await runFormatWarmup(trainer, { steps: 80, batchSize: 8, seed: 5, ...frozenLake('full') });
    const warmupMs = performance.now() - started;
    const after = await parseRate(trainer.snapshot());
    trainer.dispose();
    console.log(
      `format warm-up: 80 steps x 8 conversations in ${(warmupMs / 1000).toFixed(1)} s, loss ${losses[0].toFixed(3)} -> ${losses[79].toFixed(3)}; ` +
        `parse rate at temperature 1: ${(100 * before).toFixed(1)}% before, ${(100 * after).toFixed(1)}% after`,
    );
    expect(losses).toHaveLength(80);
    expect(before).toBeLessThan(0.1);
    expect(after).toBeGreaterThan(0.9);
  });
});

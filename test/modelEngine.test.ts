import { setTimeout as sleep } from 'node:timers/promises';
import type { GenerateRequest } from '../src/inference/provider';
import { initBackend } from '../src/model/backend';
import { modelConfig } from '../src/model/config';
import { BatchingEngine, type EngineResult } from '../src/model/engine';
import { disposeTensorWeights, sequenceLogprobs, toTensorWeights } from '../src/model/transformer';
import { initWeights } from '../src/model/weights';

// A short context so that some requests run into it and the cache grows through several chunks.
const config = modelConfig({ maxContext: 200 });
const weights = initWeights(config, 11);
/** Sixteen byte ids as stop tokens: likely enough under random weights for some requests to stop. */
const STOP = Array.from({ length: 16 }, (_, i) => 97 + i);

function prompt(length: number, salt: number): number[] {
  return Array.from({ length }, (_, i) => (i * 31 + salt * 7) % 264);
}

const requests: GenerateRequest[] = [
  [1, 40, 1, 1, []],
  [5, 60, 0.7, 1, STOP],
  [17, 33, 1.3, 0.9, []],
  [33, 60, 1, 0.95, STOP],
  [64, 12, 1, 1, []],
  [65, 50, 0.5, 1, STOP],
  [100, 60, 1, 0.8, []],
  [127, 25, 1, 1, STOP],
  [170, 60, 1, 1, []], // runs into the 200-token context
  [3, 45, 2, 1, STOP],
  [40, 1, 1, 1, []],
  [190, 20, 0.9, 0.99, []], // context again, from a nearly full prompt
].map(([length, maxTokens, temperature, topP, stopTokens], i) => ({
  promptIds: prompt(length as number, i),
  sampling: { maxTokens: maxTokens as number, temperature: temperature as number, topP: topP as number, seed: 1000 + i, stopTokens: stopTokens as number[] },
}));

async function alone(request: GenerateRequest): Promise<EngineResult> {
  const engine = await BatchingEngine.create({ weights, maxBatch: 1 });
  try {
    return await engine.generate(request);
  } finally {
    engine.close();
  }
}

beforeAll(() => initBackend());

describe('BatchingEngine', () => {
  let batched: EngineResult[];
  let occupancy: number;

  beforeAll(async () => {
    const engine = await BatchingEngine.create({ weights, maxBatch: 8 });
    // Staggered arrivals: requests join a batch that is already decoding, and queue once it is full.
    const pending: Promise<EngineResult>[] = [];
    for (const request of requests) {
      pending.push(engine.generate(request));
      await sleep(4);
    }
    batched = await Promise.all(pending);
    const stats = engine.stats();
    occupancy = stats.batchSizeSum / stats.decodeSteps;
    expect(stats.generatedTokens).toBe(batched.reduce((sum, r) => sum + r.completionIds.length, 0));
    engine.close();
  });

  it('batches concurrent requests', () => {
    expect(occupancy).toBeGreaterThan(2);
  });

  it('samples exactly the tokens and logprobs of unbatched decoding', async () => {
    for (const [i, request] of requests.entries()) {
      const solo = await alone(request);
      expect(batched[i].completionIds).toEqual(solo.completionIds);
      expect(batched[i].logprobs).toEqual(solo.logprobs);
      expect(batched[i].finishReason).toBe(solo.finishReason);
    }
  });

  it('stops on stop tokens, maxTokens and the context', () => {
    expect(new Set(batched.map((r) => r.finishReason))).toEqual(new Set(['stop', 'length', 'context']));
    batched.forEach((result, i) => {
      const { promptIds, sampling } = requests[i];
      const n = result.completionIds.length;
      const last = result.completionIds[n - 1];
      expect(result.completionIds.slice(0, -1).some((id) => sampling.stopTokens.includes(id))).toBe(false);
      if (result.finishReason === 'stop') expect(sampling.stopTokens).toContain(last);
      if (result.finishReason === 'length') expect(n).toBe(sampling.maxTokens);
      if (result.finishReason === 'context') expect(promptIds.length + n).toBe(config.maxContext);
      expect(result.policyVersion).toBe(0);
      expect(result.tokenPolicyVersions).toBeUndefined();
    });
  });

  it('records logprobs that a full-sequence recomputation reproduces', () => {
    const tensors = toTensorWeights(weights);
    let maxDiff = 0;
    batched.forEach((result, i) => {
      const { promptIds, sampling } = requests[i];
      const recomputed = sequenceLogprobs(tensors, [...promptIds, ...result.completionIds], sampling.temperature).slice(promptIds.length - 1);
      expect(recomputed.length).toBe(result.logprobs.length);
      result.logprobs.forEach((logprob, t) => (maxDiff = Math.max(maxDiff, Math.abs(logprob - recomputed[t]))));
    });
    disposeTensorWeights(tensors);
    console.log(`max |recorded - recomputed| logprob: ${maxDiff.toExponential(2)}`);
    expect(maxDiff).toBeLessThan(1e-4);
  });

  it('rejects a bad request with a clear error and serves the others unchanged', async () => {
    const engine = await BatchingEngine.create({ weights, maxBatch: 4 });
    const good = requests[1];
    const bad = (change: Partial<GenerateRequest['sampling']>, promptIds = good.promptIds) =>
      engine.generate({ promptIds, sampling: { ...good.sampling, ...change } });
    const outcomes = await Promise.allSettled([
      engine.generate(good),
      bad({}, prompt(config.maxContext, 0)),
      bad({}, [1, 2, 264]),
      bad({}, []),
      bad({ temperature: 0 }),
      bad({ topP: 1.5 }),
      bad({ maxTokens: 0 }),
      bad({ seed: 0.5 }),
      bad({ stopTokens: [-1] }),
      engine.generate(requests[4]),
    ]);
    const reasons = outcomes.slice(1, -1).map((o) => (o.status === 'rejected' ? (o.reason as Error).message : 'resolved'));
    expect(reasons).toEqual([
      'invalid generate request: prompt has 200 tokens; the context holds 200, so at most 199 leave room to generate',
      'invalid generate request: promptIds[2] = 264 is not a token id (vocabulary is 0..263)',
      'invalid generate request: promptIds must be a non-empty array',
      'invalid generate request: temperature must be a finite number > 0 (use e.g. 1e-4 for near-greedy), got 0',
      'invalid generate request: topP must be in (0, 1], got 1.5',
      'invalid generate request: maxTokens must be a positive integer, got 0',
      'invalid generate request: seed must be an integer, got 0.5',
      'invalid generate request: stopTokens must be token ids',
    ]);
    expect(outcomes[0]).toEqual({ status: 'fulfilled', value: expect.objectContaining({ completionIds: batched[1].completionIds }) });
    expect(outcomes[9]).toEqual({ status: 'fulfilled', value: expect.objectContaining({ completionIds: batched[4].completionIds }) });
    engine.close();
  });

  it('switches weights between decode steps and records each token’s version', async () => {
    const engine = await BatchingEngine.create({ weights, maxBatch: 4, policyVersion: 3 });
    const long = { ...requests[0], sampling: { ...requests[0].sampling, maxTokens: 30 } };
    const during = engine.generate(long);
    while (engine.stats().generatedTokens < 10) await sleep(1);
    engine.setWeights(initWeights(config, 12), 4);
    const mixed = await during;
    expect(mixed.policyVersion).toBe(3);
    const versions = mixed.tokenPolicyVersions!;
    const switchAt = versions.indexOf(4);
    expect(switchAt).toBeGreaterThanOrEqual(10);
    expect(versions).toEqual([...Array(switchAt).fill(3), ...Array(30 - switchAt).fill(4)]);
    // Tokens before the switch are the old policy's; after it, they differ from what it would have sampled.
    const old = await alone(long);
    expect(mixed.completionIds.slice(0, switchAt)).toEqual(old.completionIds.slice(0, switchAt));
    expect(mixed.completionIds).not.toEqual(old.completionIds);
    const after = await engine.generate(requests[4]);
    expect(after.policyVersion).toBe(4);
    expect(after.tokenPolicyVersions).toBeUndefined();
    expect(engine.stats().policyVersion).toBe(4);
    expect(() => engine.setWeights(initWeights(modelConfig({ maxContext: 100 }), 1), 5)).toThrow(/weights are for another architecture: maxContext 100 vs 200/);
    engine.close();
  });

  it('rejects queued and running requests on close', async () => {
    const engine = await BatchingEngine.create({ weights, maxBatch: 1 });
    const running = engine.generate(requests[6]);
    const queued = engine.generate(requests[7]);
    await sleep(5);
    engine.close();
    await expect(running).rejects.toThrow('engine is closed');
    await expect(queued).rejects.toThrow('engine is closed');
    await expect(engine.generate(requests[0])).rejects.toThrow('engine is closed');
  });
});

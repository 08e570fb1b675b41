import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Worker } from 'node:worker_threads';
import type { GenerateRequest } from '../src/inference/provider';
import { modelConfig } from '../src/model/config';
import { BatchingEngine } from '../src/model/engine';
import { EmbeddedProvider } from '../src/model/embeddedProvider';
import { initWeights, saveCheckpoint } from '../src/model/weights';

const model = { maxContext: 256 };

function request(seed: number): GenerateRequest {
  const promptIds = Array.from({ length: 20 + seed }, (_, i) => (i * 13 + seed) % 256);
  return { promptIds, sampling: { maxTokens: 24, temperature: 1, topP: 1, seed, stopTokens: [] } };
}

describe('EmbeddedProvider', () => {
  it('serves concurrent requests from its worker thread, batched, exactly as the engine does in-thread', async () => {
    const provider = await EmbeddedProvider.create({ model, seed: 3, maxBatch: 8 });
    const results = await Promise.all(Array.from({ length: 8 }, (_, seed) => provider.generate(request(seed))));
    const stats = await provider.stats();
    await provider.close();

    expect(stats.busyMs).toBeGreaterThan(0);
    expect(stats.batchSizeSum / stats.decodeSteps).toBeGreaterThan(1);
    expect(stats.generatedTokens).toBe(8 * 24);
    expect(stats).toMatchObject({ maxBatchSize: 8, running: 0, waiting: 0, policyVersion: 0 });

    const engine = await BatchingEngine.create({ weights: initWeights(modelConfig(model), 3) });
    for (const [seed, result] of results.entries()) {
      expect(result.finishReason).toBe('length');
      expect(result).toEqual({ ...(await engine.generate(request(seed))), queueMs: result.queueMs, decodeMs: result.decodeMs });
    }
    engine.close();
  });

  it('rejects a bad request without losing the thread, and stops the thread on close', async () => {
    const provider = await EmbeddedProvider.create({ model, seed: 1, maxBatch: 4 });
    await expect(provider.generate({ ...request(0), promptIds: [999] })).rejects.toThrow('promptIds[0] = 999 is not a token id');
    expect((await provider.generate(request(1))).completionIds).toHaveLength(24);
    const inFlight = expect(provider.generate(request(2))).rejects.toThrow('EmbeddedProvider is closed');
    await provider.close();
    await inFlight;
    await expect(provider.stats()).rejects.toThrow('EmbeddedProvider is closed');
    // Node reports threadId -1 once a worker has exited.
    expect((provider as unknown as { worker: Worker }).worker.threadId).toBe(-1);
  });

  it('starts from a checkpoint and takes new weights', async () => {
    const file = path.join(mkdtempSync(path.join(os.tmpdir(), 'trajflow-provider-')), 'policy.ckpt');
    const config = modelConfig(model);
    await saveCheckpoint(file, { weights: initWeights(config, 5), policyVersion: 7 });
    const provider = await EmbeddedProvider.create({ model, checkpoint: file });
    expect((await provider.generate(request(0))).policyVersion).toBe(7);
    await provider.setWeights(initWeights(config, 6), 8);
    expect((await provider.generate(request(0))).policyVersion).toBe(8);
    await provider.close();

    await expect(EmbeddedProvider.create({ model: { maxContext: 128 }, checkpoint: file })).rejects.toThrow(
      `checkpoint ${file} is for another architecture than configured (maxContext 256 vs 128)`,
    );
    await expect(EmbeddedProvider.create({ checkpoint: `${file}.missing` })).rejects.toThrow(/checkpoint .*missing: cannot read/);
  });
});

/**
 * Measures what one decode step of the embedded BatchingEngine (src/model/engine.ts) costs at a
 * few batch sizes, and fits cost(b) = fixedMs + perSequenceMs x b by least squares: the time model
 * the continuous-batching stand-in follows. Short runs on fresh, seeded weights; only the batched
 * decode steps are timed, from the engine's own counters.
 */
import os from 'node:os';
import { modelConfig } from '../../src/model/config';
import { BatchingEngine } from '../../src/model/engine';
import { initWeights } from '../../src/model/weights';
import type { DecodeCost } from './batchingStandIn';

export interface EngineCostSample {
  batch: number;
  msPerStep: number;
}

export interface EngineCostFit extends DecodeCost {
  samples: EngineCostSample[];
  /** Prompt tokens of every measured request (decode steps attend over them). */
  promptLength: number;
  /** The machine's 1-minute load average when the measurement ended. */
  loadAverage: number;
}

export interface EngineCostOptions {
  batchSizes: readonly number[];
  promptLength: number;
  newTokens: number;
  /** Timed runs per batch size; the fastest one counts (the others lost time to other work on the machine). */
  repeats: number;
}

export async function measureEngineCost({ batchSizes, promptLength, newTokens, repeats }: EngineCostOptions): Promise<EngineCostFit> {
  const engine = await BatchingEngine.create({ weights: initWeights(modelConfig(), 0), maxBatch: Math.max(...batchSizes) });
  try {
    // Warm-up: the wasm kernels compile on first use.
    await decodeMsPerStep(engine, Math.max(...batchSizes), promptLength, 4);
    // Repeats interleave the batch sizes, so a burst of other work on a shared machine slows one
    // repeat of each rather than every repeat of one; the fastest repeat counts.
    const fastest = new Map<number, number>();
    for (let r = 0; r < repeats; r++) {
      for (const batch of batchSizes) {
        const ms = await decodeMsPerStep(engine, batch, promptLength, newTokens);
        fastest.set(batch, Math.min(ms, fastest.get(batch) ?? Infinity));
      }
    }
    const samples = batchSizes.map((batch) => ({ batch, msPerStep: fastest.get(batch)! }));
    return { ...fitLine(samples), samples, promptLength, loadAverage: os.loadavg()[0] };
  } finally {
    engine.close();
  }
}

/** `batch` requests at once, each decoding `newTokens` tokens with no stop token. */
async function decodeMsPerStep(engine: BatchingEngine, batch: number, promptLength: number, newTokens: number): Promise<number> {
  const before = engine.stats();
  await Promise.all(
    Array.from({ length: batch }, (_, i) =>
      engine.generate({
        promptIds: Array.from({ length: promptLength }, (_, t) => (t * 7 + i) % 256),
        sampling: { maxTokens: newTokens, temperature: 1, topP: 1, seed: i, stopTokens: [] },
      }),
    ),
  );
  const after = engine.stats();
  return (after.decodeMs - before.decodeMs) / (after.decodeSteps - before.decodeSteps);
}

/** Least-squares line through the samples; a negative intercept or slope is clamped to 0. */
export function fitLine(samples: readonly EngineCostSample[]): DecodeCost {
  const n = samples.length;
  const meanB = samples.reduce((s, x) => s + x.batch, 0) / n;
  const meanMs = samples.reduce((s, x) => s + x.msPerStep, 0) / n;
  const sxx = samples.reduce((s, x) => s + (x.batch - meanB) ** 2, 0);
  const sxy = samples.reduce((s, x) => s + (x.batch - meanB) * (x.msPerStep - meanMs), 0);
  const perSequenceMs = Math.max(0, sxx > 0 ? sxy / sxx : 0);
  return { fixedMs: Math.max(0, meanMs - perSequenceMs * meanB), perSequenceMs };
}

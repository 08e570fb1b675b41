/**
 * Decode throughput of the BatchingEngine with one sequence vs a full batch, side by side in one
 * process: what continuous batching buys on CPU. Every request has the same prompt length and
 * generates exactly `newTokens` tokens (no stop tokens).
 *
 * Decode tokens/s counts only the batched decode steps (tokens they sample / time in them); the
 * prefill, which also samples each request's first token, is reported separately, and so is the
 * end-to-end rate (all completion tokens / wall time).
 *
 *   npx tsc -p tsconfig.json && node dist/bench/engine.js [--repeats N]
 *
 * (--repeats: runs per setting, alternating, default 3; more steadies the medians on a noisy machine)
 */
import { modelConfig } from '../src/model/config';
import { BatchingEngine } from '../src/model/engine';
import { initWeights } from '../src/model/weights';

export interface EngineBenchOptions {
  promptLength?: number;
  newTokens?: number;
  /** Concurrent requests in the batched run (the engine's maxBatch). */
  batch?: number;
  /** Runs per setting, alternating; each figure is the median. */
  repeats?: number;
  seed?: number;
}

export interface RunRates {
  decodeTokensPerSec: number;
  prefillTokensPerSec: number;
  endToEndTokensPerSec: number;
  meanBatchSize: number;
}

export interface EngineBenchResult {
  batch1TokensPerSec: number;
  batch32TokensPerSec: number;
  /** batch32TokensPerSec / batch1TokensPerSec. */
  ratio: number;
  batch1: RunRates;
  batched: RunRates;
  options: Required<EngineBenchOptions>;
}

export async function benchmarkEngine(options: EngineBenchOptions = {}): Promise<EngineBenchResult> {
  const opts: Required<EngineBenchOptions> = { promptLength: 200, newTokens: 64, batch: 32, repeats: 3, seed: 0, ...options };
  const engine = await BatchingEngine.create({ weights: initWeights(modelConfig(), opts.seed), maxBatch: opts.batch });
  try {
    // Warm-up at both sizes, full length: until V8 has optimised the decode loop a batch-1 step
    // costs several times its warm figure, which would flatter the ratio.
    await run(engine, 1, opts);
    await run(engine, opts.batch, opts);
    const single: RunRates[] = [];
    const batched: RunRates[] = [];
    for (let r = 0; r < opts.repeats; r++) {
      single.push(await run(engine, 1, opts));
      batched.push(await run(engine, opts.batch, opts));
    }
    const batch1 = medianRates(single);
    const full = medianRates(batched);
    return {
      batch1TokensPerSec: batch1.decodeTokensPerSec,
      batch32TokensPerSec: full.decodeTokensPerSec,
      ratio: full.decodeTokensPerSec / batch1.decodeTokensPerSec,
      batch1,
      batched: full,
      options: opts,
    };
  } finally {
    engine.close();
  }
}

/** `concurrency` requests submitted at once; rates from the engine's own time accounting. */
async function run(engine: BatchingEngine, concurrency: number, { promptLength, newTokens }: Required<EngineBenchOptions>): Promise<RunRates> {
  const before = engine.stats();
  const started = performance.now();
  const results = await Promise.all(
    Array.from({ length: concurrency }, (_, i) =>
      engine.generate({
        promptIds: Array.from({ length: promptLength }, (_, t) => (t * 7 + i) % 256),
        sampling: { maxTokens: newTokens, temperature: 1, topP: 1, seed: i, stopTokens: [] },
      }),
    ),
  );
  const wallMs = performance.now() - started;
  const after = engine.stats();
  const perSec = (count: number, ms: number) => (1000 * count) / ms;
  const steps = after.decodeSteps - before.decodeSteps;
  return {
    decodeTokensPerSec: perSec(after.decodeTokens - before.decodeTokens, after.decodeMs - before.decodeMs),
    prefillTokensPerSec: perSec(after.prefillTokens - before.prefillTokens, after.prefillMs - before.prefillMs),
    endToEndTokensPerSec: perSec(
      results.reduce((sum, r) => sum + r.completionIds.length, 0),
      wallMs,
    ),
    meanBatchSize: (after.batchSizeSum - before.batchSizeSum) / steps,
  };
}

function medianRates(runs: RunRates[]): RunRates {
  const median = (pick: (r: RunRates) => number) => {
    const sorted = runs.map(pick).sort((a, b) => a - b);
    return sorted[Math.floor(sorted.length / 2)];
  };
  return {
    decodeTokensPerSec: median((r) => r.decodeTokensPerSec),
    prefillTokensPerSec: median((r) => r.prefillTokensPerSec),
    endToEndTokensPerSec: median((r) => r.endToEndTokensPerSec),
    meanBatchSize: median((r) => r.meanBatchSize),
  };
}

/** `--repeats N` from the command line, if given. */
function repeatsFlag(args: readonly string[]): number | undefined {
  const at = args.indexOf('--repeats');
  if (at < 0) return undefined;
  const repeats = Number(args[at + 1]);
  if (!Number.isSafeInteger(repeats) || repeats < 1) throw new Error(`--repeats: ${JSON.stringify(args[at + 1])} is not a positive integer`);
  return repeats;
}

if (require.main === module) {
  Promise.resolve()
    .then(() => repeatsFlag(process.argv.slice(2)))
    .then((repeats) => benchmarkEngine(repeats === undefined ? {} : { repeats }))
    .then(
      ({ batch1, batched, ratio, options }) => {
        const row = (label: string, r: RunRates) =>
          `${label.padEnd(10)} decode ${r.decodeTokensPerSec.toFixed(0).padStart(6)} tok/s   prefill ${r.prefillTokensPerSec.toFixed(0).padStart(6)} tok/s   end-to-end ${r.endToEndTokensPerSec.toFixed(0).padStart(6)} tok/s   mean batch ${r.meanBatchSize.toFixed(1)}`;
        console.log(`prompt ${options.promptLength} tokens, ${options.newTokens} new tokens each, median of ${options.repeats}`);
        console.log(row('batch 1', batch1));
        console.log(row(`batch ${options.batch}`, batched));
        console.log(`decode speed-up: ${ratio.toFixed(1)}x`);
      },
      (err) => {
        console.error(err instanceof Error ? err.message : err);
        process.exitCode = 1;
      },
    );
}

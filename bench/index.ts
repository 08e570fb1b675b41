/**
 * `npm run bench`: the rollout-stack benchmarks, each measured side by side in one run (these
 * machines are noisy, so only ratios within a run mean anything).
 *   1. decode tokens/s of the batching engine at batch 1 and batch 32, and their ratio;
 *   2. Temporal's orchestration overhead per activity with a zero-latency model stand-in, beside
 *      the same loop run in-process without Temporal: per activity type, and overall as each
 *      activity's latency less the in-process median of its type (its own work, store writes
 *      included).
 */
import { benchmarkEngine } from './engine';
import { benchmarkOrchestration } from './orchestration';

/** `--quick`: tiny sizes that only show every part still runs (the test suite's smoke run). */
const QUICK = process.argv.includes('--quick');

async function main(): Promise<void> {
  const engine = await benchmarkEngine(QUICK ? { promptLength: 16, newTokens: 4, batch: 4, repeats: 1 } : {});
  const batch = engine.options.batch;
  console.log('batching engine (embedded model, decode only)');
  console.log(`  batch  1: ${engine.batch1TokensPerSec.toFixed(0)} tokens/s`);
  console.log(`  batch ${String(batch).padStart(2)}: ${engine.batched.decodeTokensPerSec.toFixed(0)} tokens/s`);
  console.log(`  ratio:    ${engine.ratio.toFixed(2)}x${batch === 32 ? ' (target >= 8x)' : ''}`);

  const o = QUICK ? await benchmarkOrchestration(1, 2) : await benchmarkOrchestration();
  console.log(`orchestration overhead per activity (${o.activities} activities, one trajectory at a time)`);
  console.log(`  through Temporal: median ${o.temporalMedianMs.toFixed(2)} ms, p99 ${o.temporalP99Ms.toFixed(2)} ms`);
  console.log(`  in-process:       median ${o.inProcessMedianMs.toFixed(3)} ms, p99 ${o.inProcessP99Ms.toFixed(3)} ms`);
  console.log('  by activity type:   count  Temporal median (dispatch)  in-process median');
  for (const t of o.byType) {
    console.log(
      `    ${t.type.padEnd(17)} ${String(t.count).padStart(5)}  ${t.temporalMedianMs.toFixed(2).padStart(8)} ms (${t.dispatchMedianMs.toFixed(2)} ms)  ${t.inProcessMedianMs.toFixed(3).padStart(10)} ms`,
    );
  }
  console.log(
    `  overhead:         median ${o.overheadMedianMs.toFixed(2)} ms, p99 ${o.overheadP99Ms.toFixed(2)} ms per activity (each less its type's in-process median; target <= 5 ms median)`,
  );
  const bare = o.bareSdk;
  console.log(
    `  bare SDK floor:   median ${bare.medianMs.toFixed(2)} ms (dispatch ${bare.dispatchMedianMs.toFixed(2)} ms), p99 ${bare.p99Ms.toFixed(2)} ms per no-op activity (${bare.activities} in one workflow, same server)`,
  );
  console.log(
    `  episode wall:     ${o.temporalEpisodeMs.toFixed(1)} ms vs ${o.inProcessEpisodeMs.toFixed(2)} ms in-process, ratio ${(o.temporalEpisodeMs / o.inProcessEpisodeMs).toFixed(1)}x`,
  );
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});

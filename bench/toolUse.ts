/**
 * How a run learned to use its tool, per policy version: of the episodes it sampled with that
 * version, the share that called a tool and got its result (a `tool` message that is no error),
 * and the share that solved the task; and the held-out solve rate where the version was evaluated
 * (train/eval.jsonl), with the run's time when that evaluation ended. Reads a run's store, so it works on a finished or running run.
 *
 *   npm run bench:tool-use -- --data-dir .trajflow --run <run id>
 */
import { parseArgs } from 'node:util';
import { readJsonLines } from '../src/store/jsonLines';
import { runLayout } from '../src/store/runLayout';
import { percentCell, toolUseByVersion } from './toolUseByVersion';

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { 'data-dir': { type: 'string', default: '.trajflow' }, run: { type: 'string' } } });
  const runId = values.run;
  if (!runId) throw new Error('--run <run id> is required');
  const rows = await toolUseByVersion(values['data-dir']!, runId);
  const heldOut = await heldOutByVersion(runLayout(values['data-dir']!, runId).evaluationsFile);
  console.log(`run ${runId}: sampled episodes by the policy version they started with`);
  console.log('  version  episodes  tool ok   solved   held-out');
  for (const [version, row] of rows) {
    const evaluated = heldOut.get(version);
    console.log(
      `  ${String(version).padStart(7)}  ${String(row.episodes).padStart(8)}  ${percentCell(row.toolResults, row.episodes)} ${percentCell(row.solved, row.episodes)}   ${evaluated === undefined ? '' : `${percentCell(evaluated.successRate, 1).trim()} at ${Math.round(evaluated.elapsedS)} s`}`,
    );
  }
}

/** The held-out solve rate of each evaluated version, from the run's evaluations (none for a rollout). */
async function heldOutByVersion(file: string): Promise<Map<number, { successRate: number; elapsedS: number }>> {
  const evaluations = await readJsonLines<{ version: number; successRate: number; elapsedS: number }>(file, (e) => e.version);
  return new Map(evaluations.map((e) => [e.version, e]));
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});

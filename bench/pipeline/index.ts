/**
 * `npm run bench:pipeline`: trajflow's asynchronous streaming pipeline (Temporal, eta = 0, 1, 2)
 * against a synchronous baseline made of the same parts, and against the same streaming loop
 * in-process, on one heavy-tailed agentic workload, in one invocation. The model, environment and
 * trainer are bench-only stand-ins (see each file); the model's step time follows the embedded
 * engine as measured at start. Run `npm run build` first.
 */
import { benchmarkPipeline } from './benchmark';
import { FlagError, parseFlags, USAGE } from './flags';
import { resolveOptions } from './options';
import { formatReport } from './report';

export { benchmarkPipeline, type PipelineBenchResult } from './benchmark';
export type { PipelineBenchOptions } from './options';

async function main(): Promise<void> {
  let flags;
  try {
    flags = parseFlags(process.argv.slice(2));
    resolveOptions(flags);
  } catch (err) {
    console.error(`${(err as Error).message}\n${USAGE}`);
    process.exitCode = 2;
    return;
  }
  if (flags.help) {
    console.log(USAGE);
    return;
  }
  const started = Date.now();
  const result = await benchmarkPipeline({ ...flags, log: (line) => console.error(`[${((Date.now() - started) / 1000).toFixed(0).padStart(4)} s] ${line}`) });
  console.log(formatReport(result));
}

if (require.main === module) {
  main().then(
    // Temporal's native connections can keep the event loop alive after shutdown.
    () => process.exit(),
    (err) => {
      console.error(err instanceof FlagError ? err.message : err);
      process.exit(1);
    },
  );
}

/** `npm run bench:pipeline` flags: parsed with node's parseArgs, every value checked with a clear error. */
import { parseArgs } from 'node:util';
import type { PipelineBenchOptions } from './options';

/** Flag name -> option it sets (numbers only; --quick is the one switch). */
const NUMBER_FLAGS = {
  steps: 'steps',
  rounds: 'rounds',
  'group-size': 'groupSize',
  'batch-groups': 'batchGroups',
  'max-concurrency': 'maxConcurrency',
  'max-turns': 'maxTurns',
  'max-tokens': 'maxTokens',
  'max-batch': 'maxBatch',
  'env-median-ms': 'envMedianMs',
  'p99-over-p50': 'p99OverP50',
  'trainer-ms-per-token': 'trainerMsPerToken',
  'slow-trainer-ms-per-token': 'slowTrainerMsPerToken',
  'fixed-model-ms': 'fixedModelLatencyMs',
  seed: 'seed',
} as const satisfies Record<string, keyof PipelineBenchOptions>;

export const USAGE = `usage: npm run bench:pipeline -- [--quick] [--only KEY,...] [--env-sessions env-worker|local] [--inference-calls inference-worker|local] ${Object.keys(
  NUMBER_FLAGS,
)
  .map((flag) => `[--${flag} N]`)
  .join(' ')}`;

export class FlagError extends Error {}

export function parseFlags(argv: readonly string[]): Partial<PipelineBenchOptions> & { help?: boolean } {
  let parsed;
  try {
    parsed = parseArgs({
      args: [...argv],
      options: {
        quick: { type: 'boolean' },
        only: { type: 'string' },
        'env-sessions': { type: 'string' },
        'inference-calls': { type: 'string' },
        help: { type: 'boolean', short: 'h' },
        ...Object.fromEntries(Object.keys(NUMBER_FLAGS).map((flag) => [flag, { type: 'string' as const }])),
      },
      strict: true,
      allowPositionals: false,
    });
  } catch (err) {
    throw new FlagError((err as Error).message);
  }
  const options: Partial<PipelineBenchOptions> & { help?: boolean } = {};
  if (parsed.values.help) options.help = true;
  if (parsed.values.quick) options.quick = true;
  // Checked against the configurations' keys with the other options (options.ts).
  if (parsed.values.only !== undefined)
    options.only = parsed.values.only
      .split(',')
      .map((key) => key.trim())
      .filter((key) => key !== '');
  const sessions = parsed.values['env-sessions'];
  if (sessions !== undefined) {
    if (sessions !== 'env-worker' && sessions !== 'local') throw new FlagError(`--env-sessions must be env-worker or local, got ${JSON.stringify(sessions)}`);
    options.envSessions = sessions;
  }
  const calls = parsed.values['inference-calls'];
  if (calls !== undefined) {
    if (calls !== 'inference-worker' && calls !== 'local')
      throw new FlagError(`--inference-calls must be inference-worker or local, got ${JSON.stringify(calls)}`);
    options.inferenceCalls = calls;
  }
  for (const [flag, key] of Object.entries(NUMBER_FLAGS)) {
    const text = (parsed.values as Record<string, unknown>)[flag];
    if (typeof text !== 'string') continue;
    const value = Number(text);
    if (text.trim() === '' || !Number.isFinite(value)) throw new FlagError(`--${flag} must be a number, got ${JSON.stringify(text)}`);
    options[key] = value;
  }
  return options;
}

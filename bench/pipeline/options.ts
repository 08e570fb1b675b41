/**
 * The bench's workload and sizes: defaults, the --quick sizes, and validation (the same checks for
 * CLI flags and for callers of benchmarkPipeline, with messages that name the option).
 */

import type { InferenceConfig } from '../../config/schema';
import { CONFIGURATIONS } from './configurations';

export interface PipelineBenchOptions {
  /** Train steps per run. */
  steps: number;
  /** Times every configuration runs; configurations alternate within a round. */
  rounds: number;
  groupSize: number;
  /** Groups per train step. */
  batchGroups: number;
  /** Trajectories in flight in the streaming runs (the synchronous baseline runs one batch at a time). */
  maxConcurrency: number;
  /** Longest episode, in turns (each episode draws its length in 1..maxTurns). */
  maxTurns: number;
  /** Longest completion; each draws its length in maxTokens/4..maxTokens. */
  maxTokens: number;
  /** The batching model stand-in's largest decode batch. */
  maxBatch: number;
  envMedianMs: number;
  /** Where episode sessions live (config env.sessions): on env workers, or local activities of the workflow worker. */
  envSessions: 'env-worker' | 'local';
  /** Where generate runs (config inference.calls): on the inference queue, or local activities of the workflow worker. */
  inferenceCalls: InferenceConfig['calls'];
  /** The environment's step latency p99 / p50 (lognormal). */
  p99OverP50: number;
  /** Trainer time per trained token in every run but the trainer-bound one (fast: rollout-bound). */
  trainerMsPerToken: number;
  /** Trainer time per trained token in the trainer-bound run. */
  slowTrainerMsPerToken: number;
  /** The fixed-latency model stand-in's time per generate (Temporal vs in-process). */
  fixedModelLatencyMs: number;
  seed: number;
  quick: boolean;
  /**
   * Keys of the configurations to run (default: all), e.g. one configuration on two builds for an
   * A/B; targets and ratios that need a configuration left out are not reported.
   */
  only?: string[];
  /** A running Temporal server to use instead of starting a dev server (the smoke test's). */
  temporalAddress?: string;
  /** Where runs write; default: a fresh temporary folder, removed at the end. */
  dataDir?: string;
  /** Progress lines (default: none). */
  log: (line: string) => void;
}

export const DEFAULT_OPTIONS: PipelineBenchOptions = {
  steps: 12,
  rounds: 2,
  groupSize: 8,
  batchGroups: 2,
  // Five batches of 16: room for every batch eta = 4 lets overlap.
  maxConcurrency: 80,
  maxTurns: 5,
  maxTokens: 128,
  maxBatch: 32,
  envMedianMs: 50,
  envSessions: 'local',
  inferenceCalls: 'local',
  p99OverP50: 20,
  trainerMsPerToken: 0.02,
  slowTrainerMsPerToken: 1.2,
  fixedModelLatencyMs: 100,
  seed: 1,
  quick: false,
  log: () => undefined,
};

/** --quick: a tiny run of every configuration (the smoke test's), same workload shape. */
export const QUICK_SIZES: Partial<PipelineBenchOptions> = {
  steps: 2,
  rounds: 1,
  groupSize: 4,
  batchGroups: 2,
  maxConcurrency: 16,
  maxTurns: 4,
  maxTokens: 16,
  envMedianMs: 10,
};

/**
 * The embedded model's context (its config's default), which the measured engine is held to; and
 * about what a turn adds to the context besides its completion (chat template and observation).
 */
export const MAX_CONTEXT = 1024;
export const TEMPLATE_TOKENS_PER_TURN = 24;

const INTEGER_OPTIONS = ['steps', 'rounds', 'groupSize', 'batchGroups', 'maxConcurrency', 'maxTurns', 'maxTokens', 'maxBatch', 'seed'] as const;
const NUMBER_OPTIONS = ['envMedianMs', 'p99OverP50', 'trainerMsPerToken', 'slowTrainerMsPerToken', 'fixedModelLatencyMs'] as const;

/** Defaults, then the quick sizes if asked, then what the caller set; throws on the first bad value. */
export function resolveOptions(given: Partial<PipelineBenchOptions> = {}): PipelineBenchOptions {
  const options: PipelineBenchOptions = { ...DEFAULT_OPTIONS, ...(given.quick ? QUICK_SIZES : {}), ...stripUndefined(given) };
  const problems = optionProblems(options);
  if (problems.length > 0) throw new Error(`invalid pipeline bench options: ${problems.join('; ')}`);
  return options;
}

function stripUndefined<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}

export function optionProblems(options: PipelineBenchOptions): string[] {
  const problems: string[] = [];
  for (const key of INTEGER_OPTIONS) {
    const value = options[key];
    const least = key === 'seed' ? 0 : 1;
    if (!Number.isSafeInteger(value) || value < least) problems.push(`${key} must be an integer >= ${least}, got ${value}`);
  }
  for (const key of NUMBER_OPTIONS) {
    const value = options[key];
    if (!Number.isFinite(value) || value < 0) problems.push(`${key} must be a number >= 0, got ${value}`);
  }
  if (options.envSessions !== 'env-worker' && options.envSessions !== 'local')
    problems.push(`envSessions must be env-worker or local, got ${options.envSessions}`);
  if (options.inferenceCalls !== 'inference-worker' && options.inferenceCalls !== 'local')
    problems.push(`inferenceCalls must be inference-worker or local, got ${options.inferenceCalls}`);
  if (options.only !== undefined) {
    const keys = CONFIGURATIONS.map((spec) => spec.key);
    const unknown = options.only.filter((key) => !keys.includes(key));
    if (options.only.length === 0) problems.push(`only must name at least one configuration (${keys.join(', ')})`);
    if (unknown.length > 0)
      problems.push(`only names no configuration ${unknown.map((key) => JSON.stringify(key)).join(', ')}; configurations: ${keys.join(', ')}`);
  }
  if (options.steps < 2) problems.push(`steps must be >= 2 (utilization is measured between the first and the last step), got ${options.steps}`);
  if (options.p99OverP50 < 1) problems.push(`p99OverP50 must be >= 1, got ${options.p99OverP50}`);
  if (options.groupSize < 2) problems.push(`groupSize must be >= 2 (a group compares its trajectories), got ${options.groupSize}`);
  const batch = options.groupSize * options.batchGroups;
  if (options.maxConcurrency > 500) problems.push(`maxConcurrency must be <= 500 (the rollout config's limit), got ${options.maxConcurrency}`);
  if (batch > 500) problems.push(`groupSize x batchGroups must be <= 500 (the synchronous baseline runs a whole batch at once), got ${batch}`);
  // Episodes keep their whole history in context: the longest must fit the embedded model's context.
  if (options.maxTurns * (options.maxTokens + TEMPLATE_TOKENS_PER_TURN) > MAX_CONTEXT) {
    problems.push(
      `maxTurns x maxTokens is too large for the ${MAX_CONTEXT}-token context (about ${TEMPLATE_TOKENS_PER_TURN} more tokens per turn are template and observation)`,
    );
  }
  if (options.maxBatch > 256) problems.push(`maxBatch must be <= 256, got ${options.maxBatch}`);
  return problems;
}

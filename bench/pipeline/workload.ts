/** The run config of one bench run: the stand-in environment and agent, sizes from the options. */
import type { RunConfig } from '../../config/schema';
import { parseRunConfig } from '../../src/runConfig';
import type { RunSpec } from './configurations';
import { ANY_ANSWER_AGENT, LATENCY_ENV } from './latencyEnvironment';
import { MAX_CONTEXT, TEMPLATE_TOKENS_PER_TURN, type PipelineBenchOptions } from './options';

/** The first turn's prompt: system prompt and first observation in the chat template. */
const OPENING_PROMPT_TOKENS = 30;

export interface BenchPlace {
  dataDir: string;
  temporalAddress: string;
  taskQueuePrefix: string;
}

export function batchTrajectories(options: PipelineBenchOptions): number {
  return options.groupSize * options.batchGroups;
}

export function runConfigFor(options: PipelineBenchOptions, place: BenchPlace, spec: RunSpec): RunConfig {
  // The synchronous baseline samples one whole batch at a time.
  const maxConcurrency = spec.pipeline === 'temporal-synchronous' ? batchTrajectories(options) : options.maxConcurrency;
  return parseRunConfig(
    {
      dataDir: place.dataDir,
      run: { name: 'bench-pipeline', seed: options.seed },
      temporal: { address: place.temporalAddress, taskQueuePrefix: place.taskQueuePrefix },
      model: { maxContext: MAX_CONTEXT },
      inference: { maxBatch: options.maxBatch, calls: spec.inferenceCalls ?? options.inferenceCalls },
      sampling: { maxTokens: options.maxTokens },
      env: { name: LATENCY_ENV, sessions: options.envSessions, medianMs: options.envMedianMs, p99OverP50: options.p99OverP50, maxSteps: options.maxTurns },
      agent: { name: ANY_ANSWER_AGENT, maxTurns: options.maxTurns },
      rollout: { groups: options.steps * options.batchGroups, groupSize: options.groupSize, maxConcurrency },
      trainer: { steps: options.steps, batchGroups: options.batchGroups, maxStaleness: spec.maxStaleness, weightSync: 'turn' },
      eval: { everySteps: 0 },
    },
    `pipeline bench config (${spec.key})`,
  );
}

/**
 * About how many tokens of context a decode step of this workload attends over, on average: the
 * engine's step cost grows with it, so the engine is measured at this prompt length. Episodes last
 * L ~ uniform 1..maxTurns turns and keep their history; turn t sees t earlier turns (completion
 * plus template and observation) and the opening prompt, and decodes half its completion on average.
 */
export function meanDecodeContext(options: PipelineBenchOptions): number {
  const lengths = Array.from({ length: options.maxTurns }, (_, i) => i + 1);
  const meanLength = lengths.reduce((a, l) => a + l, 0) / lengths.length;
  // Mean earlier turns over all turns played: E[L(L-1)/2] / E[L].
  const meanEarlierTurns = lengths.reduce((a, l) => a + (l * (l - 1)) / 2, 0) / lengths.length / meanLength;
  const meanCompletion = (Math.ceil(options.maxTokens / 4) + options.maxTokens) / 2;
  return Math.round(OPENING_PROMPT_TOKENS + meanEarlierTurns * (meanCompletion + TEMPLATE_TOKENS_PER_TURN) + meanCompletion / 2);
}

/**
 * Evaluation activities: `evaluate` plays a published version on held-out environment instances
 * and records the result once (train/eval-vNNNNNN.json marks it done; a retry returns it). The
 * embedded model is evaluated by the trainer worker on an engine of its own; a real model by an
 * inference worker (task queue `<prefix>-inference`), through the inference servers, which are
 * brought to the run's evaluated version first (or stay on a newer one of the run that rollouts
 * already use: the record says which versions sampled), under the same lease as the run's turns.
 */
import type { AgentConfig, EnvConfig, EvalConfig } from '../config/schema';
import type { ChatFormat } from '../src/chat/format';
import type { Compatibility, ROLE_PARTS } from '../src/core/compatibility';
import type { InferenceProvider } from '../src/inference/provider';
import type { Logger } from '../src/log';
import { evaluationSeeds, playEvaluation, type EvaluationResult } from '../src/rl/evaluate';
import { readJson, writeJsonAtomically } from '../src/store/files';
import { appendJsonLine } from '../src/store/jsonLines';
import { runLayout } from '../src/store/runLayout';
import { refuseIfIncompatible } from './compatibility';
import type { ServedWeights } from './servedWeights';
import { withHeartbeat } from './heartbeat';

export interface EvaluateInput {
  runId: string;
  runSeed: number;
  version: number;
  env: EnvConfig;
  agent: AgentConfig;
  maxTokens: number;
  eval: EvalConfig;
  runStartedAt?: number;
  /** The run's code and config; a worker that differs refuses the task. */
  compatibility?: Compatibility;
}

/** One evaluation, a line of eval.jsonl. */
export interface EvaluationRecord extends EvaluationResult {
  version: number;
  wallMs: number;
  /** Seconds from the start of the run to the end of this evaluation. */
  elapsedS?: number;
}

export interface EvaluationRecorder {
  role: keyof typeof ROLE_PARTS;
  compatibility: Compatibility;
  dataDir: string;
  logger: Logger;
}

/** Runs `play` for `input.version` unless its evaluation is recorded already; records it once. */
export async function evaluateOnce(
  { role, compatibility, dataDir, logger }: EvaluationRecorder,
  input: EvaluateInput,
  play: () => Promise<EvaluationResult>,
): Promise<EvaluationRecord> {
  const { runId, version } = input;
  refuseIfIncompatible(role, runId, input.compatibility, compatibility, logger);
  const run = runLayout(dataDir, runId);
  const resultFile = run.evaluationFile(version);
  const done = await readJson<EvaluationRecord>(resultFile);
  if (done) return done;
  const startedAt = Date.now();
  const result = await withHeartbeat(play);
  const endedAt = Date.now();
  const record: EvaluationRecord = {
    version,
    ...result,
    wallMs: endedAt - startedAt,
    ...(input.runStartedAt === undefined ? {} : { elapsedS: (endedAt - input.runStartedAt) / 1000 }),
  };
  await appendJsonLine(run.evaluationsFile, record);
  await writeJsonAtomically(resultFile, record);
  logger.info({ runId, version, successRate: record.successRate, validAnswerShare: record.validAnswerShare, wallMs: record.wallMs }, 'evaluation done');
  return record;
}

export interface ServerEvaluationDeps extends Omit<EvaluationRecorder, 'role'> {
  provider: InferenceProvider;
  chat: ChatFormat;
  /** The run weights the provider serves, shared with the process's inference activities. */
  weights: ServedWeights;
  maxContext: number;
}

/** A real model's evaluation through the inference servers (served by inference workers). */
export function createServerEvaluationActivities(deps: ServerEvaluationDeps) {
  const { provider, chat, weights, maxContext } = deps;
  return {
    evaluate: (input: EvaluateInput) =>
      evaluateOnce({ ...deps, role: 'inference' }, input, () =>
        weights.with({ runId: input.runId, minVersion: input.version, followLatest: false }, () =>
          playEvaluation(provider, chat, maxContext, {
            env: input.env,
            agent: input.agent,
            envSeeds: evaluationSeeds(input.runSeed, input.eval.episodes),
            temperature: input.eval.temperature,
            maxTokens: input.maxTokens,
          }),
        ),
      ),
  };
}

export type EvaluationActivities = ReturnType<typeof createServerEvaluationActivities>;

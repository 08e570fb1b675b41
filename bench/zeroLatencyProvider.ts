/**
 * A benchmark-only stand-in for the model: answers every request at once with a well-formed
 * FrozenLake action picked from the request's seed. It exists to measure what Temporal adds around
 * a model call; it is never used for rollouts or tests.
 */
import { formatExample } from '../src/agents/frozenlakeAgent';
import { encode, SPECIAL_TOKENS } from '../src/core/tokenizer';
import type { EngineStats, GenerateRequest, GenerateResult, InferenceProvider } from '../src/inference/provider';

export class ZeroLatencyProvider implements InferenceProvider {
  private calls = 0;

  async generate(request: GenerateRequest): Promise<GenerateResult> {
    this.calls++;
    const completionIds = [...encode(formatExample(request.sampling.seed % 4)), SPECIAL_TOKENS.end];
    return { completionIds, logprobs: completionIds.map(() => Math.log(0.25)), finishReason: 'stop', policyVersion: 0, queueMs: 0, decodeMs: 0 };
  }

  async stats(): Promise<EngineStats> {
    return {
      policyVersion: 0,
      uptimeMs: 0,
      busyMs: 0,
      decodeSteps: this.calls,
      generatedTokens: 0,
      batchSizeSum: this.calls,
      maxBatchSize: 1,
      running: 0,
      waiting: 0,
    };
  }

  async loadWeights(): Promise<number> {
    throw new Error('the zero-latency stand-in has no weights');
  }

  async close(): Promise<void> {}
}

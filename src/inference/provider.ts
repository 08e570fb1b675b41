/**
 * The one interface between trajflow and a model server. The embedded CPU engine implements it,
 * and so do the HTTP clients of vLLM and SGLang servers (src/inference/http/).
 *
 * Token-in/token-out: a request carries prompt token ids and a response carries the sampled ids
 * with their logprobs, so nothing is ever re-tokenized.
 */
import type { FinishReason } from '../core/records';

export type { FinishReason } from '../core/records';

export interface SamplingParams {
  /** Most tokens to sample for this call. */
  maxTokens: number;
  /** Softmax temperature; logprobs are reported under this temperature (before top-p). */
  temperature: number;
  /** Nucleus sampling mass in (0, 1]. */
  topP: number;
  /** Seeds the request's own random stream, so a retry samples the same tokens. */
  seed: number;
  /** Sampling stops after emitting one of these (it is included in the completion). */
  stopTokens: readonly number[];
}

export interface GenerateRequest {
  promptIds: readonly number[];
  sampling: SamplingParams;
  /** Aborts the request (the activity was cancelled): the backend stops decoding it. */
  signal?: AbortSignal;
}

export interface GenerateResult {
  completionIds: number[];
  /** Behaviour logprob of each completion token under the sampling temperature. */
  logprobs: number[];
  finishReason: FinishReason;
  /** Weights version that sampled the first token of this completion. */
  policyVersion: number;
  /** Version per token, present only when the weights changed during this request. */
  tokenPolicyVersions?: number[];
  /** Time spent waiting for a batch slot, and decoding, in milliseconds. */
  queueMs: number;
  decodeMs: number;
}

export interface EngineStats {
  policyVersion: number;
  /** Milliseconds since the engine started, and of those, spent in forward passes. */
  uptimeMs: number;
  busyMs: number;
  decodeSteps: number;
  generatedTokens: number;
  /** Sum over decode steps of the batch size, so mean occupancy = batchSizeSum / decodeSteps. */
  batchSizeSum: number;
  maxBatchSize: number;
  running: number;
  waiting: number;
}

export interface InferenceProvider {
  generate(request: GenerateRequest): Promise<GenerateResult>;
  /**
   * Switches to policy `version`, published at `checkpoint` (the embedded model's checkpoint file,
   * or a real model's Hugging Face directory), between decode steps: requests in flight go on
   * with the new weights and record the version per token. Resolves with the version loaded.
   */
  loadWeights(checkpoint: string, version: number): Promise<number>;
  stats(): Promise<EngineStats>;
  close(): Promise<void>;
}

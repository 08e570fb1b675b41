/**
 * Continuous-batching inference over the embedded transformer, in whatever thread constructs it.
 *
 * Requests queue; before each decode step, waiting requests join (prefilled one by one, which also
 * samples their first token) and finished ones have already left. Each decode step is then ONE
 * batched forward pass for all running sequences. Steps run back to back, yielding to the event
 * loop in between so new requests and weight updates land between steps, never inside one.
 *
 * Every sequence samples from its own seeded stream and its rows compute independently of the rest
 * of the batch, so a request gets exactly the tokens and logprobs it would get alone.
 */
import { createRng, type Rng } from '../core/random';
import { perfToUs, tracer } from '../trace/recorder';
import type { EngineStats, FinishReason, GenerateRequest, GenerateResult } from '../inference/provider';
import { initBackend } from './backend';
import type { ModelConfig } from './config';
import { KVCache } from './kvCache';
import { sampleToken, samplerParamsProblem } from './sampler';
import { decodeStep, disposeTensorWeights, prefill, toTensorWeights, type TensorWeights } from './transformer';
import { assertWeightsFit, weightsProblem, type ModelWeights } from './weights';

export interface EngineOptions {
  weights: ModelWeights;
  /** Version of `weights`, recorded on every token they sample. */
  policyVersion?: number;
  /** Most sequences decoded together (default 32). */
  maxBatch?: number;
}

export interface EngineResult extends GenerateResult {
  /** Only when the weights changed during this request: the version that sampled each token. */
  tokenPolicyVersions?: number[];
}

/** EngineStats plus where the busy time went. */
export interface EngineTimings extends EngineStats {
  /** Time in prompt forward passes (including sampling each first token) and the prompt tokens. */
  prefillMs: number;
  prefillTokens: number;
  /** Time in batched decode steps and the tokens they sampled. */
  decodeMs: number;
  decodeTokens: number;
}

interface Sequence {
  id: number;
  request: GenerateRequest;
  rng: Rng;
  /** Prompt + completion length. */
  length: number;
  completion: number[];
  logprobs: number[];
  versions: number[];
  submittedAt: number;
  admittedAt: number;
  resolve: (result: EngineResult) => void;
  reject: (error: Error) => void;
}

export class BatchingEngine {
  readonly config: ModelConfig;
  readonly maxBatch: number;
  private weights: TensorWeights;
  private policyVersion: number;
  private cache: KVCache;
  private readonly waiting: Sequence[] = [];
  private running: Sequence[] = [];
  private nextId = 0;
  private stepScheduled = false;
  private closed = false;
  private readonly startedAt = performance.now();
  private readonly counters = { prefillMs: 0, prefillTokens: 0, decodeMs: 0, decodeTokens: 0, decodeSteps: 0, batchSizeSum: 0, generatedTokens: 0 };
  /** Batch occupancy last traced, so the counter is recorded only when it changes. */
  private tracedOccupancy = '';

  /** Starts the tfjs wasm backend if needed, then the engine. */
  static async create(options: EngineOptions): Promise<BatchingEngine> {
    await initBackend();
    return new BatchingEngine(options);
  }

  private constructor({ weights, policyVersion = 0, maxBatch = 32 }: EngineOptions) {
    const problem = weightsProblem(weights);
    if (problem) throw new Error(`invalid weights: ${problem}`);
    if (!Number.isSafeInteger(maxBatch) || maxBatch < 1) throw new Error(`maxBatch must be a positive integer, got ${maxBatch}`);
    this.config = weights.config;
    this.maxBatch = maxBatch;
    this.weights = toTensorWeights(weights);
    this.policyVersion = policyVersion;
    this.cache = new KVCache(this.config);
  }

  /** Queues a request; rejects at once (and only it) if the request is invalid. */
  generate(request: GenerateRequest): Promise<EngineResult> {
    if (this.closed) return Promise.reject(new Error('engine is closed'));
    const problem = requestProblem(request, this.config);
    if (problem) return Promise.reject(new Error(`invalid generate request: ${problem}`));
    return new Promise((resolve, reject) => {
      const now = performance.now();
      this.waiting.push({
        id: this.nextId++,
        request,
        rng: createRng(request.sampling.seed),
        length: request.promptIds.length,
        completion: [],
        logprobs: [],
        versions: [],
        submittedAt: now,
        admittedAt: now,
        resolve,
        reject,
      });
      this.scheduleStep();
    });
  }

  /**
   * Swaps the weights. The engine only acts between steps, so this lands between two decode steps:
   * later tokens record `version`; sequences keep the KV caches their earlier tokens produced.
   */
  setWeights(weights: ModelWeights, version: number): void {
    if (this.closed) throw new Error('engine is closed');
    if (!Number.isSafeInteger(version) || version < 0) throw new Error(`policy version must be a non-negative integer, got ${version}`);
    assertWeightsFit(weights, this.config);
    const started = performance.now();
    const previous = this.weights;
    this.weights = toTensorWeights(weights);
    this.policyVersion = version;
    disposeTensorWeights(previous);
    if (tracer.enabled)
      tracer.complete('weights.swap', perfToUs(started), perfToUs(performance.now()), { cat: 'engine', role: 'inference', attrs: { version } });
  }

  stats(): EngineTimings {
    return {
      ...this.counters,
      policyVersion: this.policyVersion,
      uptimeMs: performance.now() - this.startedAt,
      busyMs: this.counters.prefillMs + this.counters.decodeMs,
      maxBatchSize: this.maxBatch,
      running: this.running.length,
      waiting: this.waiting.length,
    };
  }

  /** Rejects every queued and running request and frees the tensors. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    const error = new Error('engine is closed');
    for (const sequence of [...this.waiting.splice(0), ...this.running.splice(0)]) sequence.reject(error);
    this.cache.dispose();
    disposeTensorWeights(this.weights);
  }

  private scheduleStep(): void {
    if (this.stepScheduled || this.closed) return;
    this.stepScheduled = true;
    setImmediate(() => {
      this.stepScheduled = false;
      if (this.closed) return;
      this.admit();
      this.decode();
      if (this.waiting.length > 0 || this.running.length > 0) this.scheduleStep();
    });
  }

  /** Prefills waiting requests into free batch slots; each samples its first token. */
  private admit(): void {
    while (this.waiting.length > 0 && this.running.length < this.maxBatch) {
      const sequence = this.waiting.shift()!;
      const started = performance.now();
      sequence.admittedAt = started;
      try {
        const { logits, kv } = prefill(this.weights, sequence.request.promptIds);
        if (!this.sample(sequence, logits)) {
          // Its prompt, the tokens it may still generate (the last sampled one is never written), and
          // at most the context.
          const reserve = Math.min(this.config.maxContext, sequence.request.promptIds.length + sequence.request.sampling.maxTokens - 1);
          this.cache.stage(sequence.id, kv, reserve);
          this.running.push(sequence);
        }
      } catch (err) {
        sequence.reject(err as Error);
      }
      const ended = performance.now();
      this.counters.prefillMs += ended - started;
      this.counters.prefillTokens += sequence.request.promptIds.length;
      if (tracer.enabled) {
        tracer.complete('prefill', perfToUs(started), perfToUs(ended), {
          cat: 'engine',
          role: 'inference',
          attrs: { tokens: sequence.request.promptIds.length },
        });
      }
    }
  }

  /** One batched forward pass for every running sequence, then one sampled token each. */
  private decode(): void {
    if (this.running.length === 0) return;
    const started = performance.now();
    const batch = this.running;
    try {
      this.cache.arrange(batch.map((sequence) => sequence.id));
      // Free cache rows decode a dummy token 0; their logits are ignored.
      const lastTokens = new Int32Array(this.cache.rows);
      const rows = batch.map((sequence) => this.cache.rowOf(sequence.id));
      batch.forEach((sequence, i) => (lastTokens[rows[i]] = sequence.completion[sequence.completion.length - 1]));
      const logits = decodeStep(this.weights, this.cache, lastTokens);
      const vocab = this.config.vocabSize;
      this.running = batch.filter((sequence, i) => !this.sample(sequence, logits.subarray(rows[i] * vocab, (rows[i] + 1) * vocab)));
      this.counters.decodeSteps++;
      this.counters.batchSizeSum += batch.length;
      this.counters.decodeTokens += batch.length;
    } catch (err) {
      // A failed step leaves the cache in an unknown state: fail the batch, keep the engine.
      for (const sequence of batch) sequence.reject(err as Error);
      this.running = [];
    }
    if (this.running.length === 0) this.cache.dispose();
    const ended = performance.now();
    this.counters.decodeMs += ended - started;
    if (tracer.enabled) {
      tracer.complete('decode', perfToUs(started), perfToUs(ended), { cat: 'engine', role: 'inference', attrs: { batch: batch.length } });
      this.traceOccupancy(batch.length, perfToUs(started));
      // Going idle: the counter drops to 0 until the next step.
      if (this.running.length === 0 && this.waiting.length === 0) this.traceOccupancy(0, perfToUs(ended));
    }
  }

  /**
   * Engine counters (recorded only when they change): sequences in the decode step starting at
   * `atUs`, requests waiting to join, and the batch's fill in percent of maxBatch.
   */
  private traceOccupancy(batch: number, atUs: number): void {
    const waiting = this.waiting.length;
    const key = `${batch}/${waiting}`;
    if (key === this.tracedOccupancy) return;
    this.tracedOccupancy = key;
    tracer.counter('engine', { batch, waiting, occupancy_pct: Math.round((100 * batch) / this.maxBatch) }, { role: 'inference', atUs });
  }

  /** Samples the sequence's next token from `logits`; resolves it and returns true if it is done. */
  private sample(sequence: Sequence, logits: Float32Array): boolean {
    const { sampling } = sequence.request;
    const { token, logprob } = sampleToken(logits, sampling, sequence.rng());
    sequence.completion.push(token);
    sequence.logprobs.push(logprob);
    sequence.versions.push(this.policyVersion);
    sequence.length++;
    this.counters.generatedTokens++;
    const finishReason: FinishReason | undefined = sampling.stopTokens.includes(token)
      ? 'stop'
      : sequence.completion.length >= sampling.maxTokens
        ? 'length'
        : sequence.length >= this.config.maxContext
          ? 'context'
          : undefined;
    if (finishReason) sequence.resolve(this.result(sequence, finishReason));
    return finishReason !== undefined;
  }

  private result(sequence: Sequence, finishReason: FinishReason): EngineResult {
    const { versions } = sequence;
    return {
      completionIds: sequence.completion,
      logprobs: sequence.logprobs,
      finishReason,
      policyVersion: versions[0],
      ...(versions.some((version) => version !== versions[0]) ? { tokenPolicyVersions: versions } : {}),
      queueMs: sequence.admittedAt - sequence.submittedAt,
      decodeMs: performance.now() - sequence.admittedAt,
    };
  }
}

/** Why the engine cannot serve `request`, or undefined. */
function requestProblem({ promptIds, sampling }: GenerateRequest, config: ModelConfig): string | undefined {
  const { vocabSize, maxContext } = config;
  const isToken = (id: unknown) => Number.isInteger(id) && (id as number) >= 0 && (id as number) < vocabSize;
  if (!Array.isArray(promptIds) || promptIds.length === 0) return 'promptIds must be a non-empty array';
  const bad = promptIds.findIndex((id) => !isToken(id));
  if (bad >= 0) return `promptIds[${bad}] = ${promptIds[bad]} is not a token id (vocabulary is 0..${vocabSize - 1})`;
  if (promptIds.length >= maxContext) {
    return `prompt has ${promptIds.length} tokens; the context holds ${maxContext}, so at most ${maxContext - 1} leave room to generate`;
  }
  if (typeof sampling !== 'object' || sampling === null) return 'sampling params are missing';
  if (!Number.isSafeInteger(sampling.maxTokens) || sampling.maxTokens < 1) return `maxTokens must be a positive integer, got ${sampling.maxTokens}`;
  if (!Number.isSafeInteger(sampling.seed)) return `seed must be an integer, got ${sampling.seed}`;
  if (!Array.isArray(sampling.stopTokens) || !sampling.stopTokens.every(isToken)) return 'stopTokens must be token ids';
  return samplerParamsProblem(sampling);
}

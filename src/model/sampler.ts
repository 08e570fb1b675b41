/**
 * Picks the next token from one row of logits: temperature, then nucleus (top-p) truncation. The
 * weights exp((logit - max) / T) come from the wasm SIMD `expShift` kernel in float32, the draw
 * sums them in float64 JavaScript. Pure: the same (logits, params, uniform) always gives the same
 * token, which is what lets a batched engine reproduce unbatched sampling exactly. Needs the wasm
 * backend (`initBackend`).
 */
import * as tf from '@tensorflow/tfjs-core';
import { heapAddress, heapView } from './backend';
import { simdKernels } from './simdKernels';

export interface SamplerParams {
  /** Softmax temperature, > 0. */
  temperature: number;
  /** Nucleus mass in (0, 1]; 1 samples from the whole distribution. */
  topP: number;
}

export interface Sample {
  token: number;
  /** log p(token) under the temperature-scaled distribution, before top-p truncation. */
  logprob: number;
}

/** Why `params` cannot be sampled with, or undefined. */
export function samplerParamsProblem({ temperature, topP }: SamplerParams): string | undefined {
  if (!(Number.isFinite(temperature) && temperature > 0)) {
    return `temperature must be a finite number > 0 (use e.g. 1e-4 for near-greedy), got ${temperature}`;
  }
  if (!(topP > 0 && topP <= 1)) return `topP must be in (0, 1], got ${topP}`;
  return undefined;
}

/** Where sampleToken computes the weights: a heap tensor kept across calls, grown to the largest vocabulary seen. */
let scratch: tf.Tensor | undefined;

/** Samples with `uniform`, one draw in [0, 1) from the request's own random stream. */
export function sampleToken(logits: ArrayLike<number>, { temperature, topP }: SamplerParams, uniform: number): Sample {
  const vocab = logits.length;
  // expShift writes up to 3 floats past the row.
  if (!scratch || scratch.size < vocab + 3) {
    scratch?.dispose();
    scratch = tf.keep(tf.zeros([vocab + 3]));
  }
  heapView(scratch).set(logits);
  // z = logits / T;  w_i = exp(z_i - max z);  p_i = w_i / sum_j w_j;  log p_i = log w_i - log sum_j w_j
  const total = simdKernels().expShift(heapAddress(scratch), vocab, 1 / temperature);
  const weights = heapView(scratch).subarray(0, vocab);
  const token = topP < 1 ? drawNucleus(weights, topP * total, uniform) : drawInOrder(weights, total, uniform);
  return { token, logprob: Math.log(weights[token]) - Math.log(total) };
}

/** Inverse CDF over token ids in order. */
function drawInOrder(weights: Float32Array, total: number, uniform: number): number {
  let remaining = uniform * total;
  let last = 0;
  for (let token = 0; token < weights.length; token++) {
    if (weights[token] === 0) continue;
    last = token;
    remaining -= weights[token];
    if (remaining < 0) return token;
  }
  // Rounding left a sliver of mass unassigned: it belongs to the last token that has any.
  return last;
}

/**
 * Nucleus: the most probable tokens (ties: lower id first) whose mass first reaches `threshold`,
 * then the inverse CDF over them in that order. Tokens of weight 0 are never kept, even where
 * rounding leaves the mass a sliver short of the threshold.
 */
function drawNucleus(weights: Float32Array, threshold: number, uniform: number): number {
  const order = Array.from(weights.keys()).sort((a, b) => weights[b] - weights[a] || a - b);
  let kept = 0;
  let mass = 0;
  while (kept < order.length && mass < threshold && weights[order[kept]] > 0) mass += weights[order[kept++]];
  let remaining = uniform * mass;
  for (let i = 0; i < kept; i++) {
    remaining -= weights[order[i]];
    if (remaining < 0) return order[i];
  }
  return order[kept - 1];
}

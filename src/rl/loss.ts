/**
 * The policy-gradient loss: PPO's clipped surrogate on token-level importance ratios, optionally
 * weighted by truncated importance sampling on the behaviour ratio, with an optional KL penalty to a reference policy, an optional coverage of it and an optional entropy
 * bonus, over a minibatch padded to [B, T].
 *
 * Position t of row b is the sequence's target t + 1: logprobs[b, t] = log p(ids[t + 1] | ids[<= t]),
 * so a sequence of n tokens fills n - 1 positions (its first token has no logprob) and the rest of
 * the row is padding, with mask 0.
 */
import * as tf from '@tensorflow/tfjs-core';
import type { ModelConfig } from '../model/config';
import { oneHot, packedTargetScores, type TensorWeights } from '../model/transformer';

/** Where a per-token regulariser is paid: every trained token, or the first of each answer (each run of trained tokens). */
export type RegularisedTokens = 'all' | 'answer-start';

export interface LossConfig {
  /** Clip range below 1: the ratio's floor is 1 - epsilon. */
  epsilon: number;
  /** Clip range above 1: the ratio's ceiling is 1 + epsilonHigh (> epsilon is DAPO's "clip-higher"). */
  epsilonHigh: number;
  /** KL-to-reference coefficient; 0 turns the penalty off. */
  beta: number;
  /** KL estimator for the penalty. */
  kl: 'k1' | 'k3';
  aggregation: 'token-mean' | 'sequence-mean-token-mean';
  /** Truncated importance sampling on the behaviour ratio (`trainer.loss.tis`); absent: off. */
  tis?: { cap: number };
  /** Weight of the policy's entropy at the trained tokens, subtracted from the loss; 0 turns it off. */
  entropyBonus: number;
  entropyBonusTokens: RegularisedTokens;
  /** The coverage term (`Coverage` in src/model/transformer.ts): how far the policy falls short of covering the reference; absent: off. */
  coverage?: CoverageConfig;
  /** Sampling temperature: tokens are scored under the distribution that sampled them. */
  temperature: number;
}

export interface CoverageConfig {
  weight: number;
  /** Pull only where the policy gives a token less than floor x the reference's probability. */
  floor?: number;
  tokens: RegularisedTokens;
}

/** Whether the loss reads a reference policy (the run's version 0): for the KL penalty or the coverage term. */
export function needsReference({ beta, coverage }: Pick<LossConfig, 'beta' | 'coverage'>): boolean {
  return beta > 0 || coverage !== undefined;
}

/** `config` without the terms that read a reference: for training before version 0 exists (the format warm-up). */
export function withoutReference<C extends Pick<LossConfig, 'beta' | 'coverage'>>(config: C): C {
  return { ...config, beta: 0, coverage: undefined };
}

/** Whether the loss has a term besides the advantages' (so a batch of all-zero advantages still has a gradient). */
export function hasRegulariser(config: Pick<LossConfig, 'beta' | 'coverage' | 'entropyBonus'>): boolean {
  return needsReference(config) || config.entropyBonus > 0;
}

/** Why `config` is not usable, or undefined. */
export function lossConfigProblem({
  epsilon,
  epsilonHigh,
  beta,
  kl,
  aggregation,
  entropyBonus,
  entropyBonusTokens,
  coverage,
  tis,
  temperature,
}: LossConfig): string | undefined {
  if (!(epsilon > 0 && epsilon < 1)) return `epsilon must be in (0, 1), got ${epsilon}`;
  if (!(epsilonHigh > 0 && Number.isFinite(epsilonHigh))) return `epsilonHigh must be a finite number > 0, got ${epsilonHigh}`;
  if (!(beta >= 0 && Number.isFinite(beta))) return `beta must be a finite number >= 0, got ${beta}`;
  if (kl !== 'k1' && kl !== 'k3') return `kl must be k1 or k3, got ${JSON.stringify(kl)}`;
  if (aggregation !== 'token-mean' && aggregation !== 'sequence-mean-token-mean') {
    return `aggregation must be token-mean or sequence-mean-token-mean, got ${JSON.stringify(aggregation)}`;
  }
  if (!(entropyBonus >= 0 && Number.isFinite(entropyBonus))) return `entropyBonus must be a finite number >= 0, got ${entropyBonus}`;
  if (entropyBonusTokens !== 'all' && entropyBonusTokens !== 'answer-start') {
    return `entropyBonusTokens must be all or answer-start, got ${JSON.stringify(entropyBonusTokens)}`;
  }
  if (coverage) {
    const { weight, floor, tokens } = coverage;
    if (!(weight > 0 && Number.isFinite(weight))) return `coverage.weight must be a finite number > 0, got ${weight}`;
    if (floor !== undefined && !(floor > 0 && floor <= 1)) return `coverage.floor must be in (0, 1], got ${floor}`;
    if (tokens !== 'all' && tokens !== 'answer-start') return `coverage.tokens must be all or answer-start, got ${JSON.stringify(tokens)}`;
  }
  if (tis && !(tis.cap >= 1 && Number.isFinite(tis.cap))) return `tis.cap must be a finite number >= 1, got ${tis.cap}`;
  if (!(temperature > 0 && Number.isFinite(temperature))) return `temperature must be a finite number > 0, got ${temperature}`;
  return undefined;
}

/** A token sequence and which of its tokens to train on. */
export interface MaskedSequence {
  ids: number[];
  /** 1 where the policy sampled the token (it is trained), 0 where trajflow wrote it; aligned with ids. */
  lossMask: number[];
}

/** One trajectory's training sequence, as `buildTrainingSequence` gives it, plus its advantage. */
export interface TrainingSample extends MaskedSequence {
  /** log p(ids[i]) under the sampling policy where lossMask[i] is 1 (anything elsewhere); aligned with ids. */
  behaviourLogprobs: number[];
  /** Shared by every token of the sequence. */
  advantage: number;
  /** The all-moves term's targets at the sample's first trained token (`AnswerTargets`). */
  answerTargets?: AnswerTargets;
}

/**
 * Every well-formed answer of a turn, whole (its tokens to the end token), with a weight: the loss
 * adds
 *   -sum_a w_a log pi(a | context),   log pi(a) = sum_i log pi(a_i | context, a_<i)
 * at the turn's first trained token (where the answer starts). With w = c q, q a distribution over
 * the answers, that is c times the cross-entropy of the policy's answers against q. At the first
 * token its gradient on the logit of token v is c (pi(v) - q(v)): every answer is pulled to its
 * share of q, the ones the policy no longer samples as much as the others, and the pull stops once
 * it is there; the later tokens of each answer are pulled to spell it out, so a move the policy
 * starts writing is finished as that move.
 */
export interface AnswerTargets {
  /** Token ids of each answer, the end token included. */
  answers: number[][];
  weights: number[];
}

/** Why `sequence` cannot be trained on by a model of `config`, or undefined. */
function sequenceProblem({ ids, lossMask }: MaskedSequence, config: ModelConfig): string | undefined {
  if (!Array.isArray(ids) || ids.length < 2 || ids.length > config.maxContext) {
    return `ids must hold 2..${config.maxContext} tokens, got ${Array.isArray(ids) ? ids.length : typeof ids}`;
  }
  const badId = ids.findIndex((id) => !Number.isInteger(id) || id < 0 || id >= config.vocabSize);
  if (badId >= 0) return `ids[${badId}] = ${ids[badId]} is not a token id (0..${config.vocabSize - 1})`;
  if (!Array.isArray(lossMask) || lossMask.length !== ids.length) return `lossMask has ${lossMask?.length} entries for ${ids.length} ids`;
  const badMask = lossMask.findIndex((m) => m !== 0 && m !== 1);
  if (badMask >= 0) return `lossMask[${badMask}] = ${lossMask[badMask]}, expected 0 or 1`;
  if (lossMask[0] !== 0) return 'lossMask[0] must be 0: the first token has no context to predict it from';
  if (!lossMask.includes(1)) return 'lossMask has no 1: nothing to train on';
  return undefined;
}

function sampleProblem(sample: TrainingSample, config: ModelConfig): string | undefined {
  const { ids, lossMask, behaviourLogprobs, advantage } = sample;
  const problem = sequenceProblem(sample, config);
  if (problem) return problem;
  if (!Array.isArray(behaviourLogprobs) || behaviourLogprobs.length !== ids.length) {
    return `behaviourLogprobs has ${behaviourLogprobs?.length} entries for ${ids.length} ids`;
  }
  const badLogprob = behaviourLogprobs.findIndex((lp, i) => lossMask[i] === 1 && !(Number.isFinite(lp) && lp <= 0));
  if (badLogprob >= 0) return `behaviourLogprobs[${badLogprob}] = ${behaviourLogprobs[badLogprob]}, expected a finite logprob <= 0`;
  if (!Number.isFinite(advantage)) return `advantage is ${advantage}, expected a finite number`;
  return sample.answerTargets && answerTargetsProblem(sample.answerTargets, config, lossMask.indexOf(1));
}

function answerTargetsProblem({ answers, weights }: AnswerTargets, config: ModelConfig, answerStart: number): string | undefined {
  if (!Array.isArray(answers) || !Array.isArray(weights) || answers.length !== weights.length || answers.length === 0) {
    return `answerTargets needs as many weights as answers (at least one), got ${answers?.length} and ${weights?.length}`;
  }
  for (const [a, answer] of answers.entries()) {
    if (!Array.isArray(answer) || answer.length === 0) return `answerTargets.answers[${a}] has no tokens`;
    const badId = answer.findIndex((id) => !Number.isInteger(id) || id < 0 || id >= config.vocabSize);
    if (badId >= 0) return `answerTargets.answers[${a}][${badId}] = ${answer[badId]} is not a token id (0..${config.vocabSize - 1})`;
    if (answerStart + answer.length > config.maxContext) {
      return `answerTargets.answers[${a}] (${answer.length} tokens from index ${answerStart}) does not fit the context (${config.maxContext})`;
    }
  }
  const keys = answers.map((answer) => answer.join(','));
  if (new Set(keys).size !== keys.length) return `answerTargets.answers repeat an answer: [${keys.join('], [')}]`;
  const bad = weights.findIndex((w) => !(Number.isFinite(w) && w >= 0));
  if (bad >= 0) return `answerTargets.weights[${bad}] is ${weights[bad]}, expected a finite number >= 0`;
  return undefined;
}

/** Throws, naming the first bad sample's index, unless every sample fits `config`. */
export function assertTrainingSamples(samples: readonly TrainingSample[], config: ModelConfig): void {
  assertEach(samples, (sample) => sampleProblem(sample, config));
}

/** Throws, naming the first bad sequence's index, unless every sequence fits `config`. */
export function assertMaskedSequences(sequences: readonly MaskedSequence[], config: ModelConfig): void {
  assertEach(sequences, (sequence) => sequenceProblem(sequence, config));
}

function assertEach<T>(items: readonly T[], problemOf: (item: T) => string | undefined): void {
  if (items.length === 0) throw new Error('empty batch: nothing to train on');
  items.forEach((item, index) => {
    const problem = problemOf(item);
    if (problem) throw new Error(`sample ${index}: ${problem}`);
  });
}

/**
 * [B, T] policy logprobs of each sequence's trained targets (differentiable; 0 at the others) and
 * their loss mask; when asked for, the entropies of the policy's distributions there and their
 * coverage of the reference's too.
 */
export interface MaskedLogprobs {
  logprobs: tf.Tensor2D;
  mask: tf.Tensor2D;
  entropies?: tf.Tensor2D;
  coverage?: tf.Tensor2D;
  /** sum_a w_a log pi(a) at each sequence's first trained target, 0 elsewhere (`AnswerTargets`). */
  answerScores?: tf.Tensor2D;
}

/** What `maskedLogprobs` and `lossInputs` compute besides the logprobs. */
export interface MaskedExtras {
  /** The policy's entropy at each trained target. */
  entropy?: boolean;
  /**
   * Per sequence, the reference's next-token log-probabilities at each of its trained targets
   * ([targets x vocabSize], `targetDistributions`), and the floor: then the coverage there.
   */
  coverage?: { refDistributions: readonly Float32Array[]; floor?: number };
  /** Per sequence, the answers to score at its first trained target (undefined: none). */
  answers?: readonly (AnswerTargets | undefined)[];
}

export interface LossInputs extends MaskedLogprobs {
  /** [B, T] logprobs under the sampling (behaviour) policy. */
  behaviourLogprobs: tf.Tensor2D;
  /** [B] one advantage per sequence. */
  advantages: tf.Tensor1D;
  /** [B, T] logprobs under the reference policy; needed when beta > 0. */
  refLogprobs?: tf.Tensor2D;
  /** [B, T] the trainer's own logprobs before the step's first update, a constant; needed with tis. */
  oldLogprobs?: tf.Tensor2D;
}

/**
 * Runs the policy over each distinct sequence once, all of them in one packed pass (no compute on
 * padding), at `temperature`, scoring only their trained targets (see `targetLogprobs`: everything
 * the loss reads), as per-target logprobs and mask [B, T]; a sequence that recurs gets the same row
 * again (its gradient is the sum of theirs). Call inside tf.tidy or a gradient function.
 */
export function maskedLogprobs(
  policy: TensorWeights,
  sequences: readonly MaskedSequence[],
  temperature: number,
  { entropy = false, coverage, answers }: MaskedExtras = {},
): MaskedLogprobs {
  assertMaskedSequences(sequences, policy.config);
  const width = Math.max(...sequences.map(({ ids }) => ids.length - 1));
  const parts = sameSequenceParts(sequences);
  const refLogprobs = coverage && partDistributions(sequences, parts, coverage.refDistributions, policy.config.vocabSize);
  // A part's answers are its first sequence's: the samples of a part share their context, so
  // their turn's state and its prices.
  const index = new Map(sequences.map((sequence, i) => [sequence, i]));
  const answersOf = (first: MaskedSequence) => {
    const targets = answers?.[index.get(first)!];
    return targets ? { answers: { ids: targets.answers, weights: targets.weights } } : {};
  };
  const scores = packedTargetScores(
    policy,
    parts.map(([first]) => ({ ids: first.ids, positions: trainedTargets(first.lossMask), ...answersOf(first) })),
    temperature,
    { entropy, ...(refLogprobs ? { coverage: { refLogprobs, floor: coverage!.floor } } : {}) },
  );
  // Each sequence's row of its part, by a one-hot product (wasm has no gradient kernel for gather);
  // nothing to pick when every sequence is its own part (parts keep the order of first appearance).
  const partOf = new Map(parts.flatMap((part, row) => part.map((sequence) => [sequence, row] as const)));
  const rows = (perPart: tf.Tensor2D) =>
    parts.length === sequences.length
      ? perPart
      : (tf.matMul(
          oneHot(
            sequences.map((sequence) => partOf.get(sequence)!),
            parts.length,
          ),
          perPart,
        ) as tf.Tensor2D);
  return {
    logprobs: rows(scores.logprobs),
    mask: paddedTargets(
      sequences.map(({ lossMask }) => lossMask),
      width,
    ),
    ...(scores.entropies ? { entropies: rows(scores.entropies) } : {}),
    ...(scores.coverage ? { coverage: rows(scores.coverage) } : {}),
    ...(scores.answerScores ? { answerScores: rows(scores.answerScores) } : {}),
  };
}

/** The reference distributions of each part's first sequence, one part after another, as [K, V]. */
function partDistributions(
  sequences: readonly MaskedSequence[],
  parts: readonly MaskedSequence[][],
  refDistributions: readonly Float32Array[],
  vocabSize: number,
): tf.Tensor2D {
  const index = new Map(sequences.map((sequence, i) => [sequence, i]));
  const rows = parts.map(([first]) => {
    const i = index.get(first)!;
    const expected = trainedTargets(first.lossMask).length * vocabSize;
    if (refDistributions[i]?.length !== expected) {
      throw new Error(`sample ${i}: ${refDistributions[i]?.length} reference distribution values, expected ${expected} (trained targets x vocabSize)`);
    }
    return refDistributions[i];
  });
  const values = new Float32Array(rows.reduce((sum, row) => sum + row.length, 0));
  let offset = 0;
  for (const row of rows) {
    values.set(row, offset);
    offset += row.length;
  }
  return tf.tensor2d(values, [values.length / vocabSize, vocabSize]);
}

/**
 * `sequences` grouped by sequence (the same ids and loss mask), in order of first appearance.
 * Per-turn samples recur: an observation and the answer given to it come back across a group's
 * episodes (a step on the classic FrozenLake map holds 10-40 distinct sequences in ~200), and the
 * policy's logprobs of one sequence serve all of its samples.
 */
export function sameSequenceParts<S extends MaskedSequence>(sequences: readonly S[]): S[][] {
  const parts = new Map<string, S[]>();
  for (const sequence of sequences) {
    const key = `${sequence.ids.join(',')}|${sequence.lossMask.join('')}`;
    const part = parts.get(key);
    if (part) part.push(sequence);
    else parts.set(key, [sequence]);
  }
  return [...parts.values()];
}

/** Target positions t (ids[t + 1] is trained) of a loss mask aligned with ids, ascending. */
export function trainedTargets(lossMask: readonly number[]): number[] {
  return lossMask.flatMap((m, i) => (i > 0 && m === 1 ? [i - 1] : []));
}

/**
 * Everything the loss reads of `samples`. `refLogprobs` and `oldLogprobs` (the policy's before the
 * step), when given, hold each sample's logprobs per target (n - 1 values, as `sequenceLogprobs`
 * returns them), read at trained targets only.
 */
export function lossInputs(
  policy: TensorWeights,
  samples: readonly TrainingSample[],
  temperature: number,
  refLogprobs?: readonly ArrayLike<number>[],
  extras: MaskedExtras = {},
  oldLogprobs?: readonly ArrayLike<number>[],
): LossInputs {
  assertTrainingSamples(samples, policy.config);
  const answers = samples.some((sample) => sample.answerTargets) ? samples.map((sample) => sample.answerTargets) : undefined;
  const { logprobs, mask, entropies, coverage, answerScores } = maskedLogprobs(policy, samples, temperature, { ...extras, ...(answers ? { answers } : {}) });
  const width = logprobs.shape[1];
  const inputs: LossInputs = {
    logprobs,
    mask,
    ...(entropies ? { entropies } : {}),
    ...(coverage ? { coverage } : {}),
    ...(answerScores ? { answerScores } : {}),
    behaviourLogprobs: paddedTargets(
      samples.map(({ behaviourLogprobs }) => behaviourLogprobs),
      width,
    ),
    advantages: tf.tensor1d(samples.map(({ advantage }) => advantage)),
  };
  const perTarget = (rows: readonly ArrayLike<number>[], what: string) => {
    const bad = samples.findIndex(({ ids }, i) => rows[i]?.length !== ids.length - 1);
    if (bad >= 0) throw new Error(`sample ${bad}: ${rows[bad]?.length} ${what} logprobs for ${samples[bad].ids.length - 1} targets`);
    return paddedRows(rows, width);
  };
  if (refLogprobs) inputs.refLogprobs = perTarget(refLogprobs, 'reference');
  if (oldLogprobs) inputs.oldLogprobs = perTarget(oldLogprobs, 'old');
  return inputs;
}

/** Per-token values aligned with ids, as [B, width] per target (dropping each first token), zero-padded. */
function paddedTargets(rows: readonly ArrayLike<number>[], width: number): tf.Tensor2D {
  return paddedRows(
    rows.map((row) => Array.prototype.slice.call(row, 1) as number[]),
    width,
  );
}

function paddedRows(rows: readonly ArrayLike<number>[], width: number): tf.Tensor2D {
  const values = new Float32Array(rows.length * width);
  rows.forEach((row, b) => values.set(row, b * width));
  return tf.tensor2d(values, [rows.length, width]);
}

export interface LossMetrics<T> {
  /** Masked tokens whose objective took the clipped branch (so they get no gradient). */
  clipFraction: T;
  /** KL(behaviour || policy) estimated per token with k3, averaged over masked tokens. */
  approxKl: T;
  /** KL(policy || reference) with the configured estimator; only when beta > 0. */
  refKl?: T;
  /** The coverage term before its weight, averaged over the tokens it is paid on; only with `coverage`. */
  coverage?: T;
  /** Entropy of the sampling policy per masked token (Monte-Carlo: mean of -behaviour logprob). */
  entropy: T;
  /** With tis: the mean behaviour weight, and the share of masked tokens whose weight the cap bounded. */
  tisWeight?: T;
  tisCappedFraction?: T;
}

export interface LossResult {
  loss: tf.Scalar;
  metrics: LossMetrics<tf.Scalar>;
}

/** The loss to minimise for a minibatch, and its diagnostics. Call inside tf.tidy or a gradient function. */
export function policyLoss(inputs: LossInputs, config: LossConfig): LossResult {
  const { logprobs, behaviourLogprobs, mask, advantages, refLogprobs, entropies, oldLogprobs } = inputs;
  const { epsilon, epsilonHigh, beta, kl, aggregation, entropyBonus, entropyBonusTokens, coverage, tis } = config;
  const A = tf.expandDims(advantages, 1); // [B, 1]: each sequence's advantage, broadcast over its tokens

  // Importance ratio of the trained policy to the sampling one, per token:
  //   r = pi_theta(a) / pi_behaviour(a) = exp(log pi_theta(a) - log pi_behaviour(a))
  // (x mask: untrained and padded positions get log r = 0, whatever they hold)
  const logRatio = tf.mul(tf.sub(logprobs, behaviourLogprobs), mask);
  const ratio = tf.exp(logRatio);

  // With truncated importance sampling the proximal policy is the trainer's own before the step
  // (pi_old, a constant here), and the behaviour ratio becomes a weight of its own, capped:
  //   r = pi_theta(a) / pi_old(a)        w = min(pi_old(a) / pi_behaviour(a), cap)
  let surrogateRatio = ratio;
  let behaviourRatio: tf.Tensor | undefined;
  let tisWeight: tf.Tensor | undefined;
  if (tis) {
    if (!oldLogprobs) throw new Error("policyLoss: tis needs the trainer's logprobs before the step (oldLogprobs)");
    surrogateRatio = tf.exp(tf.mul(tf.sub(logprobs, oldLogprobs), mask));
    behaviourRatio = tf.exp(tf.mul(tf.sub(oldLogprobs, behaviourLogprobs), mask));
    tisWeight = tf.minimum(behaviourRatio, tis.cap);
  }

  // PPO's clipped surrogate with an asymmetric clip range:
  //   l = -min(r A, clip(r, 1 - epsilon, 1 + epsilonHigh) A)    (x w with tis)
  const unclipped = tf.mul(surrogateRatio, A);
  const clipped = tf.mul(tf.clipByValue(surrogateRatio, 1 - epsilon, 1 + epsilonHigh), A);
  let perToken = tf.neg(tf.minimum(unclipped, clipped));
  if (tisWeight) perToken = tf.mul(perToken, tisWeight);

  // KL penalty to a reference policy: l += beta * kl, per token, with d = log pi_ref - log pi_theta:
  //   k1 = -d                 (unbiased, noisy, can be negative)
  //   k3 = exp(d) - d - 1     (unbiased, always >= 0, low variance)
  let refKl: tf.Scalar | undefined;
  if (beta > 0) {
    if (!refLogprobs) throw new Error('policyLoss: beta > 0 needs reference logprobs');
    const d = tf.mul(tf.sub(refLogprobs, logprobs), mask);
    const klPerToken = kl === 'k1' ? tf.neg(d) : tf.sub(tf.sub(tf.exp(d), d), 1);
    perToken = tf.add(perToken, tf.mul(klPerToken, beta));
    refKl = maskedMean(klPerToken, mask);
  }

  // Entropy bonus: l -= c * H, per token, with H the entropy of the policy's next-token
  // distribution where the token was drawn. It keeps the policy sampling alternatives: one that
  // plays every state the same way makes every group all-solved or all-failed, which leaves GRPO
  // nothing to compare (and the mixed-outcome filter nothing to train).
  // With `answer-start` it is paid where a run of trained tokens begins (mask 1 after 0): the
  // first token of each answer.
  if (entropyBonus > 0) {
    if (!entropies) throw new Error('policyLoss: entropyBonus > 0 needs the policy entropies (lossInputs withEntropy)');
    perToken = tf.sub(perToken, tf.mul(paidAt(entropies, mask, entropyBonusTokens), entropyBonus));
  }

  // Coverage: l += c * KL(reference || policy) over the whole next-token distribution (or its
  // part below a floor). The penalty above, KL(policy || reference) estimated at the sampled
  // token, lets the policy drop a move altogether (a move it never samples costs it nothing);
  // this one grows without bound as the policy takes away a move the reference plays, so every
  // such move keeps some chance of being sampled, and compared, on every state, rare ones too.
  let coverageMean: tf.Scalar | undefined;
  if (coverage) {
    if (!inputs.coverage) throw new Error('policyLoss: coverage needs the coverage per token (lossInputs with coverage)');
    const paid = paidAt(inputs.coverage, mask, coverage.tokens);
    perToken = tf.add(perToken, tf.mul(paid, coverage.weight));
    coverageMean = maskedMean(paid, coverage.tokens === 'all' ? mask : answerStarts(mask));
  }

  // All-moves term: l -= sum_a w_a log pi(a) where each answer starts (`AnswerTargets`); the
  // scores are 0 at every other token.
  if (inputs.answerScores) perToken = tf.sub(perToken, inputs.answerScores);

  const loss = aggregate(perToken, mask, aggregation);

  // Diagnostics, all means over masked tokens:
  //   clip fraction: the min took the clipped term (strictly smaller), zeroing the token's gradient
  //   approx KL(behaviour || theta) by k3 with d = -log r:  r - 1 - log r
  //   entropy of the sampling policy: E_{a ~ pi_behaviour}[-log pi_behaviour(a)], estimated from the
  //     sampled tokens (the exact entropy needs the full next-token distributions, which
  //     `tokenLogprobs` does not return)
  const clipFraction = maskedMean(tf.cast(tf.less(clipped, unclipped), 'float32'), mask);
  const approxKl = maskedMean(tf.sub(tf.sub(ratio, 1), logRatio), mask);
  const entropy = maskedMean(tf.neg(behaviourLogprobs), mask);
  //   with tis: the mean weight w, and the share of tokens whose weight the cap bounded
  const tisMetrics =
    tis && tisWeight && behaviourRatio
      ? { tisWeight: maskedMean(tisWeight, mask), tisCappedFraction: maskedMean(tf.cast(tf.greater(behaviourRatio, tis.cap), 'float32'), mask) }
      : {};
  return {
    loss,
    metrics: { clipFraction, approxKl, entropy, ...(refKl ? { refKl } : {}), ...(coverageMean ? { coverage: coverageMean } : {}), ...tisMetrics },
  };
}

/** `values` where `tokens` says a regulariser is paid, 0 elsewhere. */
function paidAt(values: tf.Tensor2D, mask: tf.Tensor2D, tokens: RegularisedTokens): tf.Tensor2D {
  return tokens === 'all' ? values : (tf.mul(values, answerStarts(mask)) as tf.Tensor2D);
}

/** 1 where a run of 1s of `mask` begins along each row (the first trained token of an answer), else 0. */
export function answerStarts(mask: tf.Tensor2D): tf.Tensor2D {
  const before = tf.pad(tf.slice(mask, [0, 0], [-1, mask.shape[1] - 1]), [
    [0, 0],
    [1, 0],
  ]);
  return tf.relu(tf.sub(mask, before)) as tf.Tensor2D;
}

/** Cross-entropy of the masked targets: -sum(mask * log p) / sum(mask). Call inside tf.tidy or a gradient function. */
export function supervisedLoss({ logprobs, mask }: MaskedLogprobs): tf.Scalar {
  return tf.neg(maskedMean(logprobs, mask));
}

/**
 * Per-token losses l[b, t] to one number:
 *   token-mean:                sum_{b,t} m l / sum_{b,t} m       (every trained token weighs the same)
 *   sequence-mean-token-mean:  (1/B) sum_b (sum_t m l / sum_t m) (every sequence weighs the same)
 */
function aggregate(perToken: tf.Tensor, mask: tf.Tensor, aggregation: LossConfig['aggregation']): tf.Scalar {
  const masked = tf.mul(perToken, mask);
  if (aggregation === 'token-mean') return tf.div(tf.sum(masked), tf.sum(mask));
  return tf.mean(tf.div(tf.sum(masked, 1), tf.sum(mask, 1)));
}

function maskedMean(x: tf.Tensor, mask: tf.Tensor): tf.Scalar {
  return tf.div(tf.sum(tf.mul(x, mask)), tf.sum(mask));
}

/**
 * How much a part of a minibatch weighs in the minibatch's loss, as the share of the aggregation's
 * denominator it holds: its trained tokens for token-mean, its sequences otherwise. Summing
 * weight * loss(part) over the parts gives exactly loss(minibatch), for both aggregations.
 */
export function aggregationShare(part: readonly MaskedSequence[], whole: readonly MaskedSequence[], aggregation: LossConfig['aggregation']): number {
  if (aggregation === 'sequence-mean-token-mean') return part.length / whole.length;
  return maskedTokens(part) / maskedTokens(whole);
}

/** Number of trained (mask 1) tokens. */
export function maskedTokens(sequences: readonly MaskedSequence[]): number {
  return sequences.reduce((sum, { lossMask }) => sum + lossMask.reduce((n, m) => n + m, 0), 0);
}

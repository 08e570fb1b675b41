/**
 * The embedded trainer: the policy's weights as tf.Variables, updated by Adam on the clipped
 * policy-gradient loss (or, for the format warm-up, on cross-entropy).
 *
 * Each distinct sequence runs through the model once, for all of the samples that share it
 * (`sameSequenceParts`: per-turn samples recur), and many of them in one packed pass (see
 * `gradients`, and `packedTargetScores` for how: nothing is padded, and a prefix they all share
 * runs once); the minibatch's gradient is the share-weighted sum over the passes (see
 * `aggregationShare`). Policy and reference are scored at trained tokens only (`targetLogprobs`),
 * all the loss reads: most of a sequence is prompt, and only the answers in it are trained.
 */
import * as tf from '@tensorflow/tfjs-core';
import { SamplingConfigSchema, TrainerConfigSchema, type TrainerConfig } from '../../config/schema';
import './gradients';
import { initBackend } from '../model/backend';
import type { ModelConfig } from '../model/config';
import { disposeTensorWeights, sequenceLogprobs, targetDistributions, toTensorWeights, type TensorWeights } from '../model/transformer';
import { assertWeightsFit, parameterSpecs, weightsProblem, type ModelWeights, type OptimizerState } from '../model/weights';
import {
  aggregationShare,
  assertMaskedSequences,
  assertTrainingSamples,
  lossConfigProblem,
  lossInputs,
  maskedLogprobs,
  maskedTokens,
  needsReference,
  hasRegulariser,
  policyLoss,
  sameSequenceParts,
  supervisedLoss,
  trainedTargets,
  type LossConfig,
  type MaskedSequence,
  type TrainingSample,
} from './loss';
import { perfToUs, tracer } from '../trace/recorder';

export type { MaskedSequence, TrainingSample } from './loss';

/** How the trainer updates the policy (meanings and defaults: `trainer` in config/schema.ts). */
export interface TrainerSettings {
  learningRate: number;
  /** Gradients are rescaled so their global L2 norm is at most this. */
  maxGradNorm: number;
  adamEpsilon: number;
  /** The batch is split into this many minibatches, one Adam step each. */
  optimizerStepsPerBatch: number;
  /** A batch's updates that move the policy further than this (KL) are shortened; undefined: never. */
  maxUpdateKl?: number;
  loss: LossConfig;
}

/** A run's trainer settings: its trainer config, scoring tokens at the sampling `temperature`. */
export function trainerSettings(config: TrainerConfig, temperature: number): TrainerSettings {
  return {
    learningRate: config.learningRate,
    maxGradNorm: config.maxGradNorm,
    adamEpsilon: config.adamEpsilon,
    optimizerStepsPerBatch: config.optimizerStepsPerBatch,
    ...(config.maxUpdateKl === undefined ? {} : { maxUpdateKl: config.maxUpdateKl }),
    loss: { ...config.loss, temperature },
  };
}

/** The settings of a config that sets nothing: the schema's defaults, which are written there alone. */
const SCHEMA_DEFAULTS = trainerSettings(TrainerConfigSchema.parse({}), SamplingConfigSchema.parse({}).temperature);

export interface TrainerOptions extends Partial<Omit<TrainerSettings, 'loss'>> {
  weights: ModelWeights;
  /** Adam state to resume from (a trainer checkpoint's); fresh (step 0, zero moments) if absent. */
  optimizer?: OptimizerState;
  /** Reference policy for the KL penalty; required when loss.beta > 0. */
  reference?: ModelWeights;
  /** Settings left out take the config schema's defaults. */
  loss?: Partial<LossConfig>;
  /**
   * Distinct tokens run through the model in one packed pass (default PACK_TOKENS); 1 runs every
   * sequence alone, as `npm run bench:trainer` compares.
   */
  packTokens?: number;
}

export interface TrainMetrics {
  /** Mean over the batch's minibatches of the loss before their update. */
  loss: number;
  /** Token means over the whole batch (see LossMetrics). */
  clipFraction: number;
  approxKl: number;
  refKl?: number;
  coverage?: number;
  entropy: number;
  /** With loss.tis: token means of the behaviour weight, and of the tokens whose weight the cap bounded. */
  tisWeightMean?: number;
  tisCappedFraction?: number;
  /** Mean over minibatches of the global gradient norm before clipping. */
  gradNorm: number;
  /** Trained (loss mask 1) tokens, and sequences. */
  tokens: number;
  sequences: number;
  stepMs: number;
  /** Time in forward and backward passes (and reference logprobs), and in clipping and Adam. */
  forwardBackwardMs: number;
  optimizerMs: number;
  /**
   * With maxUpdateKl: KL(policy before the batch || after its updates), estimated on the first
   * minibatch's trained tokens, for the updates as computed (`proposedUpdateKl`) and as kept
   * (`updateKl`), and the share of the updates kept (`updateScale`: 1 within the bound, 0 undone).
   */
  proposedUpdateKl?: number;
  updateKl?: number;
  updateScale?: number;
}

/** A batch with nothing to train: no optimizer step was taken. */
export const NOTHING_TRAINED: TrainMetrics = Object.freeze({
  loss: 0,
  clipFraction: 0,
  approxKl: 0,
  entropy: 0,
  gradNorm: 0,
  tokens: 0,
  sequences: 0,
  stepMs: 0,
  forwardBackwardMs: 0,
  optimizerMs: 0,
});

// Adam's usual constants (Kingma & Ba).
const BETA1 = 0.9;
const BETA2 = 0.999;

type Params = Record<string, tf.Variable>;

/** What the trust region did with a batch's updates (see holdTrustRegion). */
type TrustRegionOutcome = Required<Pick<TrainMetrics, 'proposedUpdateKl' | 'updateKl' | 'updateScale'>>;

/** How many shortened updates the trust region tries before it undoes the batch. */
const SHORTENINGS = 4;
/**
 * Distinct tokens run through the model in one packed pass while training (see `gradients`). A
 * graph's memory grows with it and the op count per sequence falls: at this size a smaller pack
 * is no faster, and a much larger one is slower.
 */
const PACK_TOKENS = 4096;

interface SavedState {
  params: Record<string, tf.Tensor>;
  m: Record<string, tf.Tensor>;
  v: Record<string, tf.Tensor>;
  step: number;
}

export class PolicyTrainer {
  readonly config: ModelConfig;
  readonly lossConfig: LossConfig;
  readonly learningRate: number;
  readonly maxGradNorm: number;
  readonly adamEpsilon: number;
  readonly optimizerStepsPerBatch: number;
  readonly maxUpdateKl: number | undefined;
  private readonly packTokens: number;
  private readonly names: string[];
  private readonly params: Params;
  /** Adam's moment estimates per parameter, and the number of updates so far. */
  private readonly m: Params;
  private readonly v: Params;
  private step: number;
  private readonly reference?: TensorWeights;
  private disposed = false;

  /** Starts the tfjs wasm backend if needed, then the trainer. */
  static async create(options: TrainerOptions): Promise<PolicyTrainer> {
    await initBackend();
    return new PolicyTrainer(options);
  }

  private constructor({ weights, optimizer, reference, loss, packTokens = PACK_TOKENS, ...settings }: TrainerOptions) {
    const { learningRate, maxGradNorm, adamEpsilon, optimizerStepsPerBatch, maxUpdateKl } = { ...SCHEMA_DEFAULTS, ...settings };
    const problem = weightsProblem(weights);
    if (problem) throw new Error(`invalid weights: ${problem}`);
    positive('learningRate', learningRate);
    positive('maxGradNorm', maxGradNorm);
    positive('adamEpsilon', adamEpsilon);
    if (maxUpdateKl !== undefined) positive('maxUpdateKl', maxUpdateKl);
    if (!Number.isSafeInteger(optimizerStepsPerBatch) || optimizerStepsPerBatch < 1) {
      throw new Error(`optimizerStepsPerBatch must be a positive integer, got ${optimizerStepsPerBatch}`);
    }
    this.lossConfig = { ...SCHEMA_DEFAULTS.loss, ...loss };
    const lossIssue = lossConfigProblem(this.lossConfig);
    if (lossIssue) throw new Error(`invalid loss config: ${lossIssue}`);
    if (needsReference(this.lossConfig)) {
      if (!reference) throw new Error(`${this.lossConfig.beta > 0 ? 'loss.beta > 0' : 'loss.coverage'} needs a reference policy (TrainerOptions.reference)`);
      assertWeightsFit(reference, weights.config);
    }

    this.config = weights.config;
    this.learningRate = learningRate;
    this.maxGradNorm = maxGradNorm;
    this.adamEpsilon = adamEpsilon;
    this.optimizerStepsPerBatch = optimizerStepsPerBatch;
    this.maxUpdateKl = maxUpdateKl;
    if (!(Number.isSafeInteger(packTokens) && packTokens > 0)) throw new Error(`packTokens must be a positive integer, got ${packTokens}`);
    this.packTokens = packTokens;
    this.names = parameterSpecs(this.config).map(({ name }) => name);
    const state = optimizer ?? zeroState(weights);
    const stateProblem = !(Number.isSafeInteger(state.step) && state.step >= 0)
      ? `step must be a non-negative integer, got ${state.step}`
      : (weightsProblem({ config: this.config, params: state.m }) ?? weightsProblem({ config: this.config, params: state.v }));
    if (stateProblem) throw new Error(`optimizer state does not fit the weights: ${stateProblem}`);
    this.params = this.variables(weights.params, true);
    this.m = this.variables(state.m, false);
    this.v = this.variables(state.v, false);
    this.step = state.step;
    if (needsReference(this.lossConfig)) this.reference = toTensorWeights(reference!);
  }

  /** The policy as the transformer reads it. */
  private get policy(): TensorWeights {
    return { config: this.config, params: this.params };
  }

  /**
   * One RL update on `samples`: split into `optimizerStepsPerBatch` contiguous minibatches, one
   * Adam step each, so later minibatches see a policy that already moved (which is what the
   * importance ratio and its clipping are for).
   *
   * A batch in which every advantage is 0 (every group all solved or all failed) and no sample has
   * answer targets has a loss of 0 and no gradient unless a KL penalty or the coverage term pulls
   * toward the reference or an entropy bonus away from certainty; without any of them it takes no
   * Adam step, since Adam's
   * momentum alone would still move the policy, on no evidence. `learningRate`: this step's (a
   * run's schedule moves it), by default the trainer's own.
   */
  trainBatch(samples: readonly TrainingSample[], { learningRate = this.learningRate } = {}): TrainMetrics {
    this.assertUsable();
    assertTrainingSamples(samples, this.config);
    positive('learningRate', learningRate);
    if (!hasRegulariser(this.lossConfig) && samples.every(({ advantage, answerTargets }) => advantage === 0 && !answerTargets)) return NOTHING_TRAINED;
    const steps = this.optimizerStepsPerBatch;
    if (samples.length < steps) throw new Error(`optimizerStepsPerBatch (${steps}) exceeds the batch's ${samples.length} samples`);
    const started = performance.now();
    const { temperature, aggregation, entropyBonus, beta, coverage, tis } = this.lossConfig;
    const timings = { forwardBackwardMs: 0, optimizerMs: 0 };
    let lossSum = 0;
    let gradNormSum = 0;
    // Token-weighted sums of the per-sequence metric means.
    const sums = { clipFraction: 0, approxKl: 0, refKl: 0, coverage: 0, entropy: 0, tisWeight: 0, tisCappedFraction: 0 };
    const minibatches = split(samples, steps);
    const minibatchParts = minibatches.map((minibatch) => sameSequenceParts(minibatch));
    const scoreParts = <T>(parts: readonly TrainingSample[][], score: (ids: number[], targets: number[]) => T) =>
      parts.map(([{ ids, lossMask }]) => score(ids, trainedTargets(lossMask)));
    // With tis, every minibatch's logprobs under the policy before the batch, scored before its first update.
    const oldLogprobs = tis
      ? minibatchParts.map((parts) => scoreParts(parts, (ids, targets) => sequenceLogprobs(this.policy, ids, temperature, targets)))
      : undefined;
    // The trust region's reference: the policy before the batch, and its logprobs on the first
    // minibatch, read from that minibatch's own forward pass (it runs before any update).
    const before = this.maxUpdateKl === undefined ? undefined : { state: this.saveState(), logprobs: [] as Float32Array[] };
    let region: TrustRegionOutcome | undefined;
    try {
      for (const [index, minibatch] of minibatches.entries()) {
        const forwardStarted = performance.now();
        const parts = minibatchParts[index];
        // The reference's scores of each part, outside the gradient: it is not trained.
        const reference = this.reference;
        const perPart = <T>(score: (ids: number[], targets: number[]) => T) => scoreParts(parts, score);
        const refLogprobs = reference && beta > 0 ? perPart((ids, targets) => sequenceLogprobs(reference, ids, temperature, targets)) : undefined;
        const refDistributions = reference && coverage ? perPart((ids, targets) => targetDistributions(reference, ids, targets, temperature)) : undefined;
        const { loss, grads } = this.gradients(parts, minibatch, aggregation, (chunk, firstPart) => {
          const samples = chunk.flat();
          const ofSamples = <T>(values: readonly T[]) => chunk.flatMap((part, j) => part.map(() => values[firstPart + j]));
          const inputs = lossInputs(
            this.policy,
            samples,
            temperature,
            refLogprobs && ofSamples(refLogprobs),
            {
              entropy: entropyBonus > 0,
              ...(refDistributions ? { coverage: { refDistributions: ofSamples(refDistributions), floor: coverage?.floor } } : {}),
            },
            oldLogprobs && ofSamples(oldLogprobs[index]),
          );
          // Every row of a part holds the same logprobs: its first serves the trust region.
          if (before && index === 0) before.logprobs.push(...firstRowsOfParts(inputs.logprobs, chunk));
          const { loss: chunkLoss, metrics } = policyLoss(inputs, this.lossConfig);
          const tokens = maskedTokens(samples);
          sums.clipFraction += read(metrics.clipFraction) * tokens;
          sums.approxKl += read(metrics.approxKl) * tokens;
          sums.entropy += read(metrics.entropy) * tokens;
          if (metrics.refKl) sums.refKl += read(metrics.refKl) * tokens;
          if (metrics.coverage) sums.coverage += read(metrics.coverage) * tokens;
          if (metrics.tisWeight) sums.tisWeight += read(metrics.tisWeight) * tokens;
          if (metrics.tisCappedFraction) sums.tisCappedFraction += read(metrics.tisCappedFraction) * tokens;
          return chunkLoss;
        });
        const optimizerStarted = performance.now();
        gradNormSum += this.applyGradients(grads, learningRate);
        const optimizerEnded = performance.now();
        lossSum += loss;
        timings.forwardBackwardMs += optimizerStarted - forwardStarted;
        timings.optimizerMs += optimizerEnded - optimizerStarted;
        if (tracer.enabled) {
          const attrs = { sequences: minibatch.length, tokens: maskedTokens(minibatch) };
          tracer.complete('forward/backward', perfToUs(forwardStarted), perfToUs(optimizerStarted), { cat: 'trainer', role: 'trainer', attrs });
          tracer.complete('optimizer', perfToUs(optimizerStarted), perfToUs(optimizerEnded), { cat: 'trainer', role: 'trainer' });
        }
      }
      region = before && this.holdTrustRegion(minibatchParts[0], before.logprobs, before.state);
    } finally {
      if (before) disposeState(before.state);
    }
    const tokens = maskedTokens(samples);
    return {
      loss: lossSum / steps,
      clipFraction: sums.clipFraction / tokens,
      approxKl: sums.approxKl / tokens,
      ...(beta > 0 ? { refKl: sums.refKl / tokens } : {}),
      ...(coverage ? { coverage: sums.coverage / tokens } : {}),
      entropy: sums.entropy / tokens,
      ...(tis ? { tisWeightMean: sums.tisWeight / tokens, tisCappedFraction: sums.tisCappedFraction / tokens } : {}),
      gradNorm: gradNormSum / steps,
      tokens,
      sequences: samples.length,
      stepMs: performance.now() - started,
      ...timings,
      ...region,
    };
  }

  /**
   * Keeps the batch's updates within maxUpdateKl of the policy it started from, measured on
   * `probe`'s trained tokens:
   *
   *   KL(before || after) ~ mean over tokens of  r - 1 - log r,   r = p_after(token) / p_before(token)
   *
   * (k3, with the tokens drawn by the behaviour policy, at most maxStaleness versions from
   * `before`). Late in a run, when most groups all succeed, a rare failure carries a large
   * advantage and Adam moves every parameter by about the learning rate whatever the gradient's
   * size: one such step can flip a near-certain move and the run collapses.
   *
   * An update past the bound is shortened, not dropped: weights and Adam's state are set to
   * before + s (after - before). For a small step the KL grows with the square of its length, so
   * s = sqrt(bound / KL) lands near the bound; s is halved while it is still too far, and after
   * SHORTENINGS tries the whole batch is undone (s = 0, Adam's step count back too).
   */
  private holdTrustRegion(probe: readonly TrainingSample[][], beforeLogprobs: readonly Float32Array[], before: SavedState): TrustRegionOutcome {
    const bound = this.maxUpdateKl!;
    const proposedUpdateKl = this.updateKlOn(probe, beforeLogprobs);
    if (proposedUpdateKl <= bound) return { proposedUpdateKl, updateKl: proposedUpdateKl, updateScale: 1 };
    const proposed = this.saveState();
    try {
      const first = Math.sqrt(bound / proposedUpdateKl);
      for (let k = 0; k < SHORTENINGS; k++) {
        const updateScale = first / 2 ** k;
        this.interpolateState(before, proposed, updateScale);
        const updateKl = this.updateKlOn(probe, beforeLogprobs);
        if (updateKl <= bound) return { proposedUpdateKl, updateKl, updateScale };
      }
      this.restoreState(before);
      return { proposedUpdateKl, updateKl: 0, updateScale: 0 };
    } finally {
      disposeState(proposed);
    }
  }

  /** k3 KL(before || now) over `probe`'s trained tokens, given their logprobs before. */
  private updateKlOn(probe: readonly TrainingSample[][], beforeLogprobs: readonly Float32Array[]): number {
    const { temperature } = this.lossConfig;
    let sum = 0;
    let count = 0;
    probe.forEach((part, i) => {
      const targets = trainedTargets(part[0].lossMask);
      const after = sequenceLogprobs(this.policy, part[0].ids, temperature, targets);
      for (const t of targets) {
        const logRatio = after[t] - beforeLogprobs[i][t];
        sum += part.length * (Math.exp(logRatio) - 1 - logRatio);
        count += part.length;
      }
    });
    return sum / count;
  }

  /** Weights and Adam's moments set to from + scale (to - from), Adam's step count to `to`'s. */
  private interpolateState(from: SavedState, to: SavedState, scale: number): void {
    const between = (a: tf.Tensor, b: tf.Tensor) => tf.tidy(() => tf.add(a, tf.mul(tf.sub(b, a), scale)));
    for (const name of this.names) {
      for (const [vars, key] of [
        [this.params, 'params'],
        [this.m, 'm'],
        [this.v, 'v'],
      ] as const) {
        const value = between(from[key][name], to[key][name]);
        vars[name].assign(value);
        value.dispose();
      }
    }
    this.step = to.step;
  }

  /** A copy of the weights and Adam's state, to go back to. */
  private saveState(): SavedState {
    const copy = (vars: Params) => Object.fromEntries(this.names.map((name) => [name, tf.clone(vars[name])]));
    return { params: copy(this.params), m: copy(this.m), v: copy(this.v), step: this.step };
  }

  private restoreState(state: SavedState): void {
    for (const name of this.names) {
      this.params[name].assign(state.params[name]);
      this.m[name].assign(state.m[name]);
      this.v[name].assign(state.v[name]);
    }
    this.step = state.step;
  }

  /**
   * One Adam step on the token-mean cross-entropy of the masked tokens, scored at the loss
   * temperature so that sampling at that temperature reproduces what was learned.
   */
  supervisedStep(sequences: readonly MaskedSequence[], { learningRate = this.learningRate } = {}): { loss: number; tokens: number } {
    this.assertUsable();
    assertMaskedSequences(sequences, this.config);
    const { temperature } = this.lossConfig;
    const { loss, grads } = this.gradients(sameSequenceParts(sequences), sequences, 'token-mean', (chunk) =>
      supervisedLoss(maskedLogprobs(this.policy, chunk.flat(), temperature)),
    );
    this.applyGradients(grads, learningRate);
    return { loss, tokens: maskedTokens(sequences) };
  }

  /** log p(ids[i] | ids[<i]) for i = 1..n-1 under the current weights, at `temperature`. */
  recomputeLogprobs(ids: readonly number[], temperature: number): Float32Array {
    this.assertUsable();
    return sequenceLogprobs(this.policy, ids, temperature);
  }

  /** A copy of the current weights (e.g. for an inference engine). */
  snapshot(): ModelWeights {
    this.assertUsable();
    return { config: this.config, params: copyValues(this.params) };
  }

  /** Weights and optimizer state, for `saveTrainerCheckpoint` (add the policy version). */
  checkpoint(): { weights: ModelWeights; optimizer: OptimizerState } {
    this.assertUsable();
    return { weights: this.snapshot(), optimizer: { step: this.step, m: copyValues(this.m), v: copyValues(this.v) } };
  }

  /** Forgets Adam's state (e.g. between the supervised warm-up and RL). */
  resetOptimizer(): void {
    this.assertUsable();
    tf.tidy(() => {
      for (const name of this.names) {
        this.m[name].assign(tf.zerosLike(this.m[name]));
        this.v[name].assign(tf.zerosLike(this.v[name]));
      }
    });
    this.step = 0;
  }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    tf.dispose([...Object.values(this.params), ...Object.values(this.m), ...Object.values(this.v)]);
    if (this.reference) disposeTensorWeights(this.reference);
  }

  /**
   * Gradients of a minibatch's loss, a chunk of parts (each part: the samples of one sequence) at a
   * time: loss(minibatch) = sum_c share_c * loss(chunk c), share_c from `aggregationShare`. A chunk
   * holds whole parts up to `packTokens` distinct tokens, run through the model in one packed pass.
   * `lossOf` gets a chunk and the index of its first part. Returns the loss and the summed gradients.
   */
  private gradients<S extends MaskedSequence>(
    parts: readonly S[][],
    minibatch: readonly S[],
    aggregation: LossConfig['aggregation'],
    lossOf: (chunk: S[][], firstPart: number) => tf.Scalar,
  ): { loss: number; grads: Record<string, tf.Tensor> } {
    const variables = this.names.map((name) => this.params[name]);
    const grads: Record<string, tf.Tensor> = {};
    let loss = 0;
    try {
      for (const { chunk, firstPart } of chunksOf(parts, this.packTokens)) {
        const share = aggregationShare(chunk.flat(), minibatch, aggregation);
        const { value, grads: chunkGrads } = tf.variableGrads(() => tf.mul(lossOf(chunk, firstPart), share), variables);
        loss += take(value);
        this.names.forEach((name, p) => {
          const grad = chunkGrads[variables[p].name];
          if (!grad) return;
          const previous = grads[name];
          grads[name] = previous ? tf.add(previous, grad) : grad;
          if (previous) tf.dispose([previous, grad]);
        });
      }
    } catch (err) {
      tf.dispose(Object.values(grads));
      throw err;
    }
    return { loss, grads };
  }

  /**
   * Clips `grads` to the global norm and takes one Adam step at `learningRate`; disposes `grads`.
   * Returns the norm before clipping.
   */
  private applyGradients(grads: Record<string, tf.Tensor>, learningRate: number): number {
    try {
      return tf.tidy(() => {
        const { norm, clipped } = clipByGlobalNorm(grads, this.maxGradNorm);
        this.step++;
        const t = this.step;
        for (const [name, g] of Object.entries(clipped)) {
          const [theta, m, v] = [this.params[name], this.m[name], this.v[name]];
          // Adam:  m <- b1 m + (1 - b1) g          v <- b2 v + (1 - b2) g^2
          //        m_hat = m / (1 - b1^t)          v_hat = v / (1 - b2^t)
          //        theta <- theta - lr m_hat / (sqrt(v_hat) + eps)
          m.assign(tf.add(tf.mul(m, BETA1), tf.mul(g, 1 - BETA1)));
          v.assign(tf.add(tf.mul(v, BETA2), tf.mul(tf.square(g), 1 - BETA2)));
          const mHat = tf.div(m, 1 - BETA1 ** t);
          const vHat = tf.div(v, 1 - BETA2 ** t);
          theta.assign(tf.sub(theta, tf.mul(tf.div(mHat, tf.add(tf.sqrt(vHat), this.adamEpsilon)), learningRate)));
        }
        return norm;
      });
    } finally {
      tf.dispose(Object.values(grads));
    }
  }

  /** One variable per parameter, named by tfjs (names are global, and trainers may coexist). */
  private variables(values: Readonly<Record<string, Float32Array>>, trainable: boolean): Params {
    const shapes = new Map(parameterSpecs(this.config).map(({ name, shape }) => [name, [...shape]]));
    return Object.fromEntries(this.names.map((name) => [name, tf.variable(tf.tensor(values[name], shapes.get(name), 'float32'), trainable)]));
  }

  private assertUsable(): void {
    if (this.disposed) throw new Error('trainer is disposed');
  }
}

/**
 * Gradients rescaled so that their global norm is at most `maxNorm` (new tensors; `grads` is left
 * alone), and the norm before. Throws on a non-finite norm, which no update should apply.
 */
export function clipByGlobalNorm(grads: Readonly<Record<string, tf.Tensor>>, maxNorm: number): { norm: number; clipped: Record<string, tf.Tensor> } {
  // Global norm: ||g|| = sqrt(sum over tensors p of sum(g_p^2))
  const norm = take(tf.tidy(() => tf.sqrt(tf.addN(Object.values(grads).map((g) => tf.sum(tf.square(g)))))));
  if (!Number.isFinite(norm)) throw new Error(`non-finite gradient norm (${norm}); the weights were not updated`);
  // Clipping: g <- g * min(1, maxNorm / ||g||)
  const scale = Math.min(1, maxNorm / norm);
  return { norm, clipped: Object.fromEntries(Object.entries(grads).map(([name, g]) => [name, tf.mul(g, scale)])) };
}

/** Throws, naming the setting, unless `value` is a finite number > 0. */
function positive(name: string, value: number): void {
  if (!(Number.isFinite(value) && value > 0)) throw new Error(`${name} must be a finite number > 0, got ${value}`);
}

/** `parts` in order, in chunks of whole parts of at most `packTokens` distinct tokens (one part at least). */
function chunksOf<S extends MaskedSequence>(parts: readonly S[][], packTokens: number): { chunk: S[][]; firstPart: number }[] {
  const chunks: { chunk: S[][]; firstPart: number }[] = [];
  let tokens = 0;
  parts.forEach((part, index) => {
    const size = part[0].ids.length;
    const current = chunks.at(-1);
    if (current && tokens + size <= packTokens) {
      current.chunk.push(part);
      tokens += size;
    } else {
      chunks.push({ chunk: [part], firstPart: index });
      tokens = size;
    }
  });
  return chunks;
}

/** `items` as `parts` contiguous runs whose lengths differ by at most one. */
function split<T>(items: readonly T[], parts: number): T[][] {
  return Array.from({ length: parts }, (_, k) => items.slice(Math.floor((k * items.length) / parts), Math.floor(((k + 1) * items.length) / parts)));
}

function disposeState({ params, m, v }: SavedState): void {
  tf.dispose([...Object.values(params), ...Object.values(m), ...Object.values(v)]);
}

function zeroState({ params }: ModelWeights): OptimizerState {
  const zeros = () => Object.fromEntries(Object.entries(params).map(([name, values]) => [name, new Float32Array(values.length)]));
  return { step: 0, m: zeros(), v: zeros() };
}

function copyValues(tensors: Params): Record<string, Float32Array> {
  return Object.fromEntries(Object.entries(tensors).map(([name, tensor]) => [name, new Float32Array(tensor.dataSync() as Float32Array)]));
}

/** Each part's first row of `logprobs` [rows, width] (rows: the parts' samples in turn), cut to its sequence's n-1 targets. */
function firstRowsOfParts(logprobs: tf.Tensor, chunk: readonly MaskedSequence[][]): Float32Array[] {
  const values = logprobs.dataSync() as Float32Array;
  const width = logprobs.shape[1]!;
  let row = 0;
  return chunk.map((part) => {
    const first = values.slice(row * width, row * width + part[0].ids.length - 1);
    row += part.length;
    return first;
  });
}

/** The value of a one-element tensor. */
function read(tensor: tf.Tensor): number {
  return tensor.dataSync()[0];
}

/** `read`, then disposes the tensor. */
function take(tensor: tf.Tensor): number {
  const value = read(tensor);
  tensor.dispose();
  return value;
}

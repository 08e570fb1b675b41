/**
 * The trainer scores only trained targets (`targetLogprobs`, through `maskedLogprobs` and the
 * reference logprobs); everything the loss reads must be what the full sequence (`tokenLogprobs`)
 * gives: logprobs at trained targets, and the loss and gradients of a minibatch computed as
 * PolicyTrainer computes them (one gradient per chunk of sequences run as one packed pass,
 * share-weighted), whether a chunk holds one sequence or the whole minibatch.
 */
import * as tf from '@tensorflow/tfjs-core';
import { createRng, type Rng } from '../src/core/random';
import { initBackend } from '../src/model/backend';
import { modelConfig, type ModelConfig } from '../src/model/config';
import { sequenceLogprobs, targetLogprobs, tokenLogprobs, type TensorWeights } from '../src/model/transformer';
import { initWeights, parameterSpecs } from '../src/model/weights';
import '../src/rl/gradients';
import {
  aggregationShare,
  lossInputs,
  maskedLogprobs,
  policyLoss,
  supervisedLoss,
  trainedTargets,
  type LossConfig,
  type LossInputs,
  type TrainingSample,
} from '../src/rl/loss';
import { LossConfigSchema } from '../config/schema';

/** The loss as a run's config sets it by default, at temperature 1. */
const DEFAULT_LOSS_CONFIG: LossConfig = { ...LossConfigSchema.parse({}), temperature: 1 };

beforeAll(() => initBackend());

const TEMPERATURE = 0.8;

/** Variables at 5x the init scale (std 0.1), so that logprobs and gradients vary visibly. */
function policyOf(config: ModelConfig, seed: number): TensorWeights {
  const initial = initWeights(config, seed);
  const params = Object.fromEntries(
    parameterSpecs(config).map(({ name, shape, init }) => {
      const values = init.kind === 'normal' ? initial.params[name].map((x) => 5 * x) : initial.params[name];
      return [name, tf.variable(tf.tensor(values, [...shape]))];
    }),
  );
  return { config, params };
}

/** Loss masks (aligned with n ids) of every shape the trainer meets; mask[0] is always 0. */
const MASKS: Record<string, (n: number, rng: Rng) => number[]> = {
  'trailing run': (n) => Array.from({ length: n }, (_, i) => (i >= n - 4 ? 1 : 0)),
  'run, then untrained tokens': (n) => Array.from({ length: n }, (_, i) => (i >= 3 && i < n - 5 ? 1 : 0)),
  'runs, one per turn': (n) => Array.from({ length: n }, (_, i) => (i % 9 >= 6 ? 1 : 0)),
  scattered: (n, rng) => Array.from({ length: n }, (_, i) => (i > 0 && (rng() < 0.3 || i === 1) ? 1 : 0)),
  'single token': (n) => Array.from({ length: n }, (_, i) => (i === n >> 1 ? 1 : 0)),
  'every target': (n) => Array.from({ length: n }, (_, i) => (i > 0 ? 1 : 0)),
};

/** One sample per mask shape, random ids of random lengths, behaviour logprobs near the policy's. */
function samplesFor(policy: TensorWeights, rng: Rng): TrainingSample[] {
  return Object.values(MASKS).map((maskOf, b) => {
    const n = 12 + Math.floor(rng() * 20);
    const ids = Array.from({ length: n }, () => Math.floor(rng() * policy.config.vocabSize));
    const current = sequenceLogprobs(policy, ids, TEMPERATURE);
    return {
      ids,
      lossMask: maskOf(n, rng),
      behaviourLogprobs: [0, ...Array.from(current, (lp, t) => Math.min(0, lp + 0.3 * Math.sin(3 * t + b)))],
      advantage: rng() * 2 - 1,
    };
  });
}

/** The loss inputs of one sample from the full sequence, as the trainer built them before. */
function fullInputs(policy: TensorWeights, sample: TrainingSample, refLogprobs?: Float32Array): LossInputs {
  const { ids, lossMask, behaviourLogprobs, advantage } = sample;
  return {
    logprobs: tf.expandDims(tokenLogprobs(policy, ids, TEMPERATURE), 0) as tf.Tensor2D,
    mask: tf.tensor2d([lossMask.slice(1)]),
    behaviourLogprobs: tf.tensor2d([behaviourLogprobs.slice(1)]),
    advantages: tf.tensor1d([advantage]),
    ...(refLogprobs ? { refLogprobs: tf.tensor2d([Array.from(refLogprobs)]) } : {}),
  };
}

/** loss(minibatch) and its gradient per parameter as PolicyTrainer sums them: share_c * loss(chunk c). */
function minibatchGradients(
  policy: TensorWeights,
  chunks: TrainingSample[][],
  lossOf: (chunk: TrainingSample[], i: number) => tf.Scalar,
  aggregation: LossConfig['aggregation'],
) {
  const names = Object.keys(policy.params);
  const variables = names.map((name) => policy.params[name] as tf.Variable);
  const minibatch = chunks.flat();
  let loss = 0;
  const grads: Record<string, Float32Array> = Object.fromEntries(names.map((name) => [name, new Float32Array(policy.params[name].size)]));
  chunks.forEach((chunk, i) => {
    const share = aggregationShare(chunk, minibatch, aggregation);
    const { value, grads: chunkGrads } = tf.variableGrads(() => tf.mul(lossOf(chunk, i), share), variables);
    loss += value.dataSync()[0];
    names.forEach((name, p) => chunkGrads[variables[p].name].dataSync().forEach((g, j) => (grads[name][j] += g)));
    tf.dispose([value, ...Object.values(chunkGrads)]);
  });
  return { loss, grads };
}

/** One packed pass over `minibatch` gives the loss and gradients of one full pass per sample. */
function expectOnePassLikeFull(policy: TensorWeights, minibatch: TrainingSample[], lossConfig: LossConfig): void {
  const { aggregation } = lossConfig;
  const packed = minibatchGradients(policy, [minibatch], (all) => policyLoss(lossInputs(policy, all, TEMPERATURE), lossConfig).loss, aggregation);
  const full = minibatchGradients(
    policy,
    minibatch.map((sample) => [sample]),
    ([sample]) => policyLoss(fullInputs(policy, sample), lossConfig).loss,
    aggregation,
  );
  expect(Math.abs(packed.loss - full.loss)).toBeLessThanOrEqual(1e-4 * Math.abs(full.loss) + 1e-7);
  expectGradientsClose(packed.grads, full.grads);
}

function expectGradientsClose(actual: Record<string, Float32Array>, expected: Record<string, Float32Array>): void {
  for (const [name, want] of Object.entries(expected)) {
    const scale = Math.max(...want.map(Math.abs));
    const worst = Math.max(...actual[name].map((g, j) => Math.abs(g - want[j])));
    if (!(worst <= 1e-4 * scale + 1e-9)) throw new Error(`gradient of ${name}: off by ${worst} (largest entry ${scale})`);
  }
}

describe.each([
  ['2 blocks', modelConfig({ dModel: 16, nLayers: 2, nHeads: 2, dFF: 32, maxContext: 64 })],
  ['1 block', modelConfig({ dModel: 16, nLayers: 1, nHeads: 4, dFF: 32, maxContext: 64 })],
  ['3 blocks', modelConfig({ dModel: 8, nLayers: 3, nHeads: 2, dFF: 16, maxContext: 64 })],
])('trained positions only, %s', (_, config) => {
  let policy: TensorWeights;
  let samples: TrainingSample[];
  beforeAll(() => {
    policy = policyOf(config, 11);
    samples = samplesFor(policy, createRng(config.nLayers));
  });
  afterAll(() => tf.dispose(Object.values(policy.params)));

  it('gives the full sequence logprobs at trained targets, 0 elsewhere', () => {
    tf.tidy(() => {
      const { logprobs, mask } = maskedLogprobs(policy, samples, TEMPERATURE);
      const [rows, masks] = [logprobs.arraySync(), mask.arraySync()];
      samples.forEach(({ ids }, b) => {
        const full = sequenceLogprobs(policy, ids, TEMPERATURE);
        rows[b].forEach((value, t) => {
          if (masks[b][t] === 1) expect(Math.abs(value - full[t])).toBeLessThan(1e-5);
          else expect(value).toBe(0);
        });
      });
    });
  });

  it.each<[string, Partial<LossConfig>]>([
    ['token-mean', { aggregation: 'token-mean' }],
    ['sequence-mean-token-mean', { aggregation: 'sequence-mean-token-mean' }],
    ['KL to a reference (k3)', { beta: 0.1, kl: 'k3' }],
  ])('gives the loss and gradients of the full computation: %s', (_, overrides) => {
    const lossConfig: LossConfig = { ...DEFAULT_LOSS_CONFIG, temperature: TEMPERATURE, ...overrides };
    const reference = lossConfig.beta > 0 ? policyOf(config, 12) : undefined;
    // Reference logprobs as the trainer reads them now (trained targets only), and in full.
    const refTrained = reference && samples.map(({ ids, lossMask }) => sequenceLogprobs(reference, ids, TEMPERATURE, trainedTargets(lossMask)));
    const refFull = reference && samples.map(({ ids }) => sequenceLogprobs(reference, ids, TEMPERATURE));
    const single = samples.map((sample) => [sample]);
    const trained = minibatchGradients(
      policy,
      single,
      (chunk, i) => policyLoss(lossInputs(policy, chunk, TEMPERATURE, refTrained && [refTrained[i]]), lossConfig).loss,
      lossConfig.aggregation,
    );
    const full = minibatchGradients(
      policy,
      single,
      ([sample], i) => policyLoss(fullInputs(policy, sample, refFull?.[i]), lossConfig).loss,
      lossConfig.aggregation,
    );
    if (reference) tf.dispose(Object.values(reference.params));
    expect(Math.abs(trained.loss - full.loss)).toBeLessThanOrEqual(1e-4 * Math.abs(full.loss) + 1e-7);
    expectGradientsClose(trained.grads, full.grads);
  });

  it.each<[string, LossConfig['aggregation']]>([
    ['token-mean', 'token-mean'],
    ['sequence-mean-token-mean', 'sequence-mean-token-mean'],
  ])('gives the loss and gradients of the full computation from one packed pass over the minibatch: %s', (_, aggregation) => {
    const lossConfig: LossConfig = { ...DEFAULT_LOSS_CONFIG, temperature: TEMPERATURE, aggregation };
    // A recurring sample, as per-turn samples recur: its rows come from one scored sequence.
    const minibatch = [...samples, samples[1]];
    expectOnePassLikeFull(policy, minibatch, lossConfig);
  });

  it('gives the loss and gradients of the full computation from one packed pass over copies of one sample', () => {
    const lossConfig: LossConfig = { ...DEFAULT_LOSS_CONFIG, temperature: TEMPERATURE };
    const copies = [samples[0], { ...samples[0], advantage: -samples[0].advantage / 2 }, samples[0]];
    expectOnePassLikeFull(policy, copies, lossConfig);
  });

  it('gives the loss and gradients of the full computation when the sequences share a prefix (run once)', () => {
    const lossConfig: LossConfig = { ...DEFAULT_LOSS_CONFIG, temperature: TEMPERATURE };
    // A system prompt every turn starts with, then turns of their own, trained at their end.
    const rng = createRng(7);
    const prefix = Array.from({ length: 14 }, () => Math.floor(rng() * policy.config.vocabSize));
    const minibatch: TrainingSample[] = [3, 9, 1, 6].map((ownLength, b) => {
      const ids = [...prefix, ...Array.from({ length: ownLength }, () => Math.floor(rng() * policy.config.vocabSize))];
      const current = sequenceLogprobs(policy, ids, TEMPERATURE);
      return {
        ids,
        lossMask: ids.map((_, i) => (i >= ids.length - Math.min(ownLength, 3) ? 1 : 0)),
        behaviourLogprobs: [0, ...Array.from(current, (lp, t) => Math.min(0, lp + 0.3 * Math.sin(3 * t + b)))],
        advantage: rng() * 2 - 1,
      };
    });
    expectOnePassLikeFull(policy, minibatch, lossConfig);
  });

  it('gives the supervised loss and gradients of the full computation', () => {
    const single = samples.map((sample) => [sample]);
    const trained = minibatchGradients(policy, single, (chunk) => supervisedLoss(maskedLogprobs(policy, chunk, TEMPERATURE)), 'token-mean');
    const full = minibatchGradients(policy, single, ([sample]) => supervisedLoss(fullInputs(policy, sample)), 'token-mean');
    expect(Math.abs(trained.loss - full.loss)).toBeLessThanOrEqual(1e-4 * Math.abs(full.loss));
    expectGradientsClose(trained.grads, full.grads);
  });
});

describe('targetLogprobs', () => {
  it('rejects positions that are not ascending targets of the sequence', () => {
    const config = modelConfig({ dModel: 8, nLayers: 1, nHeads: 2, dFF: 16, maxContext: 16 });
    const policy = policyOf(config, 1);
    const ids = [1, 2, 3, 4, 5];
    for (const positions of [[], [4], [-1], [2, 1], [1, 1], [0.5]]) {
      expect(() => tf.tidy(() => targetLogprobs(policy, ids, positions, 1))).toThrow(/ascending positions in 0\.\.3/);
    }
    tf.dispose(Object.values(policy.params));
  });
});

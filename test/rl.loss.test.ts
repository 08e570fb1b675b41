import * as tf from '@tensorflow/tfjs-core';
import { initBackend } from '../src/model/backend';
import { modelConfig } from '../src/model/config';
import { parameterSpecs, initWeights } from '../src/model/weights';
import { disposeTensorWeights, prefill, sequenceLogprobs, targetDistributions, toTensorWeights, type TensorWeights } from '../src/model/transformer';
import '../src/rl/gradients';
import {
  answerStarts,
  lossConfigProblem,
  lossInputs,
  policyLoss,
  sameSequenceParts,
  trainedTargets,
  type LossConfig,
  type LossInputs,
  type TrainingSample,
} from '../src/rl/loss';
import { LossConfigSchema } from '../config/schema';
import LOSS_FIXTURE from './fixtures/twins/loss.json';

/** The loss as a run's config sets it by default, at temperature 1. */
const DEFAULT_LOSS_CONFIG: LossConfig = { ...LossConfigSchema.parse({}), temperature: 1 };

beforeAll(() => initBackend());

/** The twins' fixed inputs and hand-worked cases (shared with python/tests/test_trainer_loss.py). */
const TWINS = LOSS_FIXTURE as LossFixture;

interface LossFixture {
  inputs: Record<'logprobs' | 'behaviourLogprobs' | 'mask' | 'refLogprobs' | 'oldLogprobs', number[][]> & { advantages: number[] };
  config: Partial<LossConfig>;
  cases: {
    name: string;
    config: Partial<LossConfig>;
    with?: Partial<Record<'refLogprobs' | 'oldLogprobs', 'refLogprobs' | 'oldLogprobs' | 'behaviourLogprobs'>>;
    expected: Partial<Record<'loss' | 'clipFraction' | 'approxKl' | 'entropy' | 'refKl' | 'tisWeight' | 'tisCappedFraction', number>> & { gradient?: number[] };
  }[];
}

const FIXED = {
  ...TWINS.inputs,
  // The policy's entropy where each token was drawn; the padding's 9 must not count.
  entropies: [
    [0.5, 1.0, 1.5],
    [2.0, 0.25, 9],
  ],
  // The coverage of the reference where each token was drawn; the padding's 7 must not count.
  coverage: [
    [0.4, 0.1, 0.3],
    [0.2, 0.6, 7],
  ],
};

function fixedInputs(withRef = false, withEntropies = false, withCoverage = false): LossInputs {
  return {
    logprobs: tf.tensor2d(FIXED.logprobs),
    behaviourLogprobs: tf.tensor2d(FIXED.behaviourLogprobs),
    mask: tf.tensor2d(FIXED.mask),
    advantages: tf.tensor1d(FIXED.advantages),
    ...(withRef ? { refLogprobs: tf.tensor2d(FIXED.refLogprobs) } : {}),
    ...(withEntropies ? { entropies: tf.tensor2d(FIXED.entropies) } : {}),
    ...(withCoverage ? { coverage: tf.tensor2d(FIXED.coverage) } : {}),
  };
}

function evaluate(config: Partial<LossConfig>, withRef = false, withEntropies = false, withCoverage = false) {
  return tf.tidy(() => {
    const { loss, metrics } = policyLoss(fixedInputs(withRef, withEntropies, withCoverage), { ...DEFAULT_LOSS_CONFIG, ...config });
    const value = (t?: tf.Scalar) => (t ? t.dataSync()[0] : undefined);
    return {
      loss: value(loss)!,
      clipFraction: value(metrics.clipFraction)!,
      approxKl: value(metrics.approxKl)!,
      entropy: value(metrics.entropy)!,
      refKl: value(metrics.refKl),
      coverage: value(metrics.coverage),
    };
  });
}

/** The plain loss (the token-mean case) that the TypeScript-only terms below add to. */
const TOKEN_MEAN = TWINS.cases[0].expected.loss!;

describe('policyLoss on the twins fixture (test/fixtures/twins/loss.json)', () => {
  it.each(TWINS.cases)('$name', ({ config, with: optional = {}, expected }) => {
    const fullConfig: LossConfig = { ...DEFAULT_LOSS_CONFIG, ...TWINS.config, ...config };
    const inputs: LossInputs = { ...fixedInputs() };
    for (const [input, source] of Object.entries(optional)) inputs[input as 'refLogprobs' | 'oldLogprobs'] = tf.tensor2d(TWINS.inputs[source]);
    const { gradient, ...values } = expected;
    const actual = tf.tidy(() => {
      const { loss, metrics } = policyLoss(inputs, fullConfig);
      const scalars: Record<string, tf.Scalar | undefined> = { loss, ...metrics };
      return Object.fromEntries(Object.keys(values).map((key) => [key, scalars[key]?.dataSync()[0]]));
    });
    for (const [key, value] of Object.entries(values)) expect([key, actual[key]]).toEqual([key, expect.closeTo(value, 5)]);
    if (gradient) {
      const grad = tf.grad((logprobs: tf.Tensor) => policyLoss({ ...inputs, logprobs: logprobs as tf.Tensor2D }, fullConfig).loss)(inputs.logprobs);
      Array.from(grad.dataSync()).forEach((value, i) => expect(value).toBeCloseTo(gradient[i], 6));
      grad.dispose();
    }
    tf.dispose(Object.values(inputs));
  });
});

describe('policyLoss on fixed inputs', () => {
  it('needs reference logprobs when beta > 0', () => {
    expect(() => evaluate({ beta: 0.1 })).toThrow(/beta > 0 needs reference logprobs/);
  });

  // Masked entropies 0.5, 1.0, 1.5 | 2.0, 0.25: mean 1.05
  it("an entropy bonus subtracts c x the masked tokens' entropy, and pushes each of them up by c / N", () => {
    expect(evaluate({ entropyBonus: 0.1 }, false, true).loss).toBeCloseTo(TOKEN_MEAN - 0.1 * 1.05, 5);
    expect(evaluate({ entropyBonus: 0 }, false, true).loss).toBeCloseTo(TOKEN_MEAN, 5);
    const inputs = fixedInputs(false, true);
    const config = { ...DEFAULT_LOSS_CONFIG, entropyBonus: 0.1 };
    const grad = tf.grad((entropies: tf.Tensor) => policyLoss({ ...inputs, entropies: entropies as tf.Tensor2D }, config).loss)(inputs.entropies!);
    expect(Array.from(grad.dataSync()).map((g) => Number(g.toFixed(6)))).toEqual([-0.02, -0.02, -0.02, -0.02, -0.02, 0]);
    tf.dispose([grad, ...Object.values(inputs)]);
    expect(() => evaluate({ entropyBonus: 0.1 })).toThrow(/entropyBonus > 0 needs the policy entropies/);
  });

  it('an entropy bonus at answer-start is paid on the first trained token of each answer alone', () => {
    // Both rows start their answer at the first target: entropies 0.5 and 2.0, over 5 tokens.
    expect(evaluate({ entropyBonus: 0.1, entropyBonusTokens: 'answer-start' }, false, true).loss).toBeCloseTo(TOKEN_MEAN - (0.1 * 2.5) / 5, 5);
    const inputs = fixedInputs(false, true);
    const config: LossConfig = { ...DEFAULT_LOSS_CONFIG, entropyBonus: 0.1, entropyBonusTokens: 'answer-start' };
    const grad = tf.grad((entropies: tf.Tensor) => policyLoss({ ...inputs, entropies: entropies as tf.Tensor2D }, config).loss)(inputs.entropies!);
    expect(Array.from(grad.dataSync()).map((g) => Number(g.toFixed(6)))).toEqual([-0.02, 0, 0, -0.02, 0, 0]);
    tf.dispose([grad, ...Object.values(inputs)]);
  });

  // Masked coverage 0.4, 0.1, 0.3 | 0.2, 0.6; answer starts 0.4 | 0.2
  it('coverage adds its weight x the coverage at the tokens it is paid on, and lifts each by weight / N', () => {
    const all = evaluate({ coverage: { weight: 0.5, tokens: 'all' } }, false, false, true);
    expect(all.loss).toBeCloseTo(TOKEN_MEAN + (0.5 * 1.6) / 5, 5);
    expect(all.coverage).toBeCloseTo(1.6 / 5, 5);
    const starts = evaluate({ coverage: { weight: 0.5, tokens: 'answer-start' } }, false, false, true);
    expect(starts.loss).toBeCloseTo(TOKEN_MEAN + (0.5 * 0.6) / 5, 5);
    // The metric is the mean over the tokens it is paid on: the two answer starts.
    expect(starts.coverage).toBeCloseTo(0.3, 5);
    expect(evaluate({}, false, false, true).coverage).toBeUndefined();
    const inputs = fixedInputs(false, false, true);
    const config: LossConfig = { ...DEFAULT_LOSS_CONFIG, coverage: { weight: 0.5, tokens: 'answer-start' } };
    const grad = tf.grad((values: tf.Tensor) => policyLoss({ ...inputs, coverage: values as tf.Tensor2D }, config).loss)(inputs.coverage!);
    expect(Array.from(grad.dataSync()).map((g) => Number(g.toFixed(6)))).toEqual([0.1, 0, 0, 0.1, 0, 0]);
    tf.dispose([grad, ...Object.values(inputs)]);
    expect(() => evaluate({ coverage: { weight: 0.1, tokens: 'all' } })).toThrow(/coverage needs the coverage per token/);
    expect(lossConfigProblem({ ...DEFAULT_LOSS_CONFIG, coverage: { weight: -1, tokens: 'all' } })).toMatch(
      /coverage.weight must be a finite number > 0, got -1/,
    );
    expect(lossConfigProblem({ ...DEFAULT_LOSS_CONFIG, coverage: { weight: 1, floor: 2, tokens: 'all' } })).toMatch(
      /coverage.floor must be in \(0, 1\], got 2/,
    );
  });

  it("tis needs the trainer's logprobs before the step, and a cap of at least 1", () => {
    expect(() => evaluate({ tis: { cap: 2 } })).toThrow(/tis needs the trainer's logprobs before the step/);
    expect(lossConfigProblem({ ...DEFAULT_LOSS_CONFIG, tis: { cap: 0.5 } })).toMatch(/tis.cap must be a finite number >= 1, got 0.5/);
  });

  it('answerStarts marks where each run of trained tokens begins, packed answers included', () => {
    const starts = tf.tidy(() =>
      answerStarts(
        tf.tensor2d([
          [0, 1, 1, 0, 0, 1, 1],
          [1, 0, 1, 1, 1, 0, 0],
        ]),
      ).arraySync(),
    );
    expect(starts).toEqual([
      [0, 1, 0, 0, 0, 1, 0],
      [1, 0, 1, 0, 0, 0, 0],
    ]);
  });
});

describe('gradient of the loss through the model', () => {
  const config = modelConfig({ dModel: 8, nLayers: 1, nHeads: 2, dFF: 16, maxContext: 16 });

  it('matches central finite differences', () => {
    // Weights 10x the usual scale (std 0.2), so the loss depends visibly on each of them.
    const initial = initWeights(config, 3);
    const variables: Record<string, tf.Variable> = {};
    for (const { name, shape, init } of parameterSpecs(config)) {
      const values = init.kind === 'normal' ? initial.params[name].map((x) => 10 * x) : initial.params[name];
      variables[name] = tf.variable(tf.tensor(values, [...shape]));
    }
    const policy: TensorWeights = { config, params: variables };
    const temperature = 0.8;
    const lossConfig: LossConfig = { ...DEFAULT_LOSS_CONFIG, beta: 0.05, kl: 'k3', entropyBonus: 0.05, coverage: { weight: 0.2, tokens: 'all' }, temperature };
    const sequences = [
      { ids: [257, 258, 65, 66, 261, 260, 67, 68, 261], lossMask: [0, 0, 0, 0, 0, 0, 1, 1, 1], advantage: 0.7 },
      { ids: [257, 259, 70, 71, 72, 261, 260, 80, 81, 82, 261], lossMask: [0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1], advantage: -1.2 },
    ];
    // Behaviour and reference logprobs a little off the policy's, inside the clip range.
    const current = sequences.map(({ ids }) => Array.from(sequenceLogprobs(policy, ids, temperature)));
    const samples: TrainingSample[] = sequences.map((s, b) => ({
      ...s,
      behaviourLogprobs: [0, ...current[b].map((lp, t) => lp + 0.05 * Math.sin(3 * t + b))],
    }));
    const refLogprobs = current.map((logprobs, b) => logprobs.map((lp, t) => lp - 0.1 * Math.cos(2 * t + b)));
    // The coverage KL's reference: another model's distributions at the trained targets.
    const reference = toTensorWeights(initWeights(config, 11));
    const refDistributions = sequences.map(({ ids, lossMask }) => targetDistributions(reference, ids, trainedTargets(lossMask), temperature));
    disposeTensorWeights(reference);
    const extras = { entropy: true, coverage: { refDistributions } };
    const lossValue = () => tf.tidy(() => policyLoss(lossInputs(policy, samples, temperature, refLogprobs, extras), lossConfig).loss.dataSync()[0]);

    const { value, grads } = tf.variableGrads(() => policyLoss(lossInputs(policy, samples, temperature, refLogprobs, extras), lossConfig).loss);
    const checks: [string, number][] = [
      ['head', 3 * 264 + 67],
      ['head', 5 * 264 + 81],
      ['layers.0.attn.wqkv', 2 * 24 + 1],
      ['layers.0.attn.wqkv', 6 * 24 + 13],
      ['layers.0.attn.wqkv', 4 * 24 + 20],
      ['layers.0.attn.wo', 9],
      ['layers.0.mlp.w1', 37],
      ['layers.0.mlp.w2', 50],
      ['layers.0.ln1.gain', 2],
      ['final.ln.bias', 5],
      ['embed.tokens', 66 * 8 + 4],
      ['embed.positions', 3 * 8 + 1],
    ];
    const h = 1e-2;
    const rows: string[] = [];
    for (const [name, index] of checks) {
      const variable = variables[name];
      const base = variable.dataSync().slice() as Float32Array;
      const at = (delta: number) => {
        const values = base.slice();
        values[index] += delta;
        variable.assign(tf.tensor(values, variable.shape));
        return lossValue();
      };
      const numeric = (at(h) - at(-h)) / (2 * h);
      variable.assign(tf.tensor(base, variable.shape));
      const analytic = grads[variable.name].dataSync()[index];
      rows.push(`${name}[${index}]: analytic ${analytic.toExponential(4)} numeric ${numeric.toExponential(4)}`);
      expect(Math.abs(analytic - numeric)).toBeLessThanOrEqual(2e-4 + 2e-2 * Math.abs(analytic));
    }
    console.log(`loss ${value.dataSync()[0].toFixed(5)}; gradient check:\n${rows.join('\n')}`);
    tf.dispose([value, ...Object.values(grads), ...Object.values(variables)]);
  });
});

/** One answer of three trained tokens after a prompt of six, for the per-target scores below. */
const ANSWER: TrainingSample = {
  ids: [257, 258, 65, 66, 261, 260, 67, 68, 261],
  lossMask: [0, 0, 0, 0, 0, 0, 1, 1, 1],
  behaviourLogprobs: [0, 0, 0, 0, 0, 0, -1, -1, -1],
  advantage: 1,
};

/** log softmax(logits / temperature) after `prefix`, by prefill: target t's distribution is the one after ids[0..t]. */
function prefillLogSoftmax(weights: TensorWeights, prefix: number[], temperature: number): number[] {
  const logits = Array.from(prefill(weights, prefix).logits, (x) => x / temperature);
  const top = Math.max(...logits);
  const logZ = top + Math.log(logits.reduce((sum, x) => sum + Math.exp(x - top), 0));
  return logits.map((x) => x - logZ);
}

describe('policy entropies at the trained tokens', () => {
  const config = modelConfig({ dModel: 8, nLayers: 1, nHeads: 2, dFF: 16, maxContext: 16 });

  it('are the entropies of the whole next-token distributions there, at the temperature; 0 elsewhere', () => {
    const policy = toTensorWeights(initWeights(config, 7));
    const temperature = 0.8;
    const entropies = tf.tidy(() => Array.from(lossInputs(policy, [ANSWER], temperature, undefined, { entropy: true }).entropies!.dataSync()));
    const expected = ANSWER.ids.slice(1).map((_, t) => {
      if (ANSWER.lossMask[t + 1] === 0) return 0;
      const logp = prefillLogSoftmax(policy, ANSWER.ids.slice(0, t + 1), temperature);
      return -logp.reduce((sum, lp) => sum + Math.exp(lp) * lp, 0);
    });
    expect(expected.filter((h) => h > 0)).toHaveLength(3);
    entropies.forEach((h, t) => expect(h).toBeCloseTo(expected[t], 4));
    disposeTensorWeights(policy);
  });
});

describe('coverage of a reference at the trained tokens', () => {
  const config = modelConfig({ dModel: 8, nLayers: 1, nHeads: 2, dFF: 16, maxContext: 16 });
  const temperature = 0.8;
  const sample = ANSWER;
  const logSoftmax = (weights: TensorWeights, prefix: number[]) => prefillLogSoftmax(weights, prefix, temperature);
  /** At each target: the sum over the vocabulary of q(v) shortfall(log q(v), log p(v)), by prefill; 0 at untrained targets. */
  const expectedCoverage = (policy: TensorWeights, reference: TensorWeights, shortfall: (lq: number, lp: number) => number) =>
    sample.ids.slice(1).map((_, t) => {
      if (sample.lossMask[t + 1] === 0) return 0;
      const [p, q] = [logSoftmax(policy, sample.ids.slice(0, t + 1)), logSoftmax(reference, sample.ids.slice(0, t + 1))];
      return q.reduce((sum, lq, v) => sum + Math.exp(lq) * shortfall(lq, p[v]), 0);
    });

  it('is KL(reference || policy) of the whole next-token distributions there, at the temperature, or its part below a floor; 0 elsewhere', () => {
    const policy = toTensorWeights(initWeights(config, 7));
    const reference = toTensorWeights(initWeights(config, 8));
    const refDistributions = [targetDistributions(reference, sample.ids, trainedTargets(sample.lossMask), temperature)];
    const coverage = (floor?: number) =>
      tf.tidy(() =>
        // A repeat of the sample shares its part's reference distributions.
        lossInputs(policy, [sample, { ...sample }], temperature, undefined, {
          coverage: { refDistributions: [...refDistributions, ...refDistributions], floor },
        }).coverage!.arraySync(),
      );
    const kl = expectedCoverage(policy, reference, (lq, lp) => lq - lp);
    expect(kl.filter((value) => value > 0)).toHaveLength(3);
    for (const row of coverage()) row.forEach((value, t) => expect(value).toBeCloseTo(kl[t], 4));
    // Floor 1: only the tokens the policy gives less than the reference count, so more than the
    // KL, in which the others offset them; a lower floor counts fewer.
    for (const floor of [1, 0.995]) {
      const belowFloor = expectedCoverage(policy, reference, (lq, lp) => Math.max(0, Math.log(floor) + lq - lp));
      for (const row of coverage(floor)) row.forEach((value, t) => expect(value).toBeCloseTo(belowFloor[t], 6));
    }
    const [atOne, lower] = [1, 0.995].map((floor) => expectedCoverage(policy, reference, (lq, lp) => Math.max(0, Math.log(floor) + lq - lp)));
    atOne.forEach((value, t) => {
      if (sample.lossMask[t + 1] === 0) return;
      expect(value).toBeGreaterThan(kl[t]);
      expect(lower[t]).toBeLessThan(value);
      expect(lower[t]).toBeGreaterThan(0);
    });
    expect(() =>
      tf.tidy(() => lossInputs(policy, [sample], temperature, undefined, { coverage: { refDistributions: [refDistributions[0].subarray(1)] } }).logprobs),
    ).toThrow(/sample 0: \d+ reference distribution values, expected \d+ \(trained targets x vocabSize\)/);
    disposeTensorWeights(policy);
    disposeTensorWeights(reference);
  });

  it('is 0 with a floor where the policy covers the reference: itself', () => {
    const policy = toTensorWeights(initWeights(config, 7));
    const refDistributions = [targetDistributions(policy, sample.ids, trainedTargets(sample.lossMask), temperature)];
    const values = tf.tidy(() => lossInputs(policy, [sample], temperature, undefined, { coverage: { refDistributions, floor: 0.9 } }).coverage!.dataSync());
    expect(Array.from(values)).toEqual(new Array(values.length).fill(0));
    disposeTensorWeights(policy);
  });
});

describe('a sequence that recurs in a batch', () => {
  const config = modelConfig({ dModel: 8, nLayers: 1, nHeads: 2, dFF: 16, maxContext: 16 });
  const a = { ids: [257, 258, 65, 66, 261, 260, 67, 68, 261], lossMask: [0, 0, 0, 0, 0, 0, 1, 1, 1] };
  const b = { ids: [257, 259, 70, 71, 261, 260, 80, 261], lossMask: [0, 0, 0, 0, 0, 0, 1, 1] };

  it('is grouped with its repeats, in order of first appearance', () => {
    const repeat = { ids: [...a.ids], lossMask: [...a.lossMask] };
    const otherMask = { ids: [...a.ids], lossMask: [0, 0, 0, 0, 0, 0, 0, 1, 1] };
    expect(sameSequenceParts([a, b, repeat, otherMask])).toEqual([[a, repeat], [b], [otherMask]]);
  });

  it('is run once and gives the loss and gradient of one pass per sample', () => {
    const initial = initWeights(config, 5);
    const variables: Record<string, tf.Variable> = {};
    for (const { name, shape } of parameterSpecs(config)) variables[name] = tf.variable(tf.tensor(initial.params[name], [...shape]));
    const policy: TensorWeights = { config, params: variables };
    const temperature = 0.8;
    const lossConfig: LossConfig = { ...DEFAULT_LOSS_CONFIG, beta: 0.05, temperature };
    const current = (ids: number[]) => Array.from(sequenceLogprobs(policy, ids, temperature));
    // Sequence a sampled twice, by policies a little apart and with different advantages; b once.
    const sample = (s: typeof a, advantage: number, offset: number): TrainingSample => ({
      ...s,
      advantage,
      behaviourLogprobs: [0, ...current(s.ids).map((lp, t) => lp + offset * Math.sin(3 * t))],
    });
    const samples = [sample(a, 0.7, 0.05), sample(b, -1.2, 0.03), sample(a, -0.4, -0.08)];
    const refLogprobs = samples.map(({ ids }) => current(ids).map((lp, t) => lp - 0.1 * Math.cos(2 * t)));
    const variableList = Object.values(variables);
    // Token-mean over the batch, as one pass per sample: sum_i (tokens_i / tokens) loss_i.
    const tokens = samples.map(({ lossMask }) => lossMask.reduce((n, m) => n + m, 0));
    const total = tokens.reduce((x, y) => x + y);
    const perSample = tf.variableGrads(
      () =>
        tf.addN(
          samples.map((s, i) => tf.mul(policyLoss(lossInputs(policy, [s], temperature, [refLogprobs[i]]), lossConfig).loss, tokens[i] / total)),
        ) as tf.Scalar,
      variableList,
    );
    const together = tf.variableGrads(() => policyLoss(lossInputs(policy, samples, temperature, refLogprobs), lossConfig).loss, variableList);
    expect(together.value.dataSync()[0]).toBeCloseTo(perSample.value.dataSync()[0], 6);
    for (const variable of variableList) {
      const expected = perSample.grads[variable.name].dataSync();
      const actual = together.grads[variable.name].dataSync();
      expected.forEach((g, i) => expect(Math.abs(actual[i] - g)).toBeLessThanOrEqual(1e-6 + 1e-4 * Math.abs(g)));
    }
    tf.dispose([perSample.value, together.value, ...Object.values(perSample.grads), ...Object.values(together.grads), ...variableList]);
  });
});

describe('BatchMatMul gradient (replaced in src/rl/gradients.ts)', () => {
  // Each transpose flag must give the gradient of the same product written with explicit transposes.
  it.each([
    [false, false],
    [false, true],
    [true, false],
    [true, true],
  ])('transposeA %s, transposeB %s, rank 2 and 3', (transposeA, transposeB) => {
    for (const batch of [[], [3]]) {
      tf.tidy(() => {
        const swap = (x: tf.Tensor) => tf.transpose(x, batch.length ? [0, 2, 1] : [1, 0]);
        const a = tf.randomNormal(transposeA ? [...batch, 5, 4] : [...batch, 4, 5], 0, 1, 'float32', 1);
        const b = tf.randomNormal(transposeB ? [...batch, 6, 5] : [...batch, 5, 6], 0, 1, 'float32', 2);
        const weights = tf.randomNormal([...batch, 4, 6], 0, 1, 'float32', 3);
        const flagged = tf.grads((x: tf.Tensor, y: tf.Tensor) => tf.sum(tf.mul(tf.matMul(x, y, transposeA, transposeB), weights)))([a, b]);
        const explicit = tf.grads((x: tf.Tensor, y: tf.Tensor) => tf.sum(tf.mul(tf.matMul(transposeA ? swap(x) : x, transposeB ? swap(y) : y), weights)))([
          a,
          b,
        ]);
        flagged.forEach((grad, i) => {
          expect(grad.shape).toEqual(explicit[i].shape);
          expect(tf.max(tf.abs(tf.sub(grad, explicit[i]))).dataSync()[0]).toBeLessThan(1e-5);
        });
      });
    }
  });
});

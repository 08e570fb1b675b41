import * as tf from '@tensorflow/tfjs-core';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { FROZENLAKE_SYSTEM_PROMPT, renderObservation } from '../src/agents/frozenlakeAgent';
import { createRng } from '../src/core/random';
import { encode, renderConversationStart, SPECIAL_TOKENS, STOP_TOKENS } from '../src/core/tokenizer';
import { generateMap } from '../src/envs/frozenlake';
import { modelConfig } from '../src/model/config';
import { BatchingEngine } from '../src/model/engine';
import { initWeights, loadCheckpoint, loadTrainerCheckpoint, saveTrainerCheckpoint, type ModelWeights } from '../src/model/weights';
import { disposeTensorWeights, sequenceLogprobs, toTensorWeights } from '../src/model/transformer';
import { lossInputs, policyLoss, trainedTargets, type LossConfig } from '../src/rl/loss';
import { clipByGlobalNorm, NOTHING_TRAINED, PolicyTrainer, type TrainMetrics, type TrainingSample } from '../src/rl/trainer';
import { LossConfigSchema } from '../config/schema';

/** The loss as a run's config sets it by default, at temperature 1. */
const DEFAULT_LOSS_CONFIG: LossConfig = { ...LossConfigSchema.parse({}), temperature: 1 };

const config = modelConfig({ maxContext: 512 });
const dir = mkdtempSync(path.join(os.tmpdir(), 'trajflow-trainer-'));
const TEMPERATURE = 0.7;

function prompt(i: number): number[] {
  const grid = generateMap(4, 100 + i);
  return renderConversationStart([
    { role: 'system', content: FROZENLAKE_SYSTEM_PROMPT },
    { role: 'user', content: renderObservation({ grid, row: 0, col: 0, size: 4, steps: 0 }) },
  ]);
}

/** `count` completions sampled by `weights`, as training samples with advantages +1, -1, +1, ... */
async function sampleBatch(weights: ModelWeights, count: number): Promise<TrainingSample[]> {
  const engine = await BatchingEngine.create({ weights });
  try {
    const prompts = Array.from({ length: count }, (_, i) => prompt(i));
    const results = await Promise.all(
      prompts.map((promptIds, i) =>
        engine.generate({ promptIds, sampling: { maxTokens: 16, temperature: TEMPERATURE, topP: 1, seed: i, stopTokens: STOP_TOKENS } }),
      ),
    );
    return results.map(({ completionIds, logprobs }, i) => ({
      ids: [...prompts[i], ...completionIds],
      lossMask: [...prompts[i].map(() => 0), ...completionIds.map(() => 1)],
      behaviourLogprobs: [...prompts[i].map(() => 0), ...logprobs],
      advantage: i % 2 === 0 ? 1 : -1,
    }));
  } finally {
    engine.close();
  }
}

/** The parameters whose values differ, with the largest difference (a readable failure, where toEqual would print 100k floats). */
function differences(a: Record<string, Float32Array>, b: Record<string, Float32Array>): string[] {
  return Object.keys({ ...a, ...b }).flatMap((name) => {
    const [x, y] = [a[name], b[name]];
    if (!x || !y || x.length !== y.length) return [`${name}: ${x?.length} vs ${y?.length} values`];
    let largest = 0;
    x.forEach((value, i) => (largest = Math.max(largest, Math.abs(value - y[i]))));
    return largest === 0 && Buffer.from(x.buffer, x.byteOffset, x.byteLength).equals(Buffer.from(y.buffer, y.byteOffset, y.byteLength))
      ? []
      : [`${name}: off by up to ${largest}`];
  });
}

const create = (weights: ModelWeights = initWeights(config, 1), options = {}) =>
  PolicyTrainer.create({ weights, learningRate: 3e-3, loss: { temperature: TEMPERATURE }, ...options });

describe('PolicyTrainer', () => {
  let batch: TrainingSample[];
  beforeAll(async () => {
    batch = await sampleBatch(initWeights(config, 1), 8);
  });

  it('lowers the loss on a fixed batch and keeps it finite', async () => {
    const trainer = await create();
    const metrics = Array.from({ length: 6 }, () => trainer.trainBatch(batch));
    trainer.dispose();
    const losses = metrics.map(({ loss }) => loss);
    console.log(`losses on a fixed batch: ${losses.map((l) => l.toFixed(4)).join(' ')}`);
    expect(losses.every(Number.isFinite)).toBe(true);
    expect(losses[5]).toBeLessThan(losses[0] - 0.05);
    // The first step is on-policy: every ratio is 1, so nothing is clipped and the KL is ~0.
    expect(metrics[0].clipFraction).toBe(0);
    expect(metrics[0].approxKl).toBeLessThan(1e-6);
    expect(metrics[5].clipFraction).toBeGreaterThan(0);
    expect(metrics[0]).toMatchObject({ sequences: 8, tokens: batch.reduce((n, s) => n + s.lossMask.filter((m) => m === 1).length, 0) });
    expect(metrics[0].entropy).toBeGreaterThan(0);
  });

  it('tis weighs by the capped ratio of its own logprobs before the batch to the sampler', async () => {
    // The sampler's logprobs 0.1 below the trainer's: every behaviour ratio is e^0.1.
    const below = batch.map((s) => ({ ...s, behaviourLogprobs: s.behaviourLogprobs.map((lp, t) => (s.lossMask[t] ? lp - 0.1 : lp)) }));
    const train = async (loss: Partial<LossConfig>, optimizerStepsPerBatch = 1) => {
      const trainer = await create(initWeights(config, 1), { loss: { temperature: TEMPERATURE, ...loss }, optimizerStepsPerBatch });
      try {
        return { metrics: trainer.trainBatch(below), weights: trainer.snapshot() };
      } finally {
        trainer.dispose();
      }
    };
    const plain = await train({});
    const uncapped = await train({ tis: { cap: 2 } });
    const capped = await train({ tis: { cap: 1.05 } });
    expect(plain.metrics.tisWeightMean).toBeUndefined();
    expect(uncapped.metrics).toMatchObject({ tisWeightMean: expect.closeTo(Math.exp(0.1), 4), tisCappedFraction: 0 });
    expect(capped.metrics).toMatchObject({ tisWeightMean: expect.closeTo(1.05, 5), tisCappedFraction: 1 });
    // The trainer's ratio to itself is 1, so the loss is the weight's share of the plain one (r = e^0.1, unclipped).
    expect(capped.metrics.loss).toBeCloseTo((plain.metrics.loss * 1.05) / Math.exp(0.1), 4);
    // Below the cap, weight and ratio to the sampler are the same correction: the same update.
    expect(uncapped.metrics.loss).toBeCloseTo(plain.metrics.loss, 5);
    for (const [name, values] of Object.entries(plain.weights.params)) {
      const other = uncapped.weights.params[name];
      expect(Math.max(...values.map((v, i) => Math.abs(v - other[i])))).toBeLessThan(1e-5);
    }
    // A later minibatch is weighed by the policy before the batch, not by the one its first update left.
    expect((await train({ tis: { cap: 2 } }, 2)).metrics.tisWeightMean).toBeCloseTo(Math.exp(0.1), 4);
  });

  it.each<LossConfig['aggregation']>(['token-mean', 'sequence-mean-token-mean'])(
    'sums share-weighted per-sequence losses (and so gradients) into exactly the minibatch loss (%s)',
    async (aggregation) => {
      // Off-policy behaviour logprobs, so ratios differ from 1 and some tokens clip.
      const shifted = (s: TrainingSample, b: number) => s.behaviourLogprobs.map((lp, t) => (s.lossMask[t] ? lp + 0.3 * Math.sin(b + t) : 0));
      const distinct = batch.map((s, b) => ({ ...s, behaviourLogprobs: shifted(s, b) }));
      // Two sequences recur, sampled again with other logprobs and advantages: each is run once for all of its samples.
      const offPolicy = [...distinct, { ...batch[0], behaviourLogprobs: shifted(batch[0], 7), advantage: -0.5 }, { ...distinct[3], advantage: 2 }];
      const weights = initWeights(config, 1);
      const lossConfig = { ...DEFAULT_LOSS_CONFIG, temperature: TEMPERATURE, aggregation };
      const direct = tf.tidy(() => {
        const { loss, metrics } = policyLoss(lossInputs(toTensorWeights(weights), offPolicy, TEMPERATURE), lossConfig);
        return [loss, metrics.clipFraction, metrics.approxKl].map((t) => t.dataSync()[0]);
      });
      const trainer = await create(weights, { loss: lossConfig });
      const metrics = trainer.trainBatch(offPolicy);
      trainer.dispose();
      expect(metrics.loss).toBeCloseTo(direct[0], 5);
      expect(metrics.clipFraction).toBeCloseTo(direct[1], 5);
      expect(metrics.clipFraction).toBeGreaterThan(0);
      expect(metrics.approxKl).toBeCloseTo(direct[2], 5);
      expect(metrics.sequences).toBe(10);
    },
  );

  it("recomputes the sampler's behaviour logprobs for the same weights", async () => {
    const trainer = await create();
    trainer.trainBatch(batch);
    trainer.trainBatch(batch);
    const samples = await sampleBatch(trainer.snapshot(), 8);
    let maxAbsDifference = 0;
    for (const { ids, lossMask, behaviourLogprobs } of samples) {
      const recomputed = trainer.recomputeLogprobs(ids, TEMPERATURE);
      lossMask.forEach((m, i) => {
        if (m === 1) maxAbsDifference = Math.max(maxAbsDifference, Math.abs(recomputed[i - 1] - behaviourLogprobs[i]));
      });
    }
    trainer.dispose();
    console.log(`max |trainer logprob - sampler logprob| over ${samples.length} completions: ${maxAbsDifference.toExponential(2)}`);
    expect(maxAbsDifference).toBeLessThan(1e-4);
  });

  it('clips gradients to the global norm', async () => {
    const grads = { a: tf.tensor1d([3, 0]), b: tf.tensor1d([4]) };
    const { norm, clipped } = clipByGlobalNorm(grads, 1);
    expect(norm).toBeCloseTo(5, 5);
    expect([...clipped.a.dataSync(), ...clipped.b.dataSync()].map((x) => +x.toFixed(6))).toEqual([0.6, 0, 0.8]);
    const unclipped = clipByGlobalNorm(grads, 10);
    expect([...unclipped.clipped.a.dataSync(), ...unclipped.clipped.b.dataSync()]).toEqual([3, 0, 4]);
    tf.dispose([...Object.values(grads), ...Object.values(clipped), ...Object.values(unclipped.clipped)]);
    expect(() => clipByGlobalNorm({ a: tf.tensor1d([Number.NaN]) }, 1)).toThrow(/non-finite gradient norm/);

    // The trainer reports the norm before clipping.
    const trainer = await create(initWeights(config, 1), { maxGradNorm: 1e-3 });
    expect(trainer.trainBatch(batch).gradNorm).toBeGreaterThan(1e-3);
    trainer.dispose();
  });

  it('resumes from a checkpoint with optimizer state exactly where it left off', async () => {
    const trainer = await create();
    trainer.trainBatch(batch);
    trainer.trainBatch(batch);
    const file = path.join(dir, 'resume.ckpt');
    await saveTrainerCheckpoint(file, { ...trainer.checkpoint(), policyVersion: 2 });
    const next = trainer.trainBatch(batch);
    const expected = trainer.snapshot();
    trainer.dispose();

    const loaded = await loadTrainerCheckpoint(file);
    expect(loaded.policyVersion).toBe(2);
    expect(loaded.optimizer?.step).toBe(2);
    const resumed = await create(loaded.weights, { optimizer: loaded.optimizer });
    expect(resumed.trainBatch(batch).loss).toBe(next.loss);
    const actual = resumed.snapshot();
    resumed.dispose();
    for (const [name, values] of Object.entries(expected.params)) expect(actual.params[name]).toEqual(values);

    // The inference engine's loader reads the same file, without the optimizer state.
    const forEngine = await loadCheckpoint(file);
    expect(Object.keys(forEngine).sort()).toEqual(['policyVersion', 'weights']);
    expect(forEngine.weights.params).toEqual(loaded.weights.params);
  });

  it("takes a step's learning rate when given one: Adam's first update scales with it", async () => {
    const start = initWeights(config, 1);
    const largestMove = async (options: { learningRate?: number }) => {
      const trainer = await create(start);
      trainer.trainBatch(batch, options);
      const moved = trainer.snapshot().params;
      trainer.dispose();
      return Math.max(...Object.entries(start.params).map(([name, before]) => Math.max(...before.map((x, i) => Math.abs(moved[name][i] - x)))));
    };
    // Adam's first update is lr m/(sqrt(v) + eps) ~ lr sign(g): at most ~lr per parameter.
    const [own, doubled] = [await largestMove({}), await largestMove({ learningRate: 6e-3 })];
    expect(own).toBeGreaterThan(2e-3);
    expect(doubled / own).toBeCloseTo(2, 2);
    const trainer = await create(start);
    expect(() => trainer.trainBatch(batch, { learningRate: 0 })).toThrow(/learningRate must be a finite number > 0, got 0/);
    trainer.dispose();
  });

  it('penalises KL to a reference policy when beta > 0', async () => {
    await expect(create(initWeights(config, 1), { loss: { beta: 0.1 } })).rejects.toThrow(/beta > 0 needs a reference policy/);
    const weights = initWeights(config, 1);
    const trainer = await create(weights, { reference: weights, loss: { temperature: TEMPERATURE, beta: 0.1 } });
    const first = trainer.trainBatch(batch);
    const second = trainer.trainBatch(batch);
    trainer.dispose();
    expect(first.refKl).toBeCloseTo(0, 6);
    expect(second.refKl).toBeGreaterThan(0);
  });

  it('holds the policy to the reference with loss.coverage', async () => {
    await expect(create(initWeights(config, 1), { loss: { coverage: { weight: 0.1, tokens: 'all' } } })).rejects.toThrow(
      /loss.coverage needs a reference policy/,
    );
    const weights = initWeights(config, 1);
    // Every sampled answer pushed down: without the coverage KL the policy takes them away.
    const discouraged = batch.map((sample) => ({ ...sample, advantage: -1 }));
    const trainedLogprob = (trained: ModelWeights) => {
      const policy = toTensorWeights(trained);
      const values = discouraged.flatMap(({ ids, lossMask }) => Array.from(sequenceLogprobs(policy, ids, TEMPERATURE, trainedTargets(lossMask))));
      disposeTensorWeights(policy);
      return values.reduce((sum, x) => sum + x, 0) / values.length;
    };
    const after = async (weight?: number) => {
      const coverage = weight === undefined ? undefined : { weight, tokens: 'all' };
      const trainer = await create(weights, { reference: weights, loss: { temperature: TEMPERATURE, coverage } });
      const metrics = Array.from({ length: 6 }, () => trainer.trainBatch(discouraged));
      const logprob = trainedLogprob(trainer.snapshot());
      trainer.dispose();
      return { metrics, logprob };
    };
    const [free, held] = [await after(), await after(20)];
    expect(free.metrics[0].coverage).toBeUndefined();
    expect(held.metrics[0].coverage).toBeCloseTo(0, 6);
    expect(held.metrics[5].coverage).toBeGreaterThan(0);
    // Measured: the answers' mean logprob fell from -0.68 by 0.13 without it, by 0.06 with it.
    const start = trainedLogprob(weights);
    expect(start - held.logprob).toBeLessThan(0.6 * (start - free.logprob));
    expect(start - held.logprob).toBeGreaterThan(0);
  });

  it('rejects bad samples naming the sample', async () => {
    const trainer = await create();
    const good = batch[0];
    expect(() => trainer.trainBatch([good, { ...good, lossMask: good.lossMask.slice(1) }])).toThrow(/^sample 1: lossMask has \d+ entries for \d+ ids/);
    expect(() => trainer.trainBatch([{ ...good, advantage: Number.NaN }])).toThrow(/^sample 0: advantage is NaN/);
    expect(() => trainer.trainBatch([good, good, { ...good, lossMask: good.lossMask.map(() => 0) }])).toThrow(/^sample 2: lossMask has no 1/);
    expect(() => trainer.trainBatch([])).toThrow(/empty batch/);
    trainer.dispose();
  });

  describe('all-moves term (answerTargets)', () => {
    // The four FrozenLake answers, whole, with target weights (a distribution, times 2).
    const answers = { answers: ['left', 'down', 'right', 'up'].map((move) => [...encode(move), SPECIAL_TOKENS.end]), weights: [0.2, 0, 0.4, 1.4] };
    /** log p of each token of `ids` after the first under `weights` (`sequenceLogprobs`). */
    const scored = (weights: ModelWeights, ids: readonly number[]) => {
      const tensors = toTensorWeights(weights);
      try {
        return sequenceLogprobs(tensors, ids, TEMPERATURE);
      } finally {
        disposeTensorWeights(tensors);
      }
    };
    /**
     * log p of each whole answer where each sample's answer starts, under `weights`: each answer
     * scored as a sequence of its own (the context, then the answer), apart from the packed pass.
     */
    const answerLogprobs = (weights: ModelWeights, samples: readonly TrainingSample[]) =>
      samples.map(({ ids, lossMask }) => {
        const context = ids.slice(0, lossMask.indexOf(1));
        return answers.answers.map((answer) => {
          const logps = Array.from(scored(weights, [...context, ...answer]).slice(context.length - 1));
          return { first: logps[0], whole: logps.reduce((sum, lp) => sum + lp, 0) };
        });
      });

    it('adds -sum_a w_a log p(a) at the answer start to the loss, beside the sampled tokens', () => {
      const weights = initWeights(config, 1);
      const samples = batch.slice(0, 3);
      const lossConfig = { ...DEFAULT_LOSS_CONFIG, temperature: TEMPERATURE };
      const lossOf = (scored: readonly TrainingSample[]) =>
        tf.tidy(() => policyLoss(lossInputs(toTensorWeights(weights), scored, TEMPERATURE), lossConfig).loss.dataSync()[0]);
      const tokens = samples.reduce((n, s) => n + s.lossMask.filter((m) => m === 1).length, 0);
      const term = answerLogprobs(weights, samples).reduce((sum, logps) => sum - logps.reduce((t, { whole }, a) => t + answers.weights[a] * whole, 0), 0);
      // token-mean: the term is paid on one token per sample, within the same mean over trained tokens.
      expect(lossOf(samples.map((s) => ({ ...s, answerTargets: answers })))).toBeCloseTo(lossOf(samples) + term / tokens, 5);
    });

    it('moves each answer towards its target share, however the sampled answer began', async () => {
      const samples = batch.slice(0, 4).map((s) => ({ ...s, advantage: 0, answerTargets: answers }));
      const trainer = await create();
      const before = answerLogprobs(trainer.snapshot(), samples);
      for (let i = 0; i < 5; i++) trainer.trainBatch(samples);
      const after = answerLogprobs(trainer.snapshot(), samples);
      trainer.dispose();
      // An untrained policy gives each of 264 tokens about 1/264 at every step of an answer: the
      // answers with a share rise, whole, and the one without falls where the answers part (their
      // first token; its end token is the others' too, and rises with them).
      samples.forEach((_, b) => {
        answers.weights.forEach((weight, a) => {
          if (weight > 0) expect(after[b][a].whole).toBeGreaterThan(before[b][a].whole);
          else expect(after[b][a].first).toBeLessThan(before[b][a].first);
        });
        expect(after[b][3].whole).toBeGreaterThan(after[b][2].whole);
      });
    });

    it('trains a batch whose every advantage is 0 when it scores answers, and refuses an answer given twice', async () => {
      const trainer = await create();
      const zero = batch.slice(0, 2).map((s) => ({ ...s, advantage: 0 }));
      expect(trainer.trainBatch(zero)).toBe(NOTHING_TRAINED);
      expect(trainer.trainBatch(zero.map((s) => ({ ...s, answerTargets: answers }))).gradNorm).toBeGreaterThan(0);
      const twins = {
        answers: [
          [100, 101],
          [100, 101],
        ],
        weights: [1, 0],
      };
      expect(() => trainer.trainBatch(zero.map((s) => ({ ...s, answerTargets: twins })))).toThrow(/sample 0: answerTargets.answers repeat an answer/);
      const empty = { answers: [[100], []], weights: [1, 0] };
      expect(() => trainer.trainBatch(zero.map((s) => ({ ...s, answerTargets: empty })))).toThrow(/sample 0: answerTargets.answers\[1\] has no tokens/);
      trainer.dispose();
    });

    it('spells out an answer the policy starts: its later tokens are trained too, where answers share a first token', async () => {
      // Two answers that begin alike ("down", "dash"): the first token alone cannot tell them apart.
      const alike = { answers: ['down', 'dash'].map((move) => [...encode(move), SPECIAL_TOKENS.end]), weights: [0, 2] };
      const samples = batch.slice(0, 2).map((s) => ({ ...s, advantage: 0, answerTargets: alike }));
      const trainer = await create();
      const logprobs = (weights: ModelWeights) =>
        samples.map(({ ids, lossMask }) => {
          const context = ids.slice(0, lossMask.indexOf(1));
          return alike.answers.map((answer) => scored(weights, [...context, ...answer])[context.length]); // the answer's second token
        });
      const before = logprobs(trainer.snapshot());
      for (let i = 0; i < 5; i++) trainer.trainBatch(samples);
      const after = logprobs(trainer.snapshot());
      trainer.dispose();
      // The second token leans to 'a', the answer with the share, against 'o' (no first-token
      // target could tell them apart: both follow the same 'd').
      samples.forEach((_, b) => {
        expect(after[b][1]).toBeGreaterThan(before[b][1]);
        expect(after[b][1] - after[b][0]).toBeGreaterThan(before[b][1] - before[b][0] + 1);
      });
    });
  });

  describe('trust region (maxUpdateKl)', () => {
    // KL(before || after) by k3 over the first minibatch's trained tokens, recomputed here.
    const firstHalf = () => batch.slice(0, batch.length / 2);
    const logprobsOf = (trainer: PolicyTrainer) => firstHalf().map(({ ids }) => trainer.recomputeLogprobs(ids, TEMPERATURE));
    const klBetween = (before: Float32Array[], after: Float32Array[]) => {
      let sum = 0;
      let count = 0;
      firstHalf().forEach(({ lossMask }, b) =>
        lossMask.forEach((m, i) => {
          if (i === 0 || m !== 1) return;
          const logRatio = after[b][i - 1] - before[b][i - 1];
          sum += Math.exp(logRatio) - 1 - logRatio;
          count++;
        }),
      );
      return sum / count;
    };
    const settings = { optimizerStepsPerBatch: 2 };
    let weights: ModelWeights;
    let before: Float32Array[];
    /** The batch trained without a trust region, and with one too wide to act. */
    let full: { params: Record<string, Float32Array>; metrics: TrainMetrics };

    beforeAll(async () => {
      weights = initWeights(config, 1);
      const unguarded = await create(weights, settings);
      const plain = unguarded.trainBatch(batch);
      expect(plain.updateKl).toBeUndefined();
      const within = await create(weights, { ...settings, maxUpdateKl: 1e6 });
      before = logprobsOf(within);
      full = { metrics: within.trainBatch(batch), params: unguarded.snapshot().params };
      expect(full.metrics.updateKl).toBeCloseTo(klBetween(before, logprobsOf(within)), 6);
      // Within the bound the region changes nothing: the same weights as without it.
      expect(differences(within.snapshot().params, full.params)).toEqual([]);
      unguarded.dispose();
      within.dispose();
    });

    it('measures how far a batch moved the policy and keeps a batch within the bound whole', () => {
      expect(full.metrics.updateKl).toBeGreaterThan(0);
      expect(full.metrics).toMatchObject({ updateScale: 1, proposedUpdateKl: full.metrics.updateKl });
    });

    it('shortens a batch that moved the policy past the bound, weights and Adam state alike, into the bound', async () => {
      const bound = full.metrics.updateKl! / 4;
      const trainer = await create(weights, { ...settings, maxUpdateKl: bound });
      const shortened = trainer.trainBatch(batch);
      expect(shortened.proposedUpdateKl).toBe(full.metrics.updateKl);
      expect(shortened.updateScale).toBeGreaterThan(0);
      expect(shortened.updateScale).toBeLessThan(1);
      expect(shortened.updateKl).toBeLessThanOrEqual(bound);
      expect(shortened.updateKl).toBeCloseTo(klBetween(before, logprobsOf(trainer)), 6);
      // On the line from where the batch started to where its whole update went.
      const scale = shortened.updateScale!;
      const kept = trainer.snapshot().params;
      const off = Object.entries(kept).flatMap(([name, values]) => {
        let largest = 0;
        values.forEach(
          (value, i) => (largest = Math.max(largest, Math.abs(value - (weights.params[name][i] + scale * (full.params[name][i] - weights.params[name][i]))))),
        );
        return largest > 1e-6 ? [`${name}: off by up to ${largest}`] : [];
      });
      expect(off).toEqual([]);
      expect(trainer.checkpoint().optimizer.step).toBe(settings.optimizerStepsPerBatch);
      trainer.dispose();
    });

    it('undoes a batch, weights and Adam state, when no shortening fits the bound', async () => {
      const trainer = await create(weights, { ...settings, maxUpdateKl: full.metrics.updateKl! / 4 });
      // The measure the region reads, held above the bound whatever the step's length.
      const measure = jest.spyOn(trainer as unknown as { updateKlOn: () => number }, 'updateKlOn').mockReturnValue(full.metrics.updateKl!);
      const undone = trainer.trainBatch(batch);
      measure.mockRestore();
      expect(undone).toMatchObject({ proposedUpdateKl: full.metrics.updateKl, updateKl: 0, updateScale: 0 });
      expect(differences(trainer.snapshot().params, weights.params)).toEqual([]);
      // Adam's step count went back too (it sets the bias correction): the same batch again is the same first batch.
      expect(trainer.checkpoint().optimizer.step).toBe(0);
      expect(trainer.trainBatch(batch)).toMatchObject({ loss: undone.loss, proposedUpdateKl: full.metrics.updateKl });
      trainer.dispose();
    });
  });

  it('takes no optimizer step on a batch without an advantage, unless a KL penalty pulls toward the reference', async () => {
    const weights = initWeights(config, 1);
    const trainer = await create(weights);
    trainer.trainBatch(batch);
    const moved = trainer.snapshot().params;
    const flat = batch.map((sample) => ({ ...sample, advantage: 0 }));
    expect(trainer.trainBatch(flat)).toBe(NOTHING_TRAINED);
    // Adam's momentum from the first batch would have moved the weights further.
    expect(differences(trainer.snapshot().params, moved)).toEqual([]);
    expect(trainer.checkpoint().optimizer.step).toBe(1);
    trainer.dispose();

    const penalised = await create(weights, { reference: weights, loss: { temperature: TEMPERATURE, beta: 0.1 } });
    penalised.trainBatch(batch);
    expect(penalised.trainBatch(flat).tokens).toBeGreaterThan(0);
    expect(penalised.checkpoint().optimizer.step).toBe(2);
    penalised.dispose();
  });

  it('with an entropy bonus, trains on a batch without an advantage and makes the policy less certain where it was sampled', async () => {
    const weights = initWeights(config, 1);
    const flat = batch.map((sample) => ({ ...sample, advantage: 0 }));
    // The exact entropy of the policy's distributions at the batch's trained tokens.
    const entropyOf = (trainer: PolicyTrainer) =>
      tf.tidy(() => {
        const { entropies, mask } = lossInputs(toTensorWeights(trainer.snapshot()), flat, TEMPERATURE, undefined, { entropy: true });
        return tf.div(tf.sum(tf.mul(entropies!, mask)), tf.sum(mask)).dataSync()[0];
      });
    const trainer = await create(weights, { loss: { temperature: TEMPERATURE, entropyBonus: 0.5 } });
    const before = entropyOf(trainer);
    const metrics = [trainer.trainBatch(flat), trainer.trainBatch(flat)];
    const after = entropyOf(trainer);
    trainer.dispose();
    expect(metrics.map((m) => m.tokens > 0)).toEqual([true, true]);
    // loss = -0.5 x the entropy of the trained tokens' distributions, nothing else.
    expect(metrics[0].loss).toBeCloseTo(-0.5 * before, 3);
    expect(after).toBeGreaterThan(before);
    await expect(create(weights, { loss: { temperature: TEMPERATURE, entropyBonus: -1 } })).rejects.toThrow(
      /entropyBonus must be a finite number >= 0, got -1/,
    );
  });

  it('rejects a maxUpdateKl that is not a positive number', async () => {
    await expect(create(initWeights(config, 1), { maxUpdateKl: 0 })).rejects.toThrow(/maxUpdateKl must be a finite number > 0, got 0/);
  });

  it.each([undefined, 1e6, 1e-12])('leaks no tensors across steps (maxUpdateKl %s)', async (maxUpdateKl) => {
    const trainer = await create(initWeights(config, 1), { optimizerStepsPerBatch: 2, maxUpdateKl });
    const step = () => {
      trainer.trainBatch(batch);
      trainer.supervisedStep(batch);
      trainer.recomputeLogprobs(batch[0].ids, 1);
      trainer.checkpoint();
    };
    step();
    const before = tf.memory().numTensors;
    step();
    step();
    expect(tf.memory().numTensors).toBe(before);
    trainer.dispose();
  });

  it('trains on 32 sequences of ~300 tokens (throughput)', async () => {
    const rng = createRng(5);
    const samples: TrainingSample[] = Array.from({ length: 32 }, (_, i) => {
      const length = 280 + Math.floor(rng() * 40);
      const ids = Array.from({ length }, () => Math.floor(rng() * 256));
      const lossMask = ids.map((_, t) => (t >= length - 60 ? 1 : 0));
      return { ids, lossMask, behaviourLogprobs: ids.map(() => -5.5), advantage: i % 2 ? 1 : -1 };
    });
    const trainer = await create();
    trainer.trainBatch(samples.slice(0, 4));
    const metrics = trainer.trainBatch(samples);
    trainer.dispose();
    const tokens = samples.reduce((n, { ids }) => n + ids.length, 0);
    console.log(
      `trainBatch: ${samples.length} sequences, ${tokens} tokens in ${metrics.stepMs.toFixed(0)} ms = ${(tokens / (metrics.stepMs / 1000)).toFixed(0)} tokens/s ` +
        `(forward+backward ${metrics.forwardBackwardMs.toFixed(0)} ms, optimizer ${metrics.optimizerMs.toFixed(0)} ms)`,
    );
    expect(Number.isFinite(metrics.loss)).toBe(true);
  });
});

import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRng } from '../src/core/random';
import * as tf from '@tensorflow/tfjs-core';
import { heapAddress, initBackend } from '../src/model/backend';
import { modelConfig } from '../src/model/config';
import { KVCache } from '../src/model/kvCache';
import { sampleToken, samplerParamsProblem } from '../src/model/sampler';
import { decodeStep, disposeTensorWeights, packedTargetScores, prefill, sequenceLogprobs, toTensorWeights } from '../src/model/transformer';
import { rowMajor, simdKernels } from '../src/model/simdKernels';
import { initWeights, loadCheckpoint, saveCheckpoint } from '../src/model/weights';

const config = modelConfig({ maxContext: 256 });
const dir = mkdtempSync(path.join(os.tmpdir(), 'trajflow-model-'));

beforeAll(() => initBackend());

describe('weights', () => {
  it('are a pure function of the seed', () => {
    const a = initWeights(config, 7);
    expect(initWeights(config, 7).params).toEqual(a.params);
    expect(initWeights(config, 8).params['embed.tokens']).not.toEqual(a.params['embed.tokens']);
    const embedding = a.params['embed.tokens'];
    const std = Math.sqrt(embedding.reduce((sum, x) => sum + x * x, 0) / embedding.length);
    expect(std).toBeCloseTo(0.02, 3);
    expect(a.params['layers.0.ln1.gain'].every((x) => x === 1)).toBe(true);
  });

  it('round-trip through a checkpoint file bit-exactly', async () => {
    const weights = initWeights(config, 3);
    const file = path.join(dir, 'roundtrip.ckpt');
    await saveCheckpoint(file, { weights, policyVersion: 12 });
    const loaded = await loadCheckpoint(file);
    expect(loaded.policyVersion).toBe(12);
    expect(loaded.weights.config).toEqual(config);
    for (const [name, values] of Object.entries(weights.params)) {
      const bits = (array: Float32Array) => Buffer.from(array.buffer, array.byteOffset, array.byteLength);
      expect(bits(loaded.weights.params[name]).equals(bits(values))).toBe(true);
    }
  });

  describe('reject a corrupt checkpoint naming the file and the problem', () => {
    const file = path.join(dir, 'good.ckpt');
    let good: Buffer;
    beforeAll(async () => {
      await saveCheckpoint(file, { weights: initWeights(config, 1), policyVersion: 0 });
      good = readFileSync(file);
    });
    const newline = () => good.indexOf(0x0a);
    const header = () => JSON.parse(good.subarray(0, newline()).toString());
    const withHeader = (edit: (h: Record<string, unknown>) => void) => {
      const h = header();
      edit(h);
      return Buffer.concat([Buffer.from(`${JSON.stringify(h)}\n`), good.subarray(newline() + 1)]);
    };
    const withData = (edit: (data: Buffer) => void, { resealed }: { resealed: boolean }) => {
      const data = Buffer.from(good.subarray(newline() + 1));
      edit(data);
      const h = header();
      if (resealed) h.sha256 = createHash('sha256').update(data).digest('hex');
      return Buffer.concat([Buffer.from(`${JSON.stringify(h)}\n`), data]);
    };
    // A NaN the trainer itself wrote: the checksum matches, the values are refused.
    const withNaN = () => withData((data) => data.writeFloatLE(Number.NaN, 40), { resealed: true });
    const withFlippedBit = () => withData((data) => (data[40] ^= 0x10), { resealed: false });
    it.each<[string, () => Buffer, RegExp]>([
      ['truncated data', () => good.subarray(0, good.length - 4), /truncated: \d+ data bytes, expected \d+/],
      ['trailing bytes', () => Buffer.concat([good, Buffer.from([1, 2])]), /2 unexpected bytes/],
      ['flipped data bit', withFlippedBit, /checksum mismatch: the \d+ data bytes hash to sha256 [0-9a-f]{64}, the header says [0-9a-f]{64}/],
      ['not a checkpoint', () => Buffer.from('hello world'), /no JSON header line/],
      ['garbled header', () => Buffer.concat([Buffer.from('{"format": \n'), good]), /header is not valid JSON/],
      ['wrong format tag', () => withHeader((h) => (h.format = 'other/9')), /format is "other\/9"/],
      [
        'bad config',
        () => withHeader((h) => ((h.config as Record<string, unknown>).nHeads = 5)),
        /bad config in header: dModel \(64\) must be divisible by nHeads \(5\)/,
      ],
      [
        'wrong tensor shape',
        () => withHeader((h) => ((h.tensors as { shape: number[] }[])[0].shape = [10, 64])),
        /tensor #0 .* expected 'embed.tokens' of shape \[264,64\]/,
      ],
      ['non-finite value', withNaN, /tensor 'embed.tokens' holds a non-finite value \(NaN\) at index 10/],
    ])('%s', async (_, corrupt, problem) => {
      const bad = path.join(dir, 'bad.ckpt');
      writeFileSync(bad, corrupt());
      const error = await loadCheckpoint(bad).catch((err: Error) => err);
      expect(error).toBeInstanceOf(Error);
      expect((error as Error).message).toContain(`checkpoint ${bad}: `);
      expect((error as Error).message).toMatch(problem);
    });

    it('missing file', async () => {
      await expect(loadCheckpoint(path.join(dir, 'nope.ckpt'))).rejects.toThrow(/checkpoint .*nope\.ckpt: cannot read/);
    });
  });
});

describe('sampler', () => {
  const probabilities = [0.5, 0.3, 0.15, 0.05];
  const logits = Float32Array.from(probabilities, Math.log);
  const uniforms = Array.from({ length: 200 }, (_, i) => (i + 0.5) / 200);

  it('picks the argmax as temperature goes to 0', () => {
    const shuffled = Float32Array.from([0.3, -1, 2.5, 2.4, 0]);
    for (const u of uniforms) {
      const { token, logprob } = sampleToken(shuffled, { temperature: 1e-3, topP: 1 }, u);
      expect(token).toBe(2);
      expect(logprob).toBeCloseTo(0, 6);
    }
  });

  it('samples in proportion to the temperature-scaled probabilities', () => {
    const counts = [0, 0, 0, 0];
    for (const u of uniforms) counts[sampleToken(logits, { temperature: 1, topP: 1 }, u).token]++;
    expect(counts).toEqual(probabilities.map((p) => p * uniforms.length));
  });

  it('top-p keeps the smallest most-probable set reaching the mass, logprobs stay untruncated', () => {
    const seen = new Set<number>();
    for (const u of uniforms) {
      const { token, logprob } = sampleToken(logits, { temperature: 1, topP: 0.7 }, u);
      seen.add(token);
      expect(logprob).toBeCloseTo(Math.log(probabilities[token]), 6);
    }
    expect([...seen].sort()).toEqual([0, 1]);
    expect(new Set(uniforms.map((u) => sampleToken(logits, { temperature: 1, topP: 0.5 }, u).token))).toEqual(new Set([0]));
  });

  it('gives the same tokens for the same seed, with finite logprobs <= 0', () => {
    const rng = createRng(1);
    const rows = Array.from({ length: 50 }, () => Float32Array.from({ length: 264 }, () => 8 * rng() - 4));
    const run = (seed: number) => {
      const stream = createRng(seed);
      return rows.map((row) => sampleToken(row, { temperature: 0.8, topP: 0.9 }, stream()));
    };
    const first = run(42);
    expect(run(42)).toEqual(first);
    expect(run(43).map((s) => s.token)).not.toEqual(first.map((s) => s.token));
    for (const { logprob } of first) {
      expect(Number.isFinite(logprob)).toBe(true);
      expect(logprob).toBeLessThanOrEqual(0);
    }
  });

  it('names bad parameters', () => {
    expect(samplerParamsProblem({ temperature: 0, topP: 1 })).toMatch(/temperature must be a finite number > 0/);
    expect(samplerParamsProblem({ temperature: Number.NaN, topP: 1 })).toMatch(/temperature/);
    expect(samplerParamsProblem({ temperature: 1, topP: 0 })).toMatch(/topP must be in \(0, 1\]/);
    expect(samplerParamsProblem({ temperature: 1, topP: 1.01 })).toMatch(/topP/);
    expect(samplerParamsProblem({ temperature: 0.5, topP: 1 })).toBeUndefined();
  });
});

describe('transformer', () => {
  // The default heads (16 features) and heads of 6, which the attention kernel's SIMD groups of 4
  // do not divide; prompts of 64 and 61 positions (whole key blocks of 16, or not).
  it.each([
    ['4 heads of 16', config, 64],
    ['2 heads of 6', modelConfig({ maxContext: 256, dModel: 12, nHeads: 2, nLayers: 2, dFF: 24 }), 61],
  ])('decodes incrementally what the full-sequence forward computes (%s)', (_, config, promptLength) => {
    const weights = toTensorWeights(initWeights(config, 5));
    const rng = createRng(9);
    const ids = Array.from({ length: 140 }, () => Math.floor(rng() * config.vocabSize));
    const logprobOf = (row: Float32Array, token: number) => {
      const max = Math.max(...row);
      return row[token] - max - Math.log(row.reduce((sum, x) => sum + Math.exp(x - max), 0));
    };
    const { logits, kv } = prefill(weights, ids.slice(0, promptLength));
    const incremental = [logprobOf(logits, ids[promptLength])];
    const cache = new KVCache(config);
    cache.stage(0, kv);
    for (let position = promptLength; position < ids.length - 1; position++) {
      cache.arrange([0]);
      incremental.push(logprobOf(decodeStep(weights, cache, Int32Array.of(ids[position])), ids[position + 1]));
    }
    expect(cache.capacity).toBe(192);
    const full = sequenceLogprobs(weights, ids, 1).slice(promptLength - 1);
    expect(full.length).toBe(incremental.length);
    const maxDiff = Math.max(...incremental.map((x, i) => Math.abs(x - full[i])));
    expect(maxDiff).toBeLessThan(1e-5);
    cache.dispose();
    disposeTensorWeights(weights);
  });

  it('scores whole answers as branches of a packed sequence: what each scores alone after the context', () => {
    const weights = toTensorWeights(initWeights(config, 3));
    const rng = createRng(4);
    const tokens = (n: number) => Array.from({ length: n }, () => Math.floor(rng() * config.vocabSize));
    // Two sequences sharing a 12-token prefix (run once in the pack), answers after their 20th and 25th tokens.
    const prefix = tokens(12);
    const sequences = [
      { ids: [...prefix, ...tokens(14)], positions: [19, 20, 21, 24], answers: { ids: [tokens(3), tokens(1), tokens(5)], weights: [0.5, 2, 1] } },
      { ids: [...prefix, ...tokens(20)], positions: [24, 30], answers: { ids: [tokens(2)], weights: [3] } },
    ];
    const alone = (ids: readonly number[]) => Array.from(sequenceLogprobs(weights, ids, 0.8));
    const [withAnswers, without] = [sequences, sequences.map(({ ids, positions }) => ({ ids, positions }))].map((scored) =>
      tf.tidy(() => {
        const scores = packedTargetScores(weights, scored, 0.8);
        return { logprobs: scores.logprobs.arraySync(), answerScores: scores.answerScores?.arraySync() };
      }),
    );
    expect(without.answerScores).toBeUndefined();
    sequences.forEach(({ ids, positions, answers }, n) => {
      const start = positions[0];
      const expected = answers.ids.reduce((sum, answer, a) => {
        const logps = alone([...ids.slice(0, start + 1), ...answer]).slice(start);
        return sum + answers.weights[a] * logps.reduce((total, lp) => total + lp, 0);
      }, 0);
      withAnswers.answerScores![n].forEach((score, t) => expect(score).toBeCloseTo(t === start ? expected : 0, 4));
      // The sequence's own targets score as they do without the branches beside them, and as alone.
      const own = alone(ids);
      positions.forEach((t) => {
        expect(withAnswers.logprobs[n][t]).toBeCloseTo(without.logprobs[n][t], 5);
        expect(withAnswers.logprobs[n][t]).toBeCloseTo(own[t], 4);
      });
    });
    expect(() => packedTargetScores(weights, [{ ...sequences[0], answers: { ids: [[config.vocabSize]], weights: [1] } }], 0.8)).toThrow(
      /answer 0: token \d+ at index 0 is outside the vocabulary/,
    );
    disposeTensorWeights(weights);
  });

  it('decodes a row bit-identically whatever the batch holds and whatever the capacity', () => {
    const weights = toTensorWeights(initWeights(config, 6));
    const rng = createRng(3);
    const tokens = (n: number) => Array.from({ length: n }, () => Math.floor(rng() * config.vocabSize));
    const probe = tokens(100);
    const decodeProbe = (others: number[][]) => {
      const cache = new KVCache(config);
      const probeId = others.length;
      const ids = [...others, probe].map((prompt, id) => {
        cache.stage(id, prefill(weights, prompt).kv);
        return id;
      });
      cache.arrange(ids);
      const step = Int32Array.from(ids, (id) => (id === probeId ? 42 : (id * 17) % config.vocabSize));
      const logits = decodeStep(weights, cache, step);
      const row = cache.rowOf(probeId);
      const capacity = cache.capacity;
      cache.dispose();
      return { logits: logits.slice(row * config.vocabSize, (row + 1) * config.vocabSize), capacity };
    };
    const alone = decodeProbe([]);
    const crowded = decodeProbe([tokens(3), tokens(200), tokens(64), tokens(130), tokens(1), tokens(90), tokens(45), tokens(150)]);
    expect([alone.capacity, crowded.capacity]).toEqual([128, 256]);
    expect(crowded.logits).toEqual(alone.logits);
    disposeTensorWeights(weights);
  });

  it('vecMat computes each column as an in-order float32 sum, row-major or in blocks of 16 columns', () => {
    const { vecMat } = simdKernels();
    const rng = createRng(4);
    const random = (n: number) => tf.tensor1d(Array.from({ length: n }, () => rng() * 2 - 1));
    // [T, width, blocked]: whole blocks of 16 columns, groups of 4 and single columns; T = 1 too.
    for (const [T, width, blocked] of [
      [16, 37, false],
      [3, 5, false],
      [1, 4, false],
      [7, 70, true],
      [16, 16, true],
      [6, 3, true],
    ] as const) {
      const stride = width + 3; // row-major rows longer than the columns read
      const blocks = Math.ceil(width / 16);
      const at = (t: number, i: number) => (blocked ? (Math.floor(i / 16) * T + t) * 16 + (i % 16) : t * stride + i);
      const [a, M, bias, out] = [random(T), random(blocked ? blocks * T * 16 : T * stride), random(width), tf.fill([width + 2], 7)];
      const [A, MM, b] = [a.dataSync(), M.dataSync(), bias.dataSync()];
      for (const withBias of [false, true]) {
        const [rowBytes, blockBytes] = blocked ? [64, 64 * T] : rowMajor(stride);
        vecMat(heapAddress(a), T, heapAddress(M), rowBytes, blockBytes, withBias ? heapAddress(bias) : 0, heapAddress(out), width);
        const expected = Array.from({ length: width }, (_, i) => {
          let sum = 0;
          for (let t = 0; t < T; t++) sum = Math.fround(sum + Math.fround(A[t] * MM[at(t, i)]));
          return withBias ? Math.fround(sum + b[i]) : sum;
        });
        expect(Array.from(out.dataSync())).toEqual([...expected, 7, 7]);
      }
      tf.dispose([a, M, bias, out]);
    }
  });

  it('expShift gives exp(scale (x - max)) within 2e-7 relative, exactly 0 below -87, and their float32 sum', () => {
    const { expShift } = simdKernels();
    const rng = createRng(8);
    // n not a multiple of 4; differences from the max spread over [-100, 0] so some fall below the floor.
    for (const [n, scale] of [
      [1, 1],
      [7, 1],
      [261, 1],
      [261, 2.5],
    ] as const) {
      const values = Array.from({ length: n }, () => 3 - (rng() * 100) / scale);
      const x = tf.tensor1d([...values, 0, 0, 0]);
      const total = expShift(heapAddress(x), n, scale);
      const e = (x.dataSync() as Float32Array).slice(0, n);
      const max = Math.max(...values.map(Math.fround));
      let worst = 0;
      values.forEach((v, i) => {
        const exponent = Math.fround(Math.fround(Math.fround(v) - max) * scale);
        if (exponent < -87) expect(e[i]).toBe(0);
        else worst = Math.max(worst, Math.abs(e[i] / Math.exp(exponent) - 1));
      });
      expect(worst).toBeLessThan(2e-7);
      expect(Math.abs(total / e.reduce((sum, w) => sum + w, 0) - 1)).toBeLessThan(1e-6);
      x.dispose();
    }
  });

  it('reserves the capacity a staged sequence asks for, so decoding up to it never reallocates', () => {
    const weights = toTensorWeights(initWeights(config, 5));
    const cache = new KVCache(config);
    cache.stage(
      0,
      prefill(
        weights,
        Array.from({ length: 40 }, (_, i) => i),
      ).kv,
      150,
    );
    cache.arrange([0]);
    const [capacity, keys] = [cache.capacity, cache.layerKeys(0)];
    expect(capacity).toBe(192);
    for (let position = 40; position < 150; position++) {
      cache.arrange([0]);
      decodeStep(weights, cache, Int32Array.of(position % config.vocabSize));
    }
    expect([cache.capacity, cache.layerKeys(0)]).toEqual([capacity, keys]);
    cache.dispose();
    disposeTensorWeights(weights);
  });

  it('rejects tokens outside the vocabulary and sequences beyond the context', () => {
    const weights = toTensorWeights(initWeights(config, 5));
    expect(() => sequenceLogprobs(weights, [1, 2, 300], 1)).toThrow(/token 300 at index 2 is outside the vocabulary/);
    expect(() => sequenceLogprobs(weights, Array(config.maxContext + 2).fill(1), 1)).toThrow(/does not fit the context/);
    disposeTensorWeights(weights);
  });
});

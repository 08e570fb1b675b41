/**
 * The policy network: a pre-LayerNorm decoder-only transformer with learned absolute positions and
 * ALiBi recency biases on the attention scores, a ReLU MLP (one op, unlike GELU's six) and an
 * untied LM head. Linear layers have no biases.
 *
 *   x_0 = E[token] + P[position]
 *   x  += Attention(LN1(x)) W_o            (causal, nHeads heads, head h's score for a key d tokens
 *                                           back lowered by slope_h * d)
 *   x  += relu(LN2(x) W_1) W_2
 *   logits = LN_f(x) W_head
 *
 * Two forward paths share the blocks:
 * - full sequences (`tokenLogprobs`, `targetLogprobs`, `prefill`, and `packedTargetScores` for
 *   many at once): ops that all have gradients on wasm, for the trainer;
 * - incremental (`decodeStep`): one new token per running sequence against a KVCache, for the engine.
 *   Its op count does not depend on the batch size, every op is row-independent, and attention
 *   reads each row's own cache alone, so a sequence's logits are bit-identical whatever else is in
 *   the batch.
 */
import * as tf from '@tensorflow/tfjs-core';
import { heapAddress, heapView } from './backend';
import { headDim, type ModelConfig } from './config';
import { rowLayout, type KVCache, type SequenceKV } from './kvCache';
import { simdKernels } from './simdKernels';
import { layerParam, parameterSpecs, type ModelWeights } from './weights';

/** Weights as tensors (tf.Variables work too, for training). */
export interface TensorWeights {
  config: ModelConfig;
  params: Readonly<Record<string, tf.Tensor>>;
}

const LAYER_NORM_EPSILON = 1e-5;
/** Added to the score of a position a query may not attend to: exp(MASKED - max) is exactly 0. */
const MASKED = -1e9;

export function toTensorWeights({ config, params }: ModelWeights): TensorWeights {
  const tensors: Record<string, tf.Tensor> = {};
  for (const { name, shape } of parameterSpecs(config)) tensors[name] = tf.tensor(params[name], [...shape], 'float32');
  return { config, params: tensors };
}

export function disposeTensorWeights(weights: TensorWeights): void {
  tf.dispose(Object.values(weights.params));
}

/**
 * log p(ids[i] | ids[<i]) at `temperature` for i = 1..n-1 (so n-1 values), differentiable with
 * respect to the weights. Call inside tf.tidy or a gradient function.
 */
export function tokenLogprobs(weights: TensorWeights, ids: readonly number[], temperature: number): tf.Tensor1D {
  assertScorable(weights.config, ids, temperature);
  const { hidden } = forwardSequence(weights, ids.slice(0, -1));
  return headLogprobs(weights, hidden, ids.slice(1), temperature);
}

/**
 * `tokenLogprobs` at the targets `positions` only (ascending indices into its n-1 values), 0 at the
 * other targets: all that a loss reading only those needs, for less work. Target t is scored from
 * hidden row t, which depends on ids[<= t] alone (the model is causal), so the blocks run on ids up
 * to the last target's, and the last block past its keys and values (see `forwardSequence`), the
 * LM head, the softmax and the pick on the K target rows alone. The K logprobs go back to their
 * positions through a one-hot S [K, n-1]: a 2-D matMul has a gradient on wasm where scatter has
 * none, and with a single 1 per row it only adds zeros, so every value stays exact. Call inside
 * tf.tidy or a gradient function.
 */
export function targetLogprobs(weights: TensorWeights, ids: readonly number[], positions: readonly number[], temperature: number): tf.Tensor1D {
  return targetScores(weights, ids, positions, temperature).logprobs;
}

/**
 * `targetLogprobs`, and with `entropy` the entropy of the next-token distribution at each of
 * `positions` (0 at the other targets), from the same forward pass:
 *
 *   H_t = -sum_v p_t(v) log p_t(v),   p_t = softmax(logits_t / temperature)
 *
 * Differentiable; call inside tf.tidy or a gradient function.
 */
export function targetScores(
  weights: TensorWeights,
  ids: readonly number[],
  positions: readonly number[],
  temperature: number,
  { entropy = false }: { entropy?: boolean } = {},
): { logprobs: tf.Tensor1D; entropies?: tf.Tensor1D } {
  const { logprobs, entropies } = packedTargetScores(weights, [{ ids, positions }], temperature, { entropy });
  const row = (values: tf.Tensor2D) => tf.reshape(values, [ids.length - 1]) as tf.Tensor1D;
  return { logprobs: row(logprobs), ...(entropies ? { entropies: row(entropies) } : {}) };
}

/**
 * The whole next-token distribution at each target of `positions`, as log-probabilities at
 * `temperature`: [positions.length x vocabSize] values, row by row. Not differentiable (plain
 * numbers): the reference distributions the coverage term (`Coverage`) pulls the policy towards.
 */
export function targetDistributions(weights: TensorWeights, ids: readonly number[], positions: readonly number[], temperature: number): Float32Array {
  assertScorable(weights.config, ids, temperature);
  assertPositions(ids, positions);
  const logp = tf.tidy(() =>
    headLogSoftmax(weights, forwardSequence(weights, ids.slice(0, positions[positions.length - 1] + 1), positions).hidden, temperature),
  );
  const values = logp.dataSync() as Float32Array;
  logp.dispose();
  return values;
}

/** A sequence and the targets (ascending indices into its n-1 next-token targets) to score it at. */
export interface ScoredSequence {
  ids: readonly number[];
  positions: readonly number[];
  /** Whole answers to score where the first target's token would come (`answerScores`). */
  answers?: WeightedAnswers;
}

/**
 * Answers to a sequence's context ids[0..t] (t its first target), whole, each with a weight:
 *   answerScores[t] = sum_a w_a log p(a | ids[0..t]),   log p(a) = sum_i log p(a_i | ids[0..t], a_<i)
 * Each answer runs through the blocks as a branch of its sequence (see `forwardPacked`): only its
 * own tokens are added to the pack, attending to the context rows the sequence already has.
 */
export interface WeightedAnswers {
  /** Token ids of each answer, at least one each. */
  ids: readonly (readonly number[])[];
  weights: readonly number[];
}

/** What `packedTargetScores` computes besides the logprobs. */
export interface ScoreExtras {
  /** The entropy of the next-token distribution at each target. */
  entropy?: boolean;
  /** A reference's distributions at every target: then the coverage of each (`Coverage`). */
  coverage?: Coverage;
}

/**
 * How far the policy's next-token distribution p falls short of covering a reference's q:
 *   KL(q || p) = sum_v q(v) (log q(v) - log p(v)),  or with a floor f
 *   sum_v q(v) max(0, log(f q(v)) - log p(v))       (0 while p(v) >= f q(v) for every v)
 * Its gradient, -sum_v q(v) grad log p(v) (over the tokens below the floor), lifts every token q
 * gives mass to, however unlikely the policy has made it.
 */
export interface Coverage {
  /** log q at every target, [K x vocabSize], the sequences' targets in order (as `targetDistributions` gives them, one sequence after another). */
  refLogprobs: tf.Tensor2D;
  floor?: number;
}

/**
 * `targetScores` for several sequences from one forward pass, as rows [N, width] (width: the
 * longest n-1; a row holds 0 past its own). The sequences run through the blocks packed one after
 * another (see `forwardPacked`): on wasm every op costs tens of microseconds however small, and a
 * ~110-token sequence takes ~800 of them through forward and backward alone. Each row is computed
 * from its own sequence only. With a sequence's `answers`, `answerScores` holds their weighed
 * logprobs at its first target (0 elsewhere). Differentiable; call inside tf.tidy or a gradient
 * function.
 */
export function packedTargetScores(
  weights: TensorWeights,
  sequences: readonly ScoredSequence[],
  temperature: number,
  { entropy = false, coverage }: ScoreExtras = {},
): { logprobs: tf.Tensor2D; entropies?: tf.Tensor2D; coverage?: tf.Tensor2D; answerScores?: tf.Tensor2D } {
  if (sequences.length === 0) throw new Error('packedTargetScores needs at least one sequence');
  for (const { ids, positions, answers } of sequences) {
    assertScorable(weights.config, ids, temperature);
    assertPositions(ids, positions);
    if (answers) assertAnswers(weights.config, positions[0] + 1, answers);
  }
  const width = Math.max(...sequences.map(({ ids }) => ids.length - 1));
  // An answer's first token is scored on the row of the sequence's first target; its later
  // tokens each on a row of the answer's branch.
  const branchesOf = ({ positions, answers }: ScoredSequence) =>
    (answers?.ids ?? []).filter((answer) => answer.length > 1).map((answer) => ({ from: positions[0] + 1, ids: answer }));
  const { hidden, branchHidden } = forwardPacked(
    weights,
    sequences.map((sequence) => ({
      ids: sequence.ids.slice(0, sequence.positions[sequence.positions.length - 1] + 1),
      outputs: sequence.positions,
      branches: branchesOf(sequence),
    })),
  );
  const logp = headLogSoftmax(weights, hidden, temperature); // [K, V]: log p_k(v), K targets in all
  const picked = pickTargets(
    logp,
    sequences.flatMap(({ ids, positions }) => positions.map((t) => ids[t + 1])),
    weights.config.vocabSize,
  ); // [K]
  // [1, N width] = values^T S: target k of sequence n at column n width + t_k, 0 elsewhere
  const S = oneHot(
    sequences.flatMap(({ positions }, n) => positions.map((t) => n * width + t)),
    sequences.length * width,
  );
  const K = S.shape[0];
  const atTargets = (values: tf.Tensor) => tf.reshape(tf.matMul(tf.reshape(values, [1, K]), S), [sequences.length, width]) as tf.Tensor2D;
  const scores: { logprobs: tf.Tensor2D; entropies?: tf.Tensor2D; coverage?: tf.Tensor2D; answerScores?: tf.Tensor2D } = { logprobs: atTargets(picked) };
  if (entropy) scores.entropies = atTargets(tf.neg(tf.sum(tf.mul(tf.exp(logp), logp), 1))); // [K]
  if (coverage) scores.coverage = atTargets(coverageOf(coverage, logp));
  if (sequences.some(({ answers }) => answers)) {
    // First tokens: sum_v W(v) log p(v) on each sequence's first target row, W the weights of the
    // answers starting with v. Later tokens: each branch row's logprob of its next answer token,
    // weighed by its answer's weight, summed into the same cell by a [1, rows] x [rows, N width] product.
    const { vocabSize } = weights.config;
    const firstWeights = new Float32Array(K * vocabSize);
    let row = 0;
    sequences.forEach(({ positions, answers }) => {
      answers?.ids.forEach((answer, a) => {
        firstWeights[row * vocabSize + answer[0]] += answers.weights[a];
      });
      row += positions.length;
    });
    let answerScores = atTargets(tf.sum(tf.mul(tf.tensor2d(firstWeights, [K, vocabSize]), logp), 1));
    if (branchHidden) {
      const rows = sequences.flatMap((sequence, n) =>
        (sequence.answers?.ids ?? []).flatMap((answer, a) =>
          answer.slice(1).map((token) => ({ token, weight: sequence.answers!.weights[a], column: n * width + sequence.positions[0] })),
        ),
      );
      const branchLogprobs = pickTargets(
        headLogSoftmax(weights, branchHidden, temperature),
        rows.map(({ token }) => token),
        vocabSize,
      );
      const place = tf.mul(
        oneHot(
          rows.map(({ column }) => column),
          sequences.length * width,
        ),
        tf.tensor2d(
          rows.map(({ weight }) => weight),
          [rows.length, 1],
        ),
      );
      const later = tf.reshape(tf.matMul(tf.reshape(branchLogprobs, [1, rows.length]), place), [sequences.length, width]);
      answerScores = tf.add(answerScores, later) as tf.Tensor2D;
    }
    scores.answerScores = answerScores;
  }
  return scores;
}

/** Answers to score after the first `from` tokens of a sequence: weighed, in the vocabulary, within the context. */
function assertAnswers({ vocabSize, maxContext }: ModelConfig, from: number, { ids, weights }: WeightedAnswers): void {
  if (!Array.isArray(ids) || !Array.isArray(weights) || ids.length !== weights.length) {
    throw new Error(`answers need one weight each, got ${ids?.length} answers and ${weights?.length} weights`);
  }
  ids.forEach((answer, a) => {
    if (!Array.isArray(answer) || answer.length === 0) throw new Error(`answer ${a} has no tokens`);
    if (from + answer.length > maxContext) throw new Error(`answer ${a} (${answer.length} tokens after ${from}) does not fit the context (${maxContext})`);
    const bad = answer.findIndex((id) => !Number.isInteger(id) || id < 0 || id >= vocabSize);
    if (bad >= 0) throw new Error(`answer ${a}: token ${answer[bad]} at index ${bad} is outside the vocabulary (0..${vocabSize - 1})`);
    if (!Number.isFinite(weights[a])) throw new Error(`answer ${a}: weight ${weights[a]} is not a finite number`);
  });
}

/** `Coverage` of each row of `logp` [K, V]: [K]. */
function coverageOf({ refLogprobs, floor }: Coverage, logp: tf.Tensor2D): tf.Tensor1D {
  if (refLogprobs.shape[0] !== logp.shape[0] || refLogprobs.shape[1] !== logp.shape[1]) {
    throw new Error(`reference distributions are [${refLogprobs.shape.join(', ')}], expected [${logp.shape.join(', ')}]`);
  }
  const q = tf.exp(refLogprobs);
  // KL: log q - log p; with a floor: max(0, log f + log q - log p)
  const shortfall = floor === undefined ? tf.sub(refLogprobs, logp) : tf.relu(tf.sub(tf.add(refLogprobs, Math.log(floor)), logp));
  return tf.sum(tf.mul(q, shortfall), 1) as tf.Tensor1D;
}

function assertPositions(ids: readonly number[], positions: readonly number[]): void {
  const bad = positions.findIndex((t, k) => !Number.isInteger(t) || t < 0 || t > ids.length - 2 || (k > 0 && t <= positions[k - 1]));
  if (positions.length === 0 || bad >= 0) throw new Error(`targetLogprobs needs ascending positions in 0..${ids.length - 2}, got [${positions.join(', ')}]`);
}

/**
 * `tokenLogprobs` as plain numbers, for checking recorded behaviour logprobs; given `positions`,
 * `targetLogprobs` at those (0 at the other targets), for what reads only them.
 */
export function sequenceLogprobs(weights: TensorWeights, ids: readonly number[], temperature: number, positions?: readonly number[]): Float32Array {
  const logprobs = tf.tidy(() => (positions ? targetLogprobs(weights, ids, positions, temperature) : tokenLogprobs(weights, ids, temperature)));
  const values = logprobs.dataSync() as Float32Array;
  logprobs.dispose();
  return values;
}

/**
 * Runs a prompt through the model: next-token logits after its last token, and its keys and values
 * laid out as a row of the KV cache.
 */
export function prefill(weights: TensorWeights, ids: readonly number[]): { logits: Float32Array; kv: SequenceKV } {
  const outputs = tf.tidy(() => {
    // The last block past its keys and values only for the last row, the one whose logits are needed.
    const { hidden, keys, values } = forwardSequence(weights, ids, [ids.length - 1]);
    const rows = keys.map((k, l) => rowLayout(k, values[l], weights.config));
    return { logits: tf.matMul(hidden, param(weights, 'head')), keys: rows.map((row) => row.keys), values: rows.map((row) => row.values) };
  });
  const read = (t: tf.Tensor) => t.dataSync() as Float32Array;
  const result = {
    logits: read(outputs.logits),
    kv: { length: ids.length, keys: outputs.keys.map(read), values: outputs.values.map(read) },
  };
  tf.dispose([outputs.logits, ...outputs.keys, ...outputs.values]);
  return result;
}

/**
 * One decode step for every row of `cache`: `tokens[r]` enters row r at position cache.lengths[r];
 * its keys and values are written into the cache, which then advances. Returns next-token logits,
 * [B, vocab] row-major.
 */
export function decodeStep(weights: TensorWeights, cache: KVCache, tokens: Int32Array): Float32Array {
  const { config } = weights;
  const { dModel: D, nLayers, nHeads, maxContext, vocabSize } = config;
  const B = cache.rows;
  if (tokens.length !== B) throw new Error(`decodeStep got ${tokens.length} tokens for ${B} cache rows`);
  const logits = tf.tidy(() => {
    let x: tf.Tensor = tf.tensor2d(embedRows(weights, tokens, cache.lengths), [B, D]);
    const alibi = tf.tensor2d(reversedAlibi(nHeads, maxContext), [nHeads, maxContext]);
    const lengths = tf.tensor1d(cache.lengths, 'int32');
    for (let l = 0; l < nLayers; l++) {
      const p = (name: string) => param(weights, layerParam(l, name));
      const qkv = tf.matMul(layerNorm(x, p('ln1.gain'), p('ln1.bias')), p('attn.wqkv'));
      cache.write(l, qkv, lengths);
      const attended = cachedAttention(qkv, lengths, cache, l, alibi, config);
      x = tf.add(x, tf.matMul(attended, p('attn.wo')));
      x = tf.add(x, mlp(weights, l, x));
    }
    return tf.matMul(layerNorm(x, param(weights, 'final.ln.gain'), param(weights, 'final.ln.bias')), param(weights, 'head'));
  });
  const values = logits.dataSync() as Float32Array;
  logits.dispose();
  cache.advance();
  if (values.length !== B * vocabSize) throw new Error('decodeStep: logits have an unexpected shape');
  return values;
}

/**
 * x_0 = E[token] + P[position] per row, read from the embedding tensors' memory: a few floats per
 * row, where tf's gather kernel costs ~100 µs on wasm.
 */
function embedRows(weights: TensorWeights, tokens: Int32Array, positions: Readonly<Int32Array>): Float32Array {
  const { dModel: D, vocabSize, maxContext } = weights.config;
  const E = heapView(param(weights, 'embed.tokens'));
  const P = heapView(param(weights, 'embed.positions'));
  const x = new Float32Array(tokens.length * D);
  tokens.forEach((token, row) => {
    const position = positions[row];
    if (!(token >= 0 && token < vocabSize && position < maxContext)) throw new Error(`decodeStep: token ${token} at position ${position} is out of range`);
    for (let f = 0; f < D; f++) x[row * D + f] = E[token * D + f] + P[position * D + f];
  });
  return x;
}

/**
 * Hidden states after the final LayerNorm at rows `outputs` (ascending; all T by default), [K, D],
 * and each layer's keys and values, [T, D].
 */
function forwardSequence(
  weights: TensorWeights,
  ids: readonly number[],
  outputs?: readonly number[],
): { hidden: tf.Tensor; keys: tf.Tensor[]; values: tf.Tensor[] } {
  return forwardPacked(weights, [{ ids, outputs }]);
}

/** Another continuation of a sequence: its first `from` tokens, then `ids` in place of the rest. */
interface Branch {
  from: number;
  ids: readonly number[];
}

/** A sequence to run through the blocks: `outputs`, the rows whose hidden states are wanted (all by default). */
interface PackedSequence {
  ids: readonly number[];
  outputs?: readonly number[];
  /** Continuations to run beside it (needs `outputs`): the hidden states of each one's rows but its last come back as `branchHidden`. */
  branches?: readonly Branch[];
}

/** A row of a sequence's part of the pack: its position, and the branch it belongs to (-1: the sequence's own ids). */
interface TreeRow {
  position: number;
  branch: number;
}

/**
 * `forwardSequence` for several sequences at once: their tokens packed one after another, [sum T, D]
 * (hidden: each sequence's `outputs` rows in turn; keys and values: one row per token in the pack).
 *
 * Every op outside attention acts on each token's row alone, so one op serves every sequence there,
 * and the result of each row is the one it would get alone; attention runs per sequence, each over
 * its own tokens. Everything in the last block after its keys and values acts on each row alone
 * too (its queries, the residual stream, W_o, the MLP, the final LayerNorm), so there only the
 * `outputs` rows are computed, picked by a one-hot S [K, T] per sequence (S x: a 2-D matMul has a
 * gradient on wasm, gather does not; one 1 per row, so the picked rows are exact). Earlier blocks
 * need every row: the next block's keys and values read them all.
 *
 * A prefix every sequence shares (a system prompt, say) runs once: the model is causal, so its
 * rows are the same in every sequence, and each sequence attends to that one copy (see
 * `sharedPrefix`). Its gradient is then the sum of what each sequence sends back through it.
 *
 * A sequence's branches run the same way: a branch's rows follow its sequence's in the pack and
 * attend to the sequence's rows before the branch's `from` and to their own (masked from the rest,
 * at their own positions), so each gets what `ids[0..from-1]` then its ids would get alone, for
 * the cost of its own tokens only.
 */
function forwardPacked(
  weights: TensorWeights,
  sequences: readonly PackedSequence[],
): { hidden: tf.Tensor; branchHidden?: tf.Tensor; keys: tf.Tensor[]; values: tf.Tensor[] } {
  const { vocabSize, dModel: D, nLayers, nHeads } = weights.config;
  for (const { ids, outputs, branches = [] } of sequences) {
    assertSequence(weights.config, ids);
    for (const branch of branches) {
      if (!outputs || !(branch.from >= 1 && branch.from <= ids.length)) {
        throw new Error(`a branch needs its sequence's outputs and a start in 1..${ids.length}, got ${branch.from}`);
      }
      assertSequence(weights.config, [...ids.slice(0, branch.from), ...branch.ids]);
    }
  }
  const shared = sharedPrefix(sequences);
  const everyRow = (T: number) => Array.from({ length: T }, (_, i) => i);
  const from = (start: number, end: number) => everyRow(end - start).map((i) => start + i);
  // Each sequence's rows in the pack after the shared prefix: its own ids, then its branches'.
  const treeRows: TreeRow[][] = sequences.map(({ ids, branches = [] }) => [
    ...from(shared, ids.length).map((position) => ({ position, branch: -1 })),
    ...branches.flatMap(({ from: start, ids: branchIds }, branch) => from(start, start + branchIds.length).map((position) => ({ position, branch }))),
  ]);
  // The pack's segments: the shared prefix (when there is one), then each sequence's own rows.
  const own = treeRows.map((rows) => rows.length);
  const segments = shared > 0 ? [shared, ...own] : own;
  const ownSegment = (n: number) => (shared > 0 ? n + 1 : n);
  const keySegments = (n: number) => (shared > 0 ? [0, n + 1] : [n]);
  const sharedRows = everyRow(shared).map((position) => ({ position, branch: -1 }));

  const positions = [...everyRow(shared), ...treeRows.flatMap((rows) => rows.map(({ position }) => position))];
  const longest = Math.max(...positions) + 1;
  const positionTable = tf.slice(param(weights, 'embed.positions'), [0, 0], [longest, D]);
  // Embeddings as one-hot products rather than gathers, which have no gradient on wasm.
  const tokens = [
    ...sequences[0].ids.slice(0, shared),
    ...sequences.flatMap(({ ids, branches = [] }) => [...ids.slice(shared), ...branches.flatMap((branch) => branch.ids)]),
  ];
  const tokenEmbeddings = tf.matMul(oneHot(tokens, vocabSize), param(weights, 'embed.tokens'));
  const inOrder = positions.every((position, i) => position === i);
  let x = tf.add(tokenEmbeddings, inOrder ? positionTable : tf.matMul(oneHot(positions, longest), positionTable));

  // Who attends to what: the prefix's rows to the prefix, each sequence's own rows to the prefix
  // and to themselves, at their positions (one set of masks per length: a batch has only a few),
  // a sequence with branches through masks of its own (`treeMasks`).
  const maskSets = new Map<number, tf.Tensor[]>();
  const fromShared = (T: number) => maskSets.get(T) ?? maskSets.set(T, causalMasks(from(shared, T), T, nHeads)).get(T)!;
  const masksOf = (n: number, queries: readonly TreeRow[]) => {
    const { ids, branches = [] } = sequences[n];
    if (branches.length > 0) return treeMasks(queries, [...sharedRows, ...treeRows[n]], branches, nHeads);
    const rows = queries.map(({ position }) => position);
    return queries === treeRows[n] ? fromShared(ids.length) : causalMasks(rows, ids.length, nHeads);
  };
  const everyGroup: AttentionGroup[] = [
    ...(shared > 0 ? [{ queries: shared, keySegments: [0], masks: causalMasks(everyRow(shared), shared, nHeads) }] : []),
    ...treeRows.map((rows, n) => ({ queries: rows.length, keySegments: keySegments(n), masks: masksOf(n, rows) })),
  ];
  // What the last block needs for the `outputs` rows alone (then every branch row but each
  // branch's last): each sequence's selection S [K_n, own_n] from its own rows, and their masks.
  // (A selection over the whole pack would cost K x sum T multiply-adds a feature, most of them by 0.)
  const picked = sequences.some(({ outputs }) => outputs !== undefined)
    ? sequences.map(({ ids, outputs }) => (outputs ?? everyRow(ids.length)).map((row) => row - shared))
    : undefined;
  const branchPicked = treeRows.map((rows) => everyRow(rows.length).filter((i) => rows[i].branch >= 0 && rows[i + 1]?.branch === rows[i].branch));
  const branched = branchPicked.some((rows) => rows.length > 0);
  const lastRows = picked && [...picked.map((rows, n) => ({ n, rows })), ...branchPicked.flatMap((rows, n) => (rows.length > 0 ? [{ n, rows }] : []))];
  const last = lastRows && {
    selects: lastRows.map(({ n, rows }) => ({ segment: ownSegment(n), select: oneHot(rows, own[n]) })),
    groups: lastRows.map(({ n, rows }) => ({
      queries: rows.length,
      keySegments: keySegments(n),
      masks: masksOf(
        n,
        rows.map((i) => treeRows[n][i]),
      ),
    })),
  };
  const keys: tf.Tensor[] = [];
  const values: tf.Tensor[] = [];
  for (let l = 0; l < nLayers; l++) {
    const p = (name: string) => param(weights, layerParam(l, name));
    const qkv = tf.matMul(layerNorm(x, p('ln1.gain'), p('ln1.bias')), p('attn.wqkv'));
    const [q, k, v] = tf.split(qkv, 3, 1);
    keys.push(k);
    values.push(v);
    const only = l === nLayers - 1 ? last : undefined;
    // The residual stream and the queries at the picked rows alone: S_n [x_n | q_n], sequence by sequence.
    const [rowsX, rowsQ] = only ? tf.split(selectRows(tf.concat([x, q], 1), segments, only.selects), 2, 1) : [x, q];
    const attended = causalAttention(rowsQ, k, v, segments, only?.groups ?? everyGroup, weights.config);
    x = tf.add(rowsX, tf.matMul(attended, p('attn.wo')));
    x = tf.add(x, mlp(weights, l, x));
  }
  const hidden = layerNorm(x, param(weights, 'final.ln.gain'), param(weights, 'final.ln.bias'));
  if (!branched) return { hidden, keys, values };
  const outputRows = picked!.reduce((sum, rows) => sum + rows.length, 0);
  const [sequenceHidden, branchHidden] = tf.split(hidden, [outputRows, hidden.shape[0] - outputRows], 0);
  return { hidden: sequenceHidden, branchHidden, keys, values };
}

/** Fewer shared tokens than this are not worth the extra attention ops of sharing them. */
const MIN_SHARED_PREFIX = 8;

/**
 * How many leading tokens every one of `sequences` shares, to run once: none for a single
 * sequence, and never a row that is one of the `outputs` or a sequence's last token (each must
 * keep a row of its own), nor past a branch's start. 0 when fewer than MIN_SHARED_PREFIX.
 */
function sharedPrefix(sequences: readonly PackedSequence[]): number {
  if (sequences.length < 2 || sequences.some(({ outputs }) => outputs === undefined)) return 0;
  const [first] = sequences;
  let shared = Math.min(...sequences.map(({ ids, outputs, branches = [] }) => Math.min(ids.length - 1, outputs![0], ...branches.map((branch) => branch.from))));
  for (const { ids } of sequences) {
    let i = 0;
    while (i < shared && ids[i] === first.ids[i]) i++;
    shared = i;
  }
  return shared >= MIN_SHARED_PREFIX ? shared : 0;
}

/** S_n t_n for the picked segments of packed t [sum of segments, F], packed in turn: [sum K, F]. */
function selectRows(t: tf.Tensor, segments: readonly number[], selects: readonly { segment: number; select: tf.Tensor }[]): tf.Tensor {
  const pieces = segments.length === 1 ? [t] : tf.split(t, [...segments], 0);
  const picked = selects.map(({ segment, select }) => tf.matMul(select, pieces[segment]));
  return picked.length === 1 ? picked[0] : tf.concat(picked, 0);
}

/** log softmax(hidden W_head / temperature) for each row of hidden [K, D] -> [K, V]. */
function headLogSoftmax(weights: TensorWeights, hidden: tf.Tensor, temperature: number): tf.Tensor2D {
  return tf.logSoftmax(tf.div(tf.matMul(hidden, param(weights, 'head')), temperature)) as tf.Tensor2D;
}

/** log softmax(hidden W_head / temperature)[targets[k]] for each row k of hidden [K, D] -> [K]. */
function headLogprobs(weights: TensorWeights, hidden: tf.Tensor, targets: readonly number[], temperature: number): tf.Tensor1D {
  return pickTargets(headLogSoftmax(weights, hidden, temperature), targets, weights.config.vocabSize);
}

/** Row k's value at column targets[k] of [K, V] -> [K], picked with a one-hot mask: gather has no gradient on wasm. */
function pickTargets(rows: tf.Tensor2D, targets: readonly number[], vocabSize: number): tf.Tensor1D {
  return tf.sum(tf.mul(rows, oneHot(targets, vocabSize)), 1) as tf.Tensor1D;
}

/** A run of query rows and the key segments (see `causalAttention`) they attend to, with their masks. */
interface AttentionGroup {
  queries: number;
  keySegments: readonly number[];
  /** Per head [queries, keys of the segments together]. */
  masks: readonly tf.Tensor[];
}

/**
 * Causal self-attention over packed sequences: keys and values k, v [sum of segments, D] cut into
 * `segments` (row counts, in order), and queries q [sum Q, D], group g owning groups[g].queries of
 * them in turn and attending to the keys of its segments only (a sequence's own, after a prefix
 * it shares with others), with its masks -> [sum Q, D]. Head h owns feature columns h*hd ..
 * (h+1)*hd-1 (hd = D / nHeads) of q, k and v, and its output the same columns; for each group:
 *
 *   S_h   = (q_h / sqrt(hd)) k_h^T + mask_h     [Q, T]   mask_h[i, j]: -slope_h (p_i - j) for j <= p_i, MASKED above
 *   out_h = softmax_rows(S_h) v_h               [Q, hd]
 *   out   = [out_0 | out_1 | ... | out_{H-1}]   [Q, D]
 *
 * Two 2-D matMuls per head and group rather than batched 3-D ones: on wasm, 2-D products run on
 * XNNPACK, batched ones on a scalar loop many times slower (forward and, through the gradient in
 * src/rl/gradients.ts, backward). The scaling, k's transpose (done explicitly, once: matMul's
 * transpose flags would also leave XNNPACK) and the cuts into heads and then segments are done
 * once for the whole pack. Each group's result is computed from its own rows and segments alone.
 */
function causalAttention(
  q: tf.Tensor,
  k: tf.Tensor,
  v: tf.Tensor,
  segments: readonly number[],
  groups: readonly AttentionGroup[],
  config: ModelConfig,
): tf.Tensor {
  const H = config.nHeads;
  const cut = (t: tf.Tensor, sizes: readonly number[], axis: number) => (sizes.length === 1 ? [t] : tf.split(t, [...sizes], axis));
  const join = (pieces: tf.Tensor[], axis: number) => (pieces.length === 1 ? pieces[0] : tf.concat(pieces, axis));
  const querySizes = groups.map(({ queries }) => queries);
  const qHeads = tf.split(tf.mul(q, 1 / Math.sqrt(headDim(config))), H, 1).map((qh) => cut(qh, querySizes, 0)); // H x G x [Q_g, hd], scaled
  const kHeadsT = tf.split(tf.transpose(k), H, 0).map((kh) => cut(kh, segments, 1)); // H x segments x [hd, rows]
  const vHeads = tf.split(v, H, 1).map((vh) => cut(vh, segments, 0)); // H x segments x [rows, hd]
  const outHeads = qHeads.map((queries, h) =>
    join(
      queries.map((qhg, g) => {
        const { keySegments, masks } = groups[g];
        const kT = join(
          keySegments.map((segment) => kHeadsT[h][segment]),
          1,
        ); // [hd, T]
        const vg = join(
          keySegments.map((segment) => vHeads[h][segment]),
          0,
        ); // [T, hd]
        return tf.matMul(tf.softmax(tf.add(tf.matMul(qhg, kT), masks[h])), vg); // [Q_g, hd]
      }),
      0,
    ),
  );
  return tf.concat(outHeads, 1);
}

/**
 * The same attention for one new query per row against the cache, row r's query at position
 * p_r = lengths[r] (its keys and values already written there): qkv [B, 3D] (queries in columns
 * 0..D-1, scaled here by 1/sqrt(hd) as a float32, as `causalAttention`'s tf.mul does) -> [B, D].
 * For each row r and head h, over the positions c <= p_r alone:
 *
 *   S[r, h, c] = q_rh . k_rhc + alibi_h(p_r - c)
 *   out_rh     = sum_{c <= p_r} softmax_c(S[r, h])[c] v_rhc   (columns h*hd .. (h+1)*hd-1 of out)
 *
 * One call of the `attention` kernel (WebAssembly SIMD on tfjs's heap, see simdKernels.ts) per
 * layer, over each (row, head)'s own region of the cache, in place. Row r's result is computed
 * from row r alone and never reads past its own length, so it depends neither on the rest of the
 * batch nor on the capacity C.
 */
function cachedAttention(qkv: tf.Tensor, lengths: tf.Tensor, cache: KVCache, layer: number, alibi: tf.Tensor, config: ModelConfig): tf.Tensor {
  const { nHeads: H, dModel: D, maxContext } = config;
  const [B, C] = [cache.rows, cache.capacity];
  const attended = tf.zeros([B, D]);
  const scores = tf.zeros([C]);
  const [from, keys, values, bias, at, s, out] = [qkv, cache.layerKeys(layer), cache.layerValues(layer), alibi, lengths, scores, attended].map(heapAddress);
  const queryScale = Math.fround(1 / Math.sqrt(headDim(config)));
  simdKernels().attention(from, keys, values, bias, at, s, out, B, H, headDim(config), C, maxContext, queryScale);
  return attended;
}

/**
 * ALiBi slopes: head h lowers the score of a key d tokens back by slope_h * d, slopes forming the
 * geometric sequence 2^(-8/H), 2^(-16/H), ..., 2^(-8). The steepest heads attend mostly to the last
 * few tokens from the start, so what was just said (the latest observation) shapes the next token
 * even before training has taught attention where to look; the flattest see the whole context.
 */
function alibiSlopes(nHeads: number): Float32Array {
  return Float32Array.from({ length: nHeads }, (_, h) => 2 ** ((-8 * (h + 1)) / nHeads));
}

/** The bias of a query at `position` for the key at `column`: ALiBi where visible, MASKED after. */
function fillBiasRow(row: Float32Array, slope: number, position: number): void {
  for (let column = 0; column < row.length; column++) row[column] = column <= position ? -slope * (position - column) : MASKED;
}

/**
 * Per head [Q, K] for a sequence with branches: the biases of the query rows `queries` for the key
 * rows `keys` (the shared prefix's, then the sequence's own). A row sees the rows of its own
 * branch at or before its position, and a branch's rows the sequence's rows before the branch's
 * start too; the sequence's rows see only the sequence's.
 */
function treeMasks(queries: readonly TreeRow[], keys: readonly TreeRow[], branches: readonly Branch[], nHeads: number): tf.Tensor[] {
  const sees = (query: TreeRow, key: TreeRow) =>
    key.position <= query.position && (key.branch === query.branch || (key.branch === -1 && key.position < branches[query.branch].from));
  return Array.from(alibiSlopes(nHeads), (slope) => {
    const bias = new Float32Array(queries.length * keys.length);
    queries.forEach((query, i) =>
      keys.forEach((key, j) => {
        bias[i * keys.length + j] = sees(query, key) ? -slope * (query.position - key.position) : MASKED;
      }),
    );
    return tf.tensor2d(bias, [queries.length, keys.length]);
  });
}

/** Per head [Q, T]: row i holds the biases of the query at position queries[i] for keys 0..T-1. */
function causalMasks(queries: readonly number[], T: number, nHeads: number): tf.Tensor[] {
  return Array.from(alibiSlopes(nHeads), (slope) => {
    const bias = new Float32Array(queries.length * T);
    queries.forEach((position, i) => fillBiasRow(bias.subarray(i * T, (i + 1) * T), slope, position));
    return tf.tensor2d(bias, [queries.length, T]);
  });
}

/**
 * [nHeads, maxContext], head h's row holding -slope_h * (maxContext - 1 - i) at column i: the ALiBi
 * biases of keys maxContext-1, ..., 1, 0 tokens back, so that a query at position p finds its keys'
 * biases for columns 0..p ascending from column maxContext-1-p. The same float32 values as
 * `fillBiasRow`, so both paths score alike. Computed once per shape.
 */
function reversedAlibi(nHeads: number, maxContext: number): Float32Array {
  const key = `${nHeads}/${maxContext}`;
  let table = reversedAlibiTables.get(key);
  if (!table) {
    table = new Float32Array(nHeads * maxContext);
    alibiSlopes(nHeads).forEach((slope, h) => {
      for (let i = 0; i < maxContext; i++) table![h * maxContext + i] = -slope * (maxContext - 1 - i);
    });
    reversedAlibiTables.set(key, table);
  }
  return table;
}
const reversedAlibiTables = new Map<string, Float32Array>();

/** A sequence `tokenLogprobs` can score: at least one target, all in range, a usable temperature. */
function assertScorable(config: ModelConfig, ids: readonly number[], temperature: number): void {
  if (ids.length < 2) throw new Error(`tokenLogprobs needs at least 2 tokens, got ${ids.length}`);
  if (!(Number.isFinite(temperature) && temperature > 0)) throw new Error(`temperature must be > 0, got ${temperature}`);
  assertSequence(config, ids);
}

function assertSequence({ vocabSize, maxContext }: ModelConfig, ids: readonly number[]): void {
  if (ids.length < 1 || ids.length > maxContext) throw new Error(`sequence of ${ids.length} tokens does not fit the context (1..${maxContext})`);
  const bad = ids.findIndex((id) => !Number.isInteger(id) || id < 0 || id >= vocabSize);
  if (bad >= 0) throw new Error(`token ${ids[bad]} at index ${bad} is outside the vocabulary (0..${vocabSize - 1})`);
}

/**
 * [n, depth] float32 one-hot rows, written on the host: one upload instead of three kernels, and
 * any depth (tf.oneHot needs 2 or more, and on wasm writes int bits when asked for float32).
 */
export function oneHot(ids: readonly number[], depth: number): tf.Tensor2D {
  const rows = new Float32Array(ids.length * depth);
  ids.forEach((id, i) => {
    if (!(Number.isInteger(id) && id >= 0 && id < depth)) throw new Error(`oneHot: index ${id} is outside 0..${depth - 1}`);
    rows[i * depth + id] = 1;
  });
  return tf.tensor2d(rows, [ids.length, depth]);
}

/** y = (x - mean) / sqrt(var + eps) * gain + bias, statistics over the feature axis of x [N, D]. */
function layerNorm(x: tf.Tensor, gain: tf.Tensor, bias: tf.Tensor): tf.Tensor {
  const mean = tf.mean(x, -1, true);
  const centered = tf.sub(x, mean);
  const variance = tf.mean(tf.square(centered), -1, true);
  return tf.add(tf.mul(tf.mul(centered, tf.rsqrt(tf.add(variance, LAYER_NORM_EPSILON))), gain), bias);
}

/** relu(LN2(x) W_1) W_2 of block `layer`. */
function mlp(weights: TensorWeights, layer: number, x: tf.Tensor): tf.Tensor {
  const p = (name: string) => param(weights, layerParam(layer, name));
  return tf.matMul(tf.relu(tf.matMul(layerNorm(x, p('ln2.gain'), p('ln2.bias')), p('mlp.w1'))), p('mlp.w2'));
}

function param(weights: TensorWeights, name: string): tf.Tensor {
  const tensor = weights.params[name];
  if (!tensor) throw new Error(`missing parameter '${name}'`);
  return tensor;
}

/**
 * WebAssembly SIMD kernels that run on tfjs's own wasm heap, for cached attention (see
 * `cachedAttention` in transformer.ts):
 *
 * - `vecMat`: the vector-matrix product
 *
 *     out[i] = (sum_{t < T} a[t] * M[t, i]) + bias[i]      for i < width
 *
 *   with every sum taken in order of t, one float32 multiply and one float32 add per term (so each
 *   out[i] is the same number whether it is computed in a SIMD lane, in the scalar tail, or alone).
 * - `expShift`: e[t] = exp(scale (x[t] - max_t x)) in place over n floats, returning sum_t e[t]:
 *   a softmax's numerators and denominator (attention's, and the sampler's at a temperature).
 * - `writeKV`: one decode step's keys and values, from the qkv projection on the heap into a
 *   layer's cache, laid out as kvCache.ts describes.
 * - `attention`: one decode step's attention for every (row, head) of the cache in one call:
 *   scores = q K^T + alibi over the row's own filled positions (K stored transposed in blocks of 16
 *   positions), their softmax, and out = probs V (V row-major). Each (row, head) reads its part of
 *   the cache once, front to back; at batch 32 that read is most of a decode step's memory
 *   traffic. tfjs's own ops do worse on wasm: its batched matMul is a scalar loop.
 *
 * The module imports tfjs's memory, so every pointer is a byte address of a tensor on that heap
 * (see `heapAddress`): nothing is copied in or out. The bytes are generated below from a few named
 * instructions, one statement per line with its meaning beside it.
 */
import * as tf from '@tensorflow/tfjs-core';
import { BackendWasm } from '@tensorflow/tfjs-backend-wasm';

/**
 * out[i] = (sum_{t < T} a[t] M[t, i]) + bias[i] for i < width, T >= 1, with every address in bytes
 * and M[t, i] the float at M + t rowBytes + floor(i / 16) blockBytes + 4 (i mod 16): columns come
 * in blocks of 16 adjacent floats, rowBytes apart from one t to the next and blockBytes apart from
 * one block to the next. A row-major [T, n] matrix has rowBytes = 4n, blockBytes = 64 (see
 * `rowMajor`); `bias` 0 adds nothing.
 */
export type VecMat = (a: number, T: number, M: number, rowBytes: number, blockBytes: number, bias: number, out: number, width: number) => void;

/**
 * e[t] = exp(scale (x[t] - max_{t < n} x[t])) written over x[t] for t < n (n >= 1, scale > 0),
 * returning the sum of the e[t] (in float32, lane by lane, then the lanes). It writes up to 3
 * floats past n too: x must have room for n rounded up to a multiple of 4. Exponents below -87
 * give exactly 0; elsewhere exp is within ~1e-7 relative of the true value (see `exp4`).
 */
export type ExpShift = (x: number, n: number, scale: number) => number;

/**
 * Writes one decode step's keys and values into a layer's cache: for each row r < rows and head
 * h < heads, at position p = lengths[r] (int32) of region (r heads + h) capacity hd floats, feature
 * j of the key from qkv[r, D + h hd + j] and of the value from qkv[r, 2D + h hd + j], qkv being
 * [rows, 3D] with D = heads hd. Keys are laid out in blocks of BLOCK_COLUMNS positions, transposed,
 * values row-major (the layout of kvCache.ts).
 */
export type WriteKV = (qkv: number, keys: number, values: number, lengths: number, rows: number, heads: number, hd: number, capacity: number) => void;

/**
 * For each row r < rows and head h < heads, with p = lengths[r] (int32), n = p + 1, the query
 * q_rh = queryScale qkv[r, h hd .. (h+1) hd) (rounded to float32) and region (r heads + h)
 * capacity hd floats into `keys` and `values` (laid out as WriteKV writes them):
 *
 *   s[c]      = q_rh . keys_rh[c] + alibi[h maxContext + maxContext - n + c]     for c < n
 *   out_rh[j] = (sum_{c < n} exp(s[c] - max s) values_rh[c, j]) / sum_{c < n} exp(s[c] - max s)
 *
 * out is [rows, heads hd], alibi [heads, maxContext]; `scores` is scratch of `capacity` floats
 * (capacity a multiple of 4, n <= capacity).
 */
export type Attention = (
  qkv: number,
  keys: number,
  values: number,
  alibi: number,
  lengths: number,
  scores: number,
  out: number,
  rows: number,
  heads: number,
  hd: number,
  capacity: number,
  maxContext: number,
  queryScale: number,
) => void;

/** Columns per block of vecMat's matrix layout: four SIMD vectors of 4 lanes share each a[t]. */
export const BLOCK_COLUMNS = 16;

/** rowBytes and blockBytes of a row-major matrix with rows of `n` floats. */
export function rowMajor(n: number): [rowBytes: number, blockBytes: number] {
  return [4 * n, 64];
}

/** The little of the WebAssembly JS API used here (the project's TypeScript libs do not declare it). */
interface WasmMemory {
  readonly buffer: ArrayBuffer | SharedArrayBuffer;
}
interface WasmApi {
  Memory: abstract new () => WasmMemory;
  Module: new (bytes: Uint8Array) => object;
  Instance: new (module: object, imports: object) => { exports: Record<string, unknown> };
}
const WebAssemblyApi = (globalThis as unknown as { WebAssembly: WasmApi }).WebAssembly;

export interface SimdKernels {
  vecMat: VecMat;
  expShift: ExpShift;
  writeKV: WriteKV;
  attention: Attention;
}

let instance: { memory: WasmMemory; kernels: SimdKernels } | undefined;

/** The kernels, bound to the memory of the current (wasm) tfjs backend; built once per thread. */
export function simdKernels(): SimdKernels {
  const backend = tf.backend();
  if (!(backend instanceof BackendWasm)) throw new Error('simdKernels needs the wasm backend (call initBackend first)');
  // Emscripten keeps the module's exports, its memory among them, in `asm`.
  const memory = (backend.wasm as unknown as { asm?: { memory?: unknown } }).asm?.memory;
  if (!(memory instanceof WebAssemblyApi.Memory)) throw new Error("simdKernels: cannot find the tfjs wasm backend's memory");
  if (typeof SharedArrayBuffer !== 'undefined' && memory.buffer instanceof SharedArrayBuffer) {
    throw new Error('simdKernels: the multi-threaded tfjs wasm backend is not supported');
  }
  if (instance?.memory !== memory) {
    const { exports } = new WebAssemblyApi.Instance(new WebAssemblyApi.Module(moduleBytes()), { env: { memory } });
    instance = {
      memory,
      kernels: {
        vecMat: exports.vecMat as VecMat,
        expShift: exports.expShift as ExpShift,
        writeKV: exports.writeKV as WriteKV,
        attention: exports.attention as Attention,
      },
    };
  }
  return instance.kernels;
}

// ---- instruction encoding (the subset used) ----

type Code = number[];
const uleb = (value: number): Code => {
  const bytes: Code = [];
  do {
    let byte = value & 0x7f;
    value >>>= 7;
    if (value !== 0) byte |= 0x80;
    bytes.push(byte);
  } while (value !== 0);
  return bytes;
};
const sleb = (value: number): Code => {
  const bytes: Code = [];
  for (;;) {
    const byte = value & 0x7f;
    value >>= 7;
    if ((value === 0 && (byte & 0x40) === 0) || (value === -1 && (byte & 0x40) !== 0)) return [...bytes, byte];
    bytes.push(byte | 0x80);
  }
};
const vector = (items: Code[]): Code => [...uleb(items.length), ...items.flat()];
const section = (id: number, items: Code[]): Code => {
  const body = vector(items);
  return [id, ...uleb(body.length), ...body];
};
const name = (text: string): Code => vector([...Buffer.from(text, 'utf8')].map((byte) => [byte]));

const I32 = 0x7f;
const F32 = 0x7d;
const V128 = 0x7b;
const simd = (opcode: number, ...immediates: number[]): Code => [0xfd, ...uleb(opcode), ...immediates];
/** Memory access immediates: log2 of the alignment promised (4 bytes), then the byte offset. */
const memarg = (offset: number): Code => [2, ...uleb(offset)];

const op = {
  get: (local: number): Code => [0x20, ...uleb(local)],
  set: (local: number): Code => [0x21, ...uleb(local)],
  tee: (local: number): Code => [0x22, ...uleb(local)],
  call: (index: number): Code => [0x10, ...uleb(index)],
  i32: (value: number): Code => [0x41, ...sleb(value)],
  add: [0x6a],
  sub: [0x6b],
  mul: [0x6c],
  and: [0x71],
  shl: [0x74],
  ltU: [0x49],
  gtU: [0x4b],
  geU: [0x4f],
  i32Load: (offset: number): Code => [0x28, ...memarg(offset)],
  f32: (value: number): Code => [0x43, ...new Uint8Array(new Float32Array([value]).buffer)],
  f32Load: (offset: number): Code => [0x2a, ...memarg(offset)],
  f32Store: (offset: number): Code => [0x38, ...memarg(offset)],
  f32Add: [0x92],
  f32Mul: [0x94],
  f32Div: [0x95],
  f32Max: [0x97],
  v128Load: (offset: number): Code => simd(0x00, ...memarg(offset)),
  v128Load32Splat: (offset: number): Code => simd(0x09, ...memarg(offset)),
  v128Store: (offset: number): Code => simd(0x0b, ...memarg(offset)),
  v128Zero: simd(0x0c, ...new Array(16).fill(0)),
  /** The same float in all four lanes. */
  f32x4: (value: number): Code => simd(0x0c, ...new Uint8Array(new Float32Array([value, value, value, value]).buffer)),
  f32x4Splat: simd(0x13),
  f32x4Lane: (lane: number): Code => simd(0x1f, lane),
  f32x4Lt: simd(0x43),
  v128AndNot: simd(0x4f),
  f32x4Nearest: simd(0x6a),
  i32x4Shl: simd(0xab),
  i32x4Add: simd(0xae),
  f32x4Add: simd(0xe4),
  f32x4Sub: simd(0xe5),
  f32x4Mul: simd(0xe6),
  f32x4Max: simd(0xe9),
  i32x4TruncSatF32x4: simd(0xf8),
  /** Blocks, loops and ifs take no operands and leave nothing (block type 0x40). */
  block: [0x02, 0x40],
  loop: [0x03, 0x40],
  if: [0x04, 0x40],
  end: [0x0b],
  br: (depth: number): Code => [0x0c, ...uleb(depth)],
  brIf: (depth: number): Code => [0x0d, ...uleb(depth)],
};
const code = (...parts: Code[]): Code => parts.flat();
/** local += bytes */
const advance = (local: number, bytes: Code): Code => code(op.get(local), bytes, op.add, op.set(local));

/**
 * vecMat(a, T, M, rowBytes, blockBytes, bias, out, width). Columns i go through SIMD lanes 16 at a
 * time (a block: four vectors sharing each load of a[t]) while 16 remain, then 4 at a time, then
 * one at a time in scalar (those within the last, partial block, where columns are adjacent); each
 * column's sum runs over t in order whichever way. One statement per line below.
 */
function vecMatBody(): Code {
  // Parameters, then locals.
  const [a, T, M, rowBytes, blockBytes, bias, out, width] = [0, 1, 2, 3, 4, 5, 6, 7];
  const [aEnd, outEnd, ap, mp] = [8, 9, 10, 11];
  const [aSplat, ...acc] = [12, 13, 14, 15, 16];
  const [aScalar, sum] = [17, 18];
  const locals = [
    [4, I32],
    [5, V128],
    [2, F32],
  ];

  /** `term` for t = 0..T-1 (T >= 1): ap walks a, 4 bytes a step; mp walks down M, a row a step. */
  const overT = (term: Code): Code =>
    code(
      code(op.get(a), op.set(ap)), // ap = a
      op.loop,
      term,
      advance(ap, op.i32(4)), // ap += 4
      advance(mp, op.get(rowBytes)), // mp += rowBytes
      code(op.get(ap), op.get(aEnd), op.ltU, op.brIf(0)), // again while ap < aEnd
      op.end,
    );

  /**
   * While `columns` columns remain: sums[k] = sum_t a[t] M[t, i + k-th group] (+ bias) stored at
   * out[i ..]; i += columns (out, M and bias move along: M to the next block after a whole one).
   * SIMD sums hold 4 columns, the scalar one 1.
   */
  const columnLoop = (columns: number, simd: boolean): Code => {
    const sums = simd ? acc.slice(0, columns / 4) : [sum];
    const [zero, load, store, mul, add] = simd
      ? [op.v128Zero, op.v128Load, op.v128Store, op.f32x4Mul, op.f32x4Add]
      : [op.f32(0), op.f32Load, op.f32Store, op.f32Mul, op.f32Add];
    const [aT, loadAT] = simd ? [aSplat, op.v128Load32Splat(0)] : [aScalar, op.f32Load(0)];
    /** Byte offset of sums[k]'s columns from the group's first. */
    const at = (k: number) => (simd ? 16 * k : 4 * k);
    return code(
      op.block,
      op.loop,
      code(op.get(out), op.i32(4 * columns), op.add, op.get(outEnd), op.gtU, op.brIf(1)), // leave if out + 4 columns > outEnd
      ...sums.map((s) => code(zero, op.set(s))), // sums[k] = 0
      code(op.get(M), op.set(mp)), // mp = M
      overT(
        code(
          code(op.get(ap), loadAT, op.set(aT)), // aT = a[t] (in every lane)
          ...sums.map((s, k) => code(op.get(s), op.get(aT), op.get(mp), load(at(k)), mul, add, op.set(s))), // sums[k] += aT * M[t, ..]
        ),
      ),
      code(op.get(bias), op.if), // if bias:
      ...sums.map((s, k) => code(op.get(s), op.get(bias), load(at(k)), add, op.set(s))), //   sums[k] += bias[..]
      advance(bias, op.i32(4 * columns)), //   bias += 4 columns
      op.end,
      ...sums.map((s, k) => code(op.get(out), op.get(s), store(at(k)))), // out[..] = sums[k]
      advance(out, op.i32(4 * columns)), // out += 4 columns
      columns === BLOCK_COLUMNS ? advance(M, op.get(blockBytes)) : advance(M, op.i32(4 * columns)), // M += blockBytes, or 4 columns within a block
      op.br(0),
      op.end,
      op.end,
    );
  };

  return code(
    vector(locals.map(([count, type]) => [...uleb(count), type])),
    code(op.get(a), op.get(T), op.i32(2), op.shl, op.add, op.set(aEnd)), // aEnd = a + 4 T
    code(op.get(out), op.get(width), op.i32(2), op.shl, op.add, op.set(outEnd)), // outEnd = out + 4 width
    columnLoop(BLOCK_COLUMNS, true),
    columnLoop(4, true),
    columnLoop(1, false),
    op.end,
  );
}

/** Function indices in the module, in the order of its function and code sections. */
const VEC_MAT = 0;
const EXP_SHIFT = 1;

/** A score this far below the row's largest has exp 0 (float32's exp(-87.4) is its least normal). */
const EXP_FLOOR = -87;
/** Written past a row's n scores to fill its last group of four: its exp is 0 and it is no max. */
const PAD = -1e9;

/**
 * exp(y) in each lane of the v128 `y` (every lane <= 0), left on the stack; `k` and `r` are v128
 * locals it uses. y = k ln 2 + r with k = round(y / ln 2) and |r| <= ln(2)/2: adding MAGIC
 * (1.5 2^23 + 127) rounds y / ln 2 to an integer and leaves k + 127 in the float's low bits, which
 * shifted left by 23 are the bits of 2^k. ln 2 is taken in two parts so that k ln2hi is exact;
 * exp(r) = 1 + r + r^2 P(r) with Cephes' degree-5 minimax P for expf (relative error ~1e-7).
 * Lanes below EXP_FLOOR give 0 (there 2^k would leave the normal range).
 */
function exp4(y: number, k: number, r: number): Code {
  const [LOG2E, MAGIC, LN2_HI, LN2_LO] = [Math.LOG2E, 12582912 + 127, 0.693359375, -2.1219444e-4].map(op.f32x4);
  const P = [1.98756915e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1].map(op.f32x4);
  return code(
    code(op.get(y), LOG2E, op.f32x4Mul, MAGIC, op.f32x4Add, op.set(k)), // k = y log2 e + MAGIC (rounded)
    code(op.get(y), op.get(k), MAGIC, op.f32x4Sub, op.tee(r)), // k - MAGIC: the integer k
    code(LN2_HI, op.f32x4Mul, op.f32x4Sub), // y - k ln2hi
    code(op.get(r), LN2_LO, op.f32x4Mul, op.f32x4Sub, op.set(r)), // r = y - k ln2hi - k ln2lo
    P[0], // P = P0
    ...P.slice(1).map((c) => code(op.get(r), op.f32x4Mul, c, op.f32x4Add)), // P = P r + Pi, i = 1 .. 5
    code(op.get(r), op.get(r), op.f32x4Mul, op.f32x4Mul, op.get(r), op.f32x4Add, op.f32x4(1), op.f32x4Add), // e^r = P r^2 + r + 1
    code(op.get(k), op.i32(23), op.i32x4Shl, op.f32x4Mul), // times 2^k
    code(op.get(y), op.f32x4(EXP_FLOOR), op.f32x4Lt, op.v128AndNot), // 0 where y < EXP_FLOOR
  );
}

/** expShift(x, n, scale) -> f32: see ExpShift. */
function expShiftBody(): Code {
  const [x, n, scaleBy] = [0, 1, 2];
  const [end, p] = [3, 4];
  const [m, sum, y, k, r, scale] = [5, 6, 7, 8, 9, 10];
  const locals = [
    [2, I32],
    [6, V128],
  ];
  return code(
    vector(locals.map(([count, type]) => [...uleb(count), type])),
    code(op.get(x), op.get(n), op.i32(3), op.add, op.i32(-4), op.and, op.i32(2), op.shl, op.add, op.set(end)), // end = x + 4 ceil4(n)
    code(op.get(x), op.get(n), op.i32(2), op.shl, op.add, op.set(p)), // p = x + 4 n
    op.block,
    op.loop,
    code(op.get(p), op.get(end), op.geU, op.brIf(1)), // leave if p >= end
    code(op.get(p), op.f32(PAD), op.f32Store(0)), // x[..] = PAD
    advance(p, op.i32(4)), // p += 4
    op.br(0),
    op.end,
    op.end,
    code(op.get(x), op.v128Load(0), op.set(m)), // m = x[0..4)
    code(op.get(x), op.i32(16), op.add, op.set(p)), // p = x + 16
    op.block,
    op.loop,
    code(op.get(p), op.get(end), op.geU, op.brIf(1)), // leave if p >= end
    code(op.get(m), op.get(p), op.v128Load(0), op.f32x4Max, op.set(m)), // m = max(m, x[p..])
    advance(p, op.i32(16)), // p += 16
    op.br(0),
    op.end,
    op.end,
    code(op.get(m), op.f32x4Lane(0), op.get(m), op.f32x4Lane(1), op.f32Max), // max of the lanes:
    code(op.get(m), op.f32x4Lane(2), op.get(m), op.f32x4Lane(3), op.f32Max, op.f32Max), //   (m0 max m1) max (m2 max m3)
    code(op.f32x4Splat, op.set(m)), // m = that max in every lane
    code(op.get(scaleBy), op.f32x4Splat, op.set(scale)), // scale in every lane
    code(op.v128Zero, op.set(sum)), // sum = 0
    code(op.get(x), op.set(p)), // p = x
    op.loop,
    code(op.get(p), op.v128Load(0), op.get(m), op.f32x4Sub, op.get(scale), op.f32x4Mul, op.set(y)), // y = scale (x[p..] - max)
    code(op.get(p), exp4(y, k, r), op.tee(y), op.v128Store(0)), // x[p..] = exp(y)
    code(op.get(sum), op.get(y), op.f32x4Add, op.set(sum)), // sum += exp(y)
    advance(p, op.i32(16)), // p += 16
    code(op.get(p), op.get(end), op.ltU, op.brIf(0)), // again while p < end
    op.end,
    code(op.get(sum), op.f32x4Lane(0), op.get(sum), op.f32x4Lane(1), op.f32Add), // return ((s0 + s1)
    code(op.get(sum), op.f32x4Lane(2), op.f32Add, op.get(sum), op.f32x4Lane(3), op.f32Add), //   + s2) + s3
    op.end,
  );
}

/**
 * `body` for every (row, head), row < rows outermost (rows and heads at least 1: the loops test at
 * their end), with these set: `p` = lengths[row] (int32),
 * `rh` = row heads + head and `region` = rh regionBytes (bytes from a layer's keys or values to
 * the (row, head)'s region). Loop counters in `row` and `head`.
 */
function forEachRowAndHead(
  { lengths, rows, heads, regionBytes }: { lengths: number; rows: number; heads: number; regionBytes: number },
  { row, head, p, rh, region }: { row: number; head: number; p: number; rh: number; region: number },
  body: Code,
): Code {
  return code(
    code(op.i32(0), op.set(row)), // row = 0
    op.loop,
    code(op.get(lengths), op.get(row), op.i32(2), op.shl, op.add, op.i32Load(0), op.set(p)), //   p = lengths[row]
    code(op.i32(0), op.set(head)), //   head = 0
    op.loop,
    code(op.get(row), op.get(heads), op.mul, op.get(head), op.add, op.tee(rh)), //     rh = row heads + head
    code(op.get(regionBytes), op.mul, op.set(region)), //     region = rh regionBytes
    body,
    advance(head, op.i32(1)), //     head += 1
    code(op.get(head), op.get(heads), op.ltU, op.brIf(0)), //   again while head < heads
    op.end,
    advance(row, op.i32(1)), //   row += 1
    code(op.get(row), op.get(rows), op.ltU, op.brIf(0)), // again while row < rows
    op.end,
  );
}

/** writeKV(qkv, keys, values, lengths, rows, heads, hd, capacity): see WriteKV. */
function writeKVBody(): Code {
  const [qkv, keys, values, lengths, rows, heads, hd, capacity] = [0, 1, 2, 3, 4, 5, 6, 7];
  const [row, head, p, rh, region, regionBytes, from, fromEnd, key, value, valueOffset] = [8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18];
  const locals = [[11, I32]];
  const blockFloats = BLOCK_COLUMNS;
  return code(
    vector(locals.map(([count, type]) => [...uleb(count), type])),
    code(op.get(capacity), op.get(hd), op.mul, op.i32(2), op.shl, op.set(regionBytes)), // regionBytes = 4 capacity hd
    code(op.get(heads), op.get(hd), op.mul, op.i32(2), op.shl, op.set(valueOffset)), // valueOffset = 4 D: from a key to its value in qkv
    forEachRowAndHead(
      { lengths, rows, heads, regionBytes },
      { row, head, p, rh, region },
      code(
        // from = qkv + 4 (row 3D + D + head hd): the head's key in the row of qkv
        code(op.get(qkv), op.get(row), op.i32(3), op.mul, op.i32(1), op.add, op.get(valueOffset), op.mul, op.add),
        code(op.get(head), op.get(hd), op.mul, op.i32(2), op.shl, op.add, op.tee(from)),
        code(op.get(hd), op.i32(2), op.shl, op.add, op.set(fromEnd)), // fromEnd = from + 4 hd
        // key = keys + region + 4 ((p - p mod 16) hd + p mod 16); value = values + region + 4 p hd
        code(op.get(keys), op.get(region), op.add, op.get(p), op.i32(-blockFloats), op.and, op.get(hd), op.mul),
        code(op.get(p), op.i32(blockFloats - 1), op.and, op.add, op.i32(2), op.shl, op.add, op.set(key)),
        code(op.get(values), op.get(region), op.add, op.get(p), op.get(hd), op.mul, op.i32(2), op.shl, op.add, op.set(value)),
        op.loop,
        code(op.get(key), op.get(from), op.f32Load(0), op.f32Store(0)), //       key feature j (16 floats apart)
        code(op.get(value), op.get(from), op.get(valueOffset), op.add, op.f32Load(0), op.f32Store(0)), //       value feature j
        advance(key, op.i32(4 * blockFloats)), //       key += 64
        advance(value, op.i32(4)), //       value += 4
        advance(from, op.i32(4)), //       from += 4
        code(op.get(from), op.get(fromEnd), op.ltU, op.brIf(0)), //     again while from < fromEnd
        op.end,
      ),
    ),
    op.end,
  );
}

/** attention(qkv, keys, values, alibi, lengths, scores, out, rows, heads, hd, capacity, maxContext, queryScale): see Attention. */
function attentionBody(): Code {
  const [qkv, keys, values, alibi, lengths, scores, out, rows, heads, hd, capacity, maxContext, queryScale] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12];
  const [row, head, p, rh, region, regionBytes, n, from, o, oEnd] = [13, 14, 15, 16, 17, 18, 19, 20, 21, 22];
  const inverse = 23;
  const locals = [
    [10, I32],
    [1, F32],
  ];
  /** out[o ..o + 4 hd) = out[..] times `factor` (an f32 on the stack after the address). */
  const scaleOut = (load: Code, factor: Code) =>
    code(
      code(op.get(o), op.get(hd), op.i32(2), op.shl, op.add, op.set(oEnd)), // oEnd = o + 4 hd
      op.loop,
      code(op.get(o), load, factor, op.f32Mul, op.f32Store(0)), // out[o] = load * factor
      advance(o, op.i32(4)), // o += 4
      advance(from, op.i32(4)), // from += 4
      code(op.get(o), op.get(oEnd), op.ltU, op.brIf(0)), // again while o < oEnd
      op.end,
    );
  const outRow = code(op.get(out), op.get(rh), op.get(hd), op.mul, op.i32(2), op.shl, op.add); // out + 4 rh hd
  return code(
    vector(locals.map(([count, type]) => [...uleb(count), type])),
    code(op.get(capacity), op.get(hd), op.mul, op.i32(2), op.shl, op.set(regionBytes)), // regionBytes = 4 capacity hd
    forEachRowAndHead(
      { lengths, rows, heads, regionBytes },
      { row, head, p, rh, region },
      code(
        code(op.get(p), op.i32(1), op.add, op.set(n)), // n = p + 1 positions
        // out_rh = queryScale q_rh (the head's query, columns head hd .. of qkv's row), until the values overwrite it
        code(
          op.get(qkv),
          op.get(row),
          op.i32(3),
          op.mul,
          op.get(heads),
          op.mul,
          op.get(head),
          op.add,
          op.get(hd),
          op.mul,
          op.i32(2),
          op.shl,
          op.add,
          op.set(from),
        ),
        code(outRow, op.set(o)),
        scaleOut(code(op.get(from), op.f32Load(0)), op.get(queryScale)),
        // scores[c] = q_rh . keys_rh[c] + alibi[head, maxContext - n + c], c < n
        code(outRow, op.get(hd)), // a = out_rh, T = hd
        code(op.get(keys), op.get(region), op.add), // M = keys + region
        code(op.i32(4 * BLOCK_COLUMNS), op.i32(4 * BLOCK_COLUMNS), op.get(hd), op.mul), // keys in blocks: rowBytes 64, blockBytes 64 hd
        code(op.get(alibi), op.get(head), op.get(maxContext), op.mul, op.get(maxContext), op.add, op.get(n), op.sub, op.i32(2), op.shl, op.add), // bias row
        code(op.get(scores), op.get(n), op.call(VEC_MAT)), // out = scores, width = n
        // inverse = 1 / sum_c exp(scores[c] - max), scores[c] = exp(scores[c] - max)
        code(op.f32(1), op.get(scores), op.get(n), op.f32(1), op.call(EXP_SHIFT), op.f32Div, op.set(inverse)),
        // out_rh = (exp scores) values_rh, then times inverse
        code(op.get(scores), op.get(n)), // a = scores, T = n
        code(op.get(values), op.get(region), op.add), // M = values + region
        code(op.get(hd), op.i32(2), op.shl, op.i32(64), op.i32(0)), // row-major rows of hd floats, no bias
        code(outRow, op.get(hd), op.call(VEC_MAT)), // out = out_rh, width = hd
        code(outRow, op.set(o)),
        scaleOut(code(op.get(o), op.f32Load(0)), op.get(inverse)),
      ),
    ),
    op.end,
  );
}

function moduleBytes(): Uint8Array {
  const functionType = (params: number[], results: number[]) => [0x60, ...vector(params.map((t) => [t])), ...vector(results.map((t) => [t]))];
  const types = [
    functionType(new Array(8).fill(I32), []), // vecMat
    functionType([I32, I32, F32], [F32]), // expShift
    functionType(new Array(8).fill(I32), []), // writeKV
    functionType([...new Array(12).fill(I32), F32], []), // attention
  ];
  const bodies = [vecMatBody(), expShiftBody(), writeKVBody(), attentionBody()]; // VEC_MAT, EXP_SHIFT, then the others
  const exported = (text: string, index: number) => [...name(text), 0x00, index];
  return Uint8Array.from([
    ...[0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00], // "\0asm", version 1
    ...section(1, types), // types
    ...section(2, [[...name('env'), ...name('memory'), 0x02, 0x00, 0x00]]), // import env.memory (min 0 pages)
    ...section(
      3,
      bodies.map((_, i) => uleb(i)),
    ), // function i has type i
    ...section(7, [exported('vecMat', VEC_MAT), exported('expShift', EXP_SHIFT), exported('writeKV', 2), exported('attention', 3)]), // exports
    ...section(
      10,
      bodies.map((body) => [...uleb(body.length), ...body]),
    ), // their code
  ]);
}

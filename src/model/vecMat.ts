/**
 * One WebAssembly SIMD kernel that runs on tfjs's own wasm heap: the vector-matrix product
 *
 *   out[i] = (sum_{t < T} a[t] * M[t, i]) + bias[i]      for i < width
 *
 * with every sum taken in order of t, one float32 multiply and one float32 add per term (so each
 * out[i] is the same number whether it is computed in a SIMD lane, in the scalar tail, or alone).
 * Cached attention is two such products per (row, head), over that row's own filled positions
 * only: scores = q K^T, with K stored transposed in blocks of 16 positions, and out = probs V, with
 * V row-major (see transformer.ts and kvCache.ts). Each reads its part of the cache once,
 * front to back; at batch 32 that read is most of a decode step's memory traffic. tfjs's ops do
 * worse on wasm: its batched matMul is a scalar loop, and an elementwise multiply-then-sum makes
 * several passes over cache-sized intermediates through kernels with scalar reductions.
 *
 * The module imports tfjs's memory, so `a`, `M`, `bias` and `out` are byte addresses of tensors
 * on that heap (see `heapAddress`): nothing is copied in or out. The bytes are generated below
 * from a few named instructions, one statement per line with its meaning beside it.
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

let kernel: { memory: WasmMemory; vecMat: VecMat } | undefined;

/** The kernel, bound to the memory of the current (wasm) tfjs backend; built once per thread. */
export function vecMatKernel(): VecMat {
  const backend = tf.backend();
  if (!(backend instanceof BackendWasm)) throw new Error('vecMatKernel needs the wasm backend (call initBackend first)');
  // Emscripten keeps the module's exports, its memory among them, in `asm`.
  const memory = (backend.wasm as unknown as { asm?: { memory?: unknown } }).asm?.memory;
  if (!(memory instanceof WebAssemblyApi.Memory)) throw new Error("vecMatKernel: cannot find the tfjs wasm backend's memory");
  if (typeof SharedArrayBuffer !== 'undefined' && memory.buffer instanceof SharedArrayBuffer) {
    throw new Error('vecMatKernel: the multi-threaded tfjs wasm backend is not supported');
  }
  if (kernel?.memory !== memory) {
    const instance = new WebAssemblyApi.Instance(new WebAssemblyApi.Module(moduleBytes()), { env: { memory } });
    kernel = { memory, vecMat: instance.exports.vecMat as VecMat };
  }
  return kernel.vecMat;
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
  i32: (value: number): Code => [0x41, ...sleb(value)],
  add: [0x6a],
  shl: [0x74],
  ltU: [0x49],
  gtU: [0x4b],
  f32: (value: number): Code => [0x43, ...new Uint8Array(new Float32Array([value]).buffer)],
  f32Load: (offset: number): Code => [0x2a, ...memarg(offset)],
  f32Store: (offset: number): Code => [0x38, ...memarg(offset)],
  f32Add: [0x92],
  f32Mul: [0x94],
  v128Load: (offset: number): Code => simd(0x00, ...memarg(offset)),
  v128Load32Splat: (offset: number): Code => simd(0x09, ...memarg(offset)),
  v128Store: (offset: number): Code => simd(0x0b, ...memarg(offset)),
  v128Zero: simd(0x0c, ...new Array(16).fill(0)),
  f32x4Add: simd(0xe4),
  f32x4Mul: simd(0xe6),
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
      columns === 16 ? advance(M, op.get(blockBytes)) : advance(M, op.i32(4 * columns)), // M += blockBytes, or 4 columns within a block
      op.br(0),
      op.end,
      op.end,
    );
  };

  return code(
    vector(locals.map(([count, type]) => [...uleb(count), type])),
    code(op.get(a), op.get(T), op.i32(2), op.shl, op.add, op.set(aEnd)), // aEnd = a + 4 T
    code(op.get(out), op.get(width), op.i32(2), op.shl, op.add, op.set(outEnd)), // outEnd = out + 4 width
    columnLoop(16, true),
    columnLoop(4, true),
    columnLoop(1, false),
    op.end,
  );
}

function moduleBytes(): Uint8Array {
  const vecMatType = [0x60, ...vector(new Array(8).fill([I32])), ...vector([])];
  const body = vecMatBody();
  return Uint8Array.from([
    ...[0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00], // "\0asm", version 1
    ...section(1, [vecMatType]), // types
    ...section(2, [[...name('env'), ...name('memory'), 0x02, 0x00, 0x00]]), // import env.memory (min 0 pages)
    ...section(3, [uleb(0)]), // function 0 has type 0
    ...section(7, [[...name('vecMat'), 0x00, 0x00]]), // export function 0
    ...section(10, [[...uleb(body.length), ...body]]), // its code
  ]);
}

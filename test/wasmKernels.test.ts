import * as tf from '@tensorflow/tfjs-core';
import { initBackend } from '../src/model/backend';
import { useSlicing } from '../src/model/wasmKernels';
// Registers tfjs's gradients (the split's among them).
import '../src/rl/gradients';

beforeAll(() => initBackend());

/** x[begin .. begin + size) of a row-major array of `shape`, element by element. */
function expectedSlice(values: readonly number[], shape: readonly number[], begin: readonly number[], size: readonly number[]): number[] {
  const strides = shape.map((_, d) => shape.slice(d + 1).reduce((a, b) => a * b, 1));
  const out: number[] = [];
  const index = size.map(() => 0);
  const count = size.reduce((a, b) => a * b, 1);
  for (let n = 0; n < count; n++) {
    out.push(values[index.reduce((offset, i, d) => offset + (begin[d] + i) * strides[d], 0)]);
    for (let d = size.length - 1; d >= 0 && ++index[d] === size[d]; d--) index[d] = 0;
  }
  return out;
}

const iota = (n: number) => Array.from({ length: n }, (_, i) => i * 1.5 - 7);

describe('wasm Slice and SplitV from the heap', () => {
  it('run on the wasm backend, and can be swapped for tfjs’s own and back', () => {
    expect(tf.getBackend()).toBe('wasm');
    const heap = tf.getKernel('Slice', 'wasm')!.kernelFunc;
    useSlicing('tfjs');
    const tfjs = tf.getKernel('Slice', 'wasm')!.kernelFunc;
    expect(tfjs).not.toBe(heap);
    useSlicing('heap');
    useSlicing('heap');
    expect(tf.getKernel('Slice', 'wasm')!.kernelFunc).not.toBe(tfjs);
    useSlicing('tfjs');
    expect(tf.getKernel('Slice', 'wasm')!.kernelFunc).toBe(tfjs);
    useSlicing('heap');
    // Strings go to tfjs's kernel, not round into this one.
    expect(tf.slice(tf.tensor1d(['a', 'b', 'c'], 'string'), [1], [1]).arraySync()).toEqual(['b']);
  });

  const cases: [number[], number[], number[]][] = [
    [[10], [3], [5]],
    [
      [6, 8],
      [2, 0],
      [3, 8],
    ], // whole rows: one run
    [
      [6, 8],
      [1, 3],
      [4, 2],
    ], // a column band: one short run per row
    [
      [6, 100],
      [1, 10],
      [3, 80],
    ], // long runs
    [
      [3, 4, 5],
      [1, 1, 0],
      [2, 2, 5],
    ],
    [
      [3, 4, 5],
      [0, 1, 2],
      [3, 3, 2],
    ],
    [
      [2, 3, 4, 5],
      [1, 0, 1, 1],
      [1, 3, 2, 3],
    ],
    [
      [4, 4],
      [1, 1],
      [0, 3],
    ], // empty
  ];
  it.each(cases)('slices %j at %j, size %j, as the elements say', (shape, begin, size) => {
    const values = iota(shape.reduce((a, b) => a * b, 1));
    const x = tf.tensor(values, shape, 'float32');
    const sliced = tf.slice(x, begin, size);
    expect(sliced.shape).toEqual(size);
    expect(Array.from(sliced.dataSync())).toEqual(expectedSlice(values, shape, begin, size));
    tf.dispose([x, sliced]);
  });

  it('slices int32 and bool tensors, and leaves string tensors to tfjs', () => {
    const ints = tf.tensor2d([1, 2, 3, 4, 5, 6], [2, 3], 'int32');
    expect(Array.from(tf.slice(ints, [0, 1], [2, 2]).dataSync())).toEqual([2, 3, 5, 6]);
    const bools = tf.tensor2d([true, false, true, true, false, false], [3, 2], 'bool');
    expect(Array.from(tf.slice(bools, [1, 0], [2, 1]).dataSync())).toEqual([1, 0]);
    const strings = tf.tensor1d(['a', 'b', 'c', 'd'], 'string');
    expect(tf.slice(strings, [1], [2]).arraySync()).toEqual(['b', 'c']);
  });

  it('splits along any axis into pieces of the given sizes', () => {
    const shape = [5, 6, 7];
    const values = iota(5 * 6 * 7);
    const x = tf.tensor(values, shape);
    for (const [axis, sizes] of [
      [0, [1, 3, 1]],
      [1, [2, 2, 2]],
      [2, [1, 4, 2]],
      [1, [6]],
    ] as [number, number[]][]) {
      let start = 0;
      tf.split(x, sizes, axis).forEach((piece, i) => {
        const begin = shape.map((_, d) => (d === axis ? start : 0));
        const size = shape.map((n, d) => (d === axis ? sizes[i] : n));
        expect(Array.from(piece.dataSync())).toEqual(expectedSlice(values, shape, begin, size));
        start += sizes[i];
      });
    }
  });

  it('keeps the gradient of a split: its pieces’ gradients concatenated', () => {
    const x = tf.tensor2d(iota(12), [3, 4]);
    const grad = tf.grad((t: tf.Tensor) => {
      const [a, b] = tf.split(t, [1, 3], 1);
      return tf.add(tf.sum(tf.mul(a, 2)), tf.sum(tf.mul(b, 3)));
    })(x);
    expect(Array.from(grad.dataSync())).toEqual([2, 3, 3, 3, 2, 3, 3, 3, 2, 3, 3, 3]);
  });
});

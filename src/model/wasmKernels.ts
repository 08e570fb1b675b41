/**
 * Slice and SplitV for tfjs's wasm backend that copy straight from the input's memory on the heap.
 * tfjs's own copy the whole input off the heap first (readSync) for every slice, so cutting a
 * tensor into n pieces copied it n times: a packed pass over dozens of sequences, cut per sequence
 * and head for attention, spent a quarter of its kernel time there. The pieces are the same floats
 * either way; string tensors keep tfjs's kernels.
 */
import * as tf from '@tensorflow/tfjs-core';
import type { BackendWasm } from '@tensorflow/tfjs-backend-wasm';

type TensorInfo = tf.TensorInfo;

/** Replaces the wasm backend's Slice and SplitV kernels (once per thread, after the backend is ready). */
export function registerHeapSlicing(): void {
  // Once per registry: a second registration would take the first's kernels for tfjs's.
  if (FROM_HEAP in tf.getKernel('Slice', 'wasm')!.kernelFunc) return;
  const original = {
    slice: tf.getKernel('Slice', 'wasm')!.kernelFunc,
    splitV: tf.getKernel('SplitV', 'wasm')!.kernelFunc,
  };
  replaceKernel('Slice', (args) => {
    const { inputs, attrs, backend } = args as unknown as KernelArgs<{ begin: number | number[]; size: number | number[] }>;
    const { x } = inputs;
    if (x.dtype === 'string') return original.slice(args);
    const [begin, size] = tf.slice_util.parseSliceParams(x as tf.Tensor, attrs.begin, attrs.size);
    return sliceFromHeap(backend, x, begin, size);
  });
  replaceKernel('SplitV', (args) => {
    const { inputs, attrs, backend } = args as unknown as KernelArgs<{ numOrSizeSplits: number | number[]; axis: number }>;
    const { x } = inputs;
    if (x.dtype === 'string') return original.splitV(args);
    const axis = tf.util.parseAxisParam(attrs.axis, x.shape)[0];
    const sizes = tf.backend_util.prepareSplitSize(x as tf.Tensor, attrs.numOrSizeSplits, axis);
    const begin = x.shape.map(() => 0);
    return sizes.map((length) => {
      const size = [...x.shape];
      size[axis] = length;
      const piece = sliceFromHeap(backend, x, begin, size);
      begin[axis] += length;
      return piece;
    });
  });
}

interface KernelArgs<Attrs> {
  inputs: { x: TensorInfo };
  attrs: Attrs;
  backend: BackendWasm;
}

/** Marks the kernels registered here. */
const FROM_HEAP = Symbol.for('trajflow.sliceFromHeap');

function replaceKernel(kernelName: string, kernelFunc: tf.KernelFunc): void {
  tf.unregisterKernel(kernelName, 'wasm');
  tf.registerKernel({ kernelName, backendName: 'wasm', kernelFunc: Object.assign(kernelFunc, { [FROM_HEAP]: true }) });
}

/** Runs shorter than this are copied float by float: a subarray costs more than the loop. */
const SUBARRAY_RUN = 64;

/** x[begin .. begin + size) as a new tensor, copied from x's memory in runs as long as the layout allows. */
function sliceFromHeap(backend: BackendWasm, x: TensorInfo, begin: readonly number[], size: readonly number[]): TensorInfo {
  // Allocate first: an allocation may grow the heap, which detaches views taken before it.
  const out = backend.makeOutput([...size], x.dtype);
  const count = size.reduce((a, b) => a * b, 1);
  if (count === 0) return out;
  const from = backend.typedArrayFromHeap(x);
  const to = backend.typedArrayFromHeap(out);
  const { shape } = x;
  const rank = shape.length;
  const strides = tf.util.computeStrides(shape);
  const strideOf = (d: number) => (d === rank - 1 ? 1 : strides[d]);
  // The trailing axes taken whole, and the one before them, make one contiguous run per index of
  // the axes in front.
  let inner = rank - 1;
  while (inner > 0 && begin[inner] === 0 && size[inner] === shape[inner]) inner--;
  const run = size.slice(inner).reduce((a, b) => a * b, 1);
  const index = new Array<number>(inner).fill(0);
  for (let written = 0; written < count; written += run) {
    let offset = begin[inner] * strideOf(inner);
    for (let d = 0; d < inner; d++) offset += (begin[d] + index[d]) * strideOf(d);
    if (run >= SUBARRAY_RUN) to.set(from.subarray(offset, offset + run), written);
    else for (let i = 0; i < run; i++) to[written + i] = from[offset + i];
    // Next index of the outer axes, last axis fastest.
    for (let d = inner - 1; d >= 0 && ++index[d] === size[d]; d--) index[d] = 0;
  }
  return out;
}

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

/**
 * Which kernels slice on the wasm backend once it is ready: these (what `initBackend` picks), or
 * tfjs's own (for a benchmark to compare the two side by side). Asking again is harmless.
 */
export function useSlicing(kernels: 'heap' | 'tfjs'): void {
  const tfjs = {
    slice: tfjsKernel('Slice'),
    splitV: tfjsKernel('SplitV'),
  };
  if (kernels === 'tfjs') {
    replaceKernel('Slice', tfjs.slice);
    replaceKernel('SplitV', tfjs.splitV);
    return;
  }
  replaceKernel(
    'Slice',
    fromHeap(tfjs.slice, (args) => {
      const { inputs, attrs, backend } = args as unknown as KernelArgs<{ begin: number | number[]; size: number | number[] }>;
      const { x } = inputs;
      const [begin, size] = tf.slice_util.parseSliceParams(x as tf.Tensor, attrs.begin, attrs.size);
      return sliceFromHeap(backend, x, begin, size);
    }),
  );
  replaceKernel(
    'SplitV',
    fromHeap(tfjs.splitV, (args) => {
      const { inputs, attrs, backend } = args as unknown as KernelArgs<{ numOrSizeSplits: number | number[]; axis: number }>;
      const { x } = inputs;
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
    }),
  );
}

interface KernelArgs<Attrs> {
  inputs: { x: TensorInfo };
  attrs: Attrs;
  backend: BackendWasm;
}

/** Where a kernel registered here keeps the tfjs kernel it replaced. */
const REPLACED = Symbol.for('trajflow.replacedKernel');
type Replacing = tf.KernelFunc & { [REPLACED]?: tf.KernelFunc };

/** tfjs's own kernel for `kernelName` on wasm, whether or not one of these replaced it. */
function tfjsKernel(kernelName: string): tf.KernelFunc {
  const registered = tf.getKernel(kernelName, 'wasm')!.kernelFunc as Replacing;
  return registered[REPLACED] ?? registered;
}

/** `kernelFunc` for numbers and booleans; strings, which have no heap memory, go to `replaced`. */
function fromHeap(replaced: tf.KernelFunc, kernelFunc: tf.KernelFunc): Replacing {
  const dispatch: tf.KernelFunc = (args) => ((args.inputs as { x: TensorInfo }).x.dtype === 'string' ? replaced(args) : kernelFunc(args));
  return Object.assign(dispatch, { [REPLACED]: replaced });
}

function replaceKernel(kernelName: string, kernelFunc: tf.KernelFunc): void {
  tf.unregisterKernel(kernelName, 'wasm');
  tf.registerKernel({ kernelName, backendName: 'wasm', kernelFunc });
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

/**
 * tfjs on its WebAssembly backend (XNNPACK kernels; works offline in Node), plus the one capability
 * the engine needs beyond tfjs's public ops: writing into a tensor it owns, in place.
 */
import * as tf from '@tensorflow/tfjs-core';
// Importing the package registers the 'wasm' backend.
import { BackendWasm } from '@tensorflow/tfjs-backend-wasm';
import { useSlicing } from './wasmKernels';

let ready: Promise<void> | undefined;

/** Selects the wasm backend once per thread; every caller awaits the same initialization. */
export function initBackend(): Promise<void> {
  ready ??= (async () => {
    if (!(await tf.setBackend('wasm'))) throw new Error('tfjs could not initialize its wasm backend');
    await tf.ready();
    useSlicing('heap');
  })();
  return ready;
}

/**
 * A live Float32Array over a float32 tensor's memory on the wasm heap. The KV cache seats prompts
 * and copies rows through it, and the sampler fills its scratch, instead of building new tensors.
 * Only for tensors the caller owns exclusively (never a weight or a view shared with another
 * tensor), and only until the next tfjs allocation, which may grow the heap and detach the view:
 * take it right before use.
 */
export function heapView(tensor: tf.Tensor): Float32Array {
  return onHeap(tensor, 'heapView', ['float32']) as Float32Array;
}

/**
 * Where a float32 or int32 tensor's data starts on the wasm heap, in bytes, for kernels that share
 * the heap (see simdKernels.ts). Valid while the tensor lives: heap growth moves no data.
 */
export function heapAddress(tensor: tf.Tensor): number {
  return onHeap(tensor, 'heapAddress', ['float32', 'int32']).byteOffset;
}

/** The tensor's memory on the wasm heap, for `caller`, which takes the `dtypes` given. */
function onHeap(tensor: tf.Tensor, caller: string, dtypes: readonly tf.DataType[]): ReturnType<BackendWasm['typedArrayFromHeap']> {
  const backend = tf.backend();
  if (!(backend instanceof BackendWasm)) throw new Error(`${caller} needs the wasm backend (call initBackend first)`);
  if (!dtypes.includes(tensor.dtype)) throw new Error(`${caller} needs a ${dtypes.join(' or ')} tensor, got ${tensor.dtype}`);
  return backend.typedArrayFromHeap(tensor);
}

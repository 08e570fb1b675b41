/**
 * Gradient functions for tfjs, imported for its side effects by everything that differentiates.
 *
 * tfjs-core's Node bundle registers no gradients; loading the full `@tensorflow/tfjs` package
 * registers them all into the same tfjs-core. That load is slow enough to matter at start, so only
 * the training path imports this module and the inference engine never pays for it.
 *
 * BatchMatMul's stock gradient is then replaced by one computing the same products with neither
 * matMul's transpose flags nor batched (rank > 2) matMuls, both of which fall off XNNPACK onto a
 * scalar loop on wasm, several times slower than an explicit transpose and separate 2-D products.
 */
import '@tensorflow/tfjs';
import * as tf from '@tensorflow/tfjs-core';

/** x with its last two axes swapped. */
function transposed(x: tf.Tensor): tf.Tensor {
  const axes = x.shape.map((_, i) => i);
  [axes[x.rank - 2], axes[x.rank - 1]] = [axes[x.rank - 1], axes[x.rank - 2]];
  return tf.transpose(x, axes);
}

/** a b over the last two axes, one 2-D matMul per leading index (leading axes must match). */
function product(a: tf.Tensor, b: tf.Tensor): tf.Tensor {
  if (a.rank === 2 && b.rank === 2) return tf.matMul(a, b);
  const lead = a.shape.slice(0, -2);
  if (a.rank !== b.rank || lead.some((size, i) => size !== b.shape[i])) {
    throw new Error(`BatchMatMul gradient: batch axes of [${a.shape}] and [${b.shape}] differ (broadcasting is not supported)`);
  }
  const [m, k] = a.shape.slice(-2);
  const n = b.shape[b.rank - 1];
  const as = tf.unstack(tf.reshape(a, [-1, m, k]));
  const bs = tf.unstack(tf.reshape(b, [-1, k, n]));
  return tf.reshape(tf.stack(as.map((ai, i) => tf.matMul(ai, bs[i]))), [...lead, m, n]);
}

// C = op(A) op(B) with op = identity or transpose (T below); then
//   C = A B      dA = dC B^T      dB = A^T dC
//   C = A B^T    dA = dC B        dB = dC^T A
//   C = A^T B    dA = B dC^T      dB = A dC
//   C = A^T B^T  dA = B^T dC^T    dB = dC^T A^T
tf.registerGradient({
  kernelName: tf.BatchMatMul,
  inputsToSave: ['a', 'b'],
  gradFunc: (dy, [A, B], attrs) => {
    const dC = dy as tf.Tensor;
    const { transposeA, transposeB } = attrs as unknown as tf.BatchMatMulAttrs;
    const T = transposed;
    if (!transposeA && !transposeB) return { a: () => product(dC, T(B)), b: () => product(T(A), dC) };
    if (!transposeA && transposeB) return { a: () => product(dC, B), b: () => product(T(dC), A) };
    if (transposeA && !transposeB) return { a: () => product(B, T(dC)), b: () => product(A, dC) };
    return { a: () => product(T(B), T(dC)), b: () => product(T(dC), T(A)) };
  },
});

/**
 * Keys and values of every running sequence, one batch row per sequence, for incremental decoding.
 *
 * Layout, per layer, for R rows, H heads of hd features and a capacity of C positions (a multiple
 * of CHUNK): keys [R, H, C/16, hd, 16] and values [R, H, C, hd]. So each (row, head) owns a region
 * of C hd floats in either tensor, where its position p is
 *
 *   keys:   key feature j at   (floor(p / 16) hd + j) 16 + p mod 16   (blocks of 16 positions, transposed)
 *   values: value feature j at p hd + j                                (row-major)
 *
 * whatever C is: each decode step's keys and values are written there by the `writeKV` kernel and
 * read by the `attention` kernel (simdKernels.ts), whose two products stream through the region's
 * start, and a capacity change copies each region's filled
 * prefix as it is. Attention reads a row's filled positions only, never the ones past its length
 * nor any other row: that is what makes batched decoding reproduce unbatched decoding bit for bit,
 * whatever C is. A free row keeps whatever its last sequence left; it decodes a dummy token nobody
 * reads.
 *
 * A finished sequence only frees its row; a joining one takes a free row and its prompt's keys and
 * values are written there in place. The tensors are reallocated (copying the rows in use) only
 * when rows run out, a row outgrows the capacity, or the batch has shrunk enough that the freed
 * rows and columns waste more compute than a copy costs.
 */
import * as tf from '@tensorflow/tfjs-core';
import { heapAddress, heapView } from './backend';
import { headDim, type ModelConfig } from './config';
import { BLOCK_COLUMNS, simdKernels } from './simdKernels';

/** Capacity grows and shrinks in steps of this many positions (a multiple of KEY_BLOCK). */
export const CHUNK = 64;
/** Positions per block of the keys' layout: the columns vecMat takes at once. */
export const KEY_BLOCK = BLOCK_COLUMNS;
const FREE = -1;

/**
 * A sequence's keys and values for its first `length` positions, per layer already laid out as its
 * row of the cache (see `rowLayout`): keys [H, ceil(length/16), hd, 16], values [H, length, hd].
 */
export interface SequenceKV {
  length: number;
  keys: Float32Array[];
  values: Float32Array[];
}

/**
 * One layer's keys and values of a whole sequence, k and v [T, D], as a row of the cache: keys
 * [H, ceil(T/16), hd, 16] (zero-padded to whole blocks), values [H, T, hd]. Tensor ops, for the
 * prefill: tf's transposes move the floats for less than a loop over them does when seating.
 */
export function rowLayout(k: tf.Tensor, v: tf.Tensor, config: ModelConfig): { keys: tf.Tensor; values: tf.Tensor } {
  const [T, H, hd] = [k.shape[0], config.nHeads, headDim(config)];
  const blocks = Math.ceil(T / KEY_BLOCK);
  // k[t, h*hd + j] -> keys[h, floor(t/16), j, t mod 16]
  const padded = tf.pad(k, [
    [0, blocks * KEY_BLOCK - T],
    [0, 0],
  ]);
  const keys = tf.transpose(tf.reshape(padded, [blocks, KEY_BLOCK, H, hd]), [2, 0, 3, 1]);
  // v[t, h*hd + j] -> values[h, t, j]
  const values = tf.transpose(tf.reshape(v, [T, H, hd]), [1, 0, 2]);
  return { keys, values };
}

/** Floats of a region's key blocks that hold `length` positions. */
const keyFloats = (length: number, hd: number) => Math.ceil(length / KEY_BLOCK) * KEY_BLOCK * hd;

export class KVCache {
  /** Sequence id seated in each row, or FREE. */
  private rowIds: number[] = [];
  private readonly rowOfId = new Map<number, number>();
  /** Per row: positions filled, which is also the position of the row's next token (0 if free). */
  private rowLengths = new Int32Array(0);
  private columns = 0;
  private keys: tf.Tensor5D[] = [];
  private values: tf.Tensor4D[] = [];
  /** Prompts prefilled but not yet seated. */
  private readonly staged = new Map<number, SequenceKV>();
  /** Positions each staged or seated sequence may come to hold (see `stage`). */
  private readonly reserved = new Map<number, number>();

  constructor(private readonly config: ModelConfig) {}

  /** Rows in the tensors, free ones included: the batch size of a decode step. */
  get rows(): number {
    return this.rowIds.length;
  }

  get lengths(): Readonly<Int32Array> {
    return this.rowLengths;
  }

  get capacity(): number {
    return this.columns;
  }

  /** The row sequence `id` sits in. */
  rowOf(id: number): number {
    const row = this.rowOfId.get(id);
    if (row === undefined) throw new Error(`sequence ${id} has no row in the KV cache`);
    return row;
  }

  /** [R, H, C/16, hd, 16]: keys[r, h, floor(p/16), j, p mod 16] is feature h*hd + j of row r's key at position p. */
  layerKeys(layer: number): tf.Tensor5D {
    return this.keys[layer];
  }

  /** [R, H, C, hd]: values[r, h, p, j] is feature h*hd + j of row r's value at position p. */
  layerValues(layer: number): tf.Tensor4D {
    return this.values[layer];
  }

  /**
   * Holds a prefilled prompt until its sequence is seated by the next `arrange`. `reserve`: the most
   * positions the sequence may come to hold (its prompt and what it may still generate); capacity
   * covers it from the seating on, so a batch does not reallocate to grow while it decodes.
   */
  stage(id: number, kv: SequenceKV, reserve = 0): void {
    this.staged.set(id, kv);
    this.reserved.set(id, reserve);
  }

  /**
   * Seats exactly the sequences `ids` (already seated, or staged), each with room for one more
   * token and for what it reserved, and frees every other row.
   */
  arrange(ids: readonly number[]): void {
    const wanted = new Set(ids);
    this.rowIds.forEach((id, row) => {
      if (id !== FREE && !wanted.has(id)) this.freeRow(row);
    });
    const joining = ids.filter((id) => !this.rowOfId.has(id));
    const lengthOf = (id: number) => {
      const row = this.rowOfId.get(id);
      if (row !== undefined) return this.rowLengths[row];
      const prompt = this.staged.get(id);
      if (!prompt) throw new Error(`sequence ${id} has neither a row nor a staged prompt`);
      return prompt.length;
    };
    const positionsOf = (id: number) => Math.max(lengthOf(id) + 1, this.reserved.get(id) ?? 0);
    const needed = Math.ceil(Math.max(0, ...ids.map(positionsOf)) / CHUNK) * CHUNK;
    const freeRows = this.rowIds.filter((id) => id === FREE).length;
    const outOfRoom = joining.length > freeRows || needed > this.columns;
    const wasteful = ids.length <= this.rows / 2 || needed <= this.columns - 2 * CHUNK;
    if (outOfRoom || wasteful) return this.reallocate(ids, needed);
    for (const id of joining) this.seat(id, this.rowIds.indexOf(FREE));
  }

  /**
   * Writes this step's keys and values (columns D..3D of each row of `qkv` [R, 3D], a tensor on the
   * heap) at each row's position `lengths` (int32 [R], `lengths` on the heap). A free row writes at
   * its position 0, which nothing reads and a seated prompt overwrites.
   */
  write(layer: number, qkv: tf.Tensor, lengths: tf.Tensor): void {
    const [keys, values, from, at] = [this.keys[layer], this.values[layer], qkv, lengths].map(heapAddress);
    simdKernels().writeKV(from, keys, values, at, this.rows, this.config.nHeads, headDim(this.config), this.columns);
  }

  /** Where (row, head)'s region starts in a layer's keys or values, in floats. */
  region(row: number, head: number): number {
    return (row * this.config.nHeads + head) * this.columns * headDim(this.config);
  }

  /** Every seated row now holds one more position (call after all layers wrote theirs). */
  advance(): void {
    this.rowIds.forEach((id, row) => {
      if (id !== FREE) this.rowLengths[row]++;
    });
  }

  dispose(): void {
    tf.dispose([...this.keys, ...this.values]);
    this.keys = [];
    this.values = [];
    this.rowIds = [];
    this.rowOfId.clear();
    this.rowLengths = new Int32Array(0);
    this.columns = 0;
    this.staged.clear();
    this.reserved.clear();
  }

  private freeRow(row: number): void {
    this.rowOfId.delete(this.rowIds[row]);
    this.reserved.delete(this.rowIds[row]);
    this.rowIds[row] = FREE;
    this.rowLengths[row] = 0;
  }

  /** Writes staged sequence `id`'s prompt into free `row` (what lies after it is never read). */
  private seat(id: number, row: number): void {
    const prompt = this.staged.get(id)!;
    const { nHeads: H, nLayers } = this.config;
    const hd = headDim(this.config);
    const [keyBlocks, valueRows] = [keyFloats(prompt.length, hd), prompt.length * hd];
    for (let layer = 0; layer < nLayers; layer++) {
      const [keys, values] = [heapView(this.keys[layer]), heapView(this.values[layer])];
      const [k, v] = [prompt.keys[layer], prompt.values[layer]];
      for (let h = 0; h < H; h++) {
        keys.set(k.subarray(h * keyBlocks, (h + 1) * keyBlocks), this.region(row, h));
        values.set(v.subarray(h * valueRows, (h + 1) * valueRows), this.region(row, h));
      }
    }
    this.staged.delete(id);
    this.rowIds[row] = id;
    this.rowOfId.set(id, row);
    this.rowLengths[row] = prompt.length;
  }

  /** New tensors with one row per id, in order, and `columns` columns; seated rows are copied over. */
  private reallocate(ids: readonly number[], columns: number): void {
    const { nLayers, nHeads: H } = this.config;
    const hd = headDim(this.config);
    const R = ids.length;
    const keys = Array.from({ length: nLayers }, () => tf.fill([R, H, columns / KEY_BLOCK, hd, KEY_BLOCK], 0) as tf.Tensor5D);
    const values = Array.from({ length: nLayers }, () => tf.fill([R, H, columns, hd], 0) as tf.Tensor4D);
    const oldRows = ids.map((id) => this.rowOfId.get(id));
    const lengths = Int32Array.from(oldRows, (old) => (old === undefined ? 0 : this.rowLengths[old]));
    // Allocation is done: heap views stay valid from here on. A region's filled prefix is laid out
    // the same whatever the capacity: copy it as it is (keys up to the end of their last block).
    const [oldRegion, newRegion] = [this.columns * hd, columns * hd];
    for (let layer = 0; layer < this.keys.length; layer++) {
      const [fromK, toK] = [heapView(this.keys[layer]), heapView(keys[layer])];
      const [fromV, toV] = [heapView(this.values[layer]), heapView(values[layer])];
      oldRows.forEach((old, row) => {
        if (old === undefined) return;
        for (let h = 0; h < H; h++) {
          const [from, to] = [(old * H + h) * oldRegion, (row * H + h) * newRegion];
          toK.set(fromK.subarray(from, from + keyFloats(lengths[row], hd)), to);
          toV.set(fromV.subarray(from, from + lengths[row] * hd), to);
        }
      });
    }
    tf.dispose([...this.keys, ...this.values]);
    this.keys = keys;
    this.values = values;
    this.columns = columns;
    this.rowIds = ids.map((id, row) => (oldRows[row] === undefined ? FREE : id));
    this.rowLengths = lengths;
    this.rowOfId.clear();
    ids.forEach((id, row) => (oldRows[row] === undefined ? this.seat(id, row) : this.rowOfId.set(id, row)));
  }
}

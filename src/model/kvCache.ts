/**
 * Keys and values of every running sequence, one batch row per sequence, for incremental decoding.
 *
 * Layout, per layer: keys [R, C, D] and transposed values [R, H, headDim, C], for R rows and a
 * capacity C that is a multiple of CHUNK. Each row is left-aligned: position p of its sequence is
 * column p, and the columns past the row's length hold zeros (and are masked). So a row's attention
 * reads its own columns followed by masked zeros, whatever the other rows hold and whatever C is;
 * that is what makes batched decoding reproduce unbatched decoding bit for bit (see transformer.ts).
 * A free row keeps whatever its last sequence left; it decodes a dummy token nobody reads.
 *
 * A finished sequence only frees its row; a joining one takes a free row and its prompt's keys and
 * values are written there in place. The tensors are reallocated (copying the rows in use) only
 * when rows run out, a row outgrows the capacity, or the batch has shrunk enough that the freed
 * rows and columns waste more compute than a copy costs.
 */
import * as tf from '@tensorflow/tfjs-core';
import { heapView } from './backend';
import { headDim, type ModelConfig } from './config';

/** Capacity grows and shrinks in steps of this many positions. */
export const CHUNK = 64;
const FREE = -1;

/** A sequence's keys and values for its first `length` positions, per layer [length, D] row-major. */
export interface SequenceKV {
  length: number;
  keys: Float32Array[];
  values: Float32Array[];
}

export class KVCache {
  /** Sequence id seated in each row, or FREE. */
  private rowIds: number[] = [];
  private readonly rowOfId = new Map<number, number>();
  /** Per row: positions filled, which is also the position of the row's next token (0 if free). */
  private rowLengths = new Int32Array(0);
  private columns = 0;
  private keys: tf.Tensor3D[] = [];
  private valuesT: tf.Tensor4D[] = [];
  /** Prompts prefilled but not yet seated. */
  private readonly staged = new Map<number, SequenceKV>();

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

  layerKeys(layer: number): tf.Tensor3D {
    return this.keys[layer];
  }

  layerValuesT(layer: number): tf.Tensor4D {
    return this.valuesT[layer];
  }

  /** Holds a prefilled prompt until its sequence is seated by the next `arrange`. */
  stage(id: number, kv: SequenceKV): void {
    this.staged.set(id, kv);
  }

  /**
   * Seats exactly the sequences `ids` (already seated, or staged), each with room for one more
   * token, and frees every other row.
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
    const needed = Math.ceil((Math.max(0, ...ids.map(lengthOf)) + 1) / CHUNK) * CHUNK;
    const freeRows = this.rowIds.filter((id) => id === FREE).length;
    const outOfRoom = joining.length > freeRows || needed > this.columns;
    const wasteful = ids.length <= this.rows / 2 || needed <= this.columns - 2 * CHUNK;
    if (outOfRoom || wasteful) return this.reallocate(ids, needed);
    for (const id of joining) this.seat(id, this.rowIds.indexOf(FREE));
  }

  /** Writes this step's keys and values (columns D..3D of each row of `qkv` [R, 3D]) at each seated row's position. */
  write(layer: number, qkv: Float32Array): void {
    const D = this.config.dModel;
    const C = this.columns;
    const keys = heapView(this.keys[layer]);
    const valuesT = heapView(this.valuesT[layer]);
    this.rowIds.forEach((id, row) => {
      if (id === FREE) return;
      const position = this.rowLengths[row];
      const k = row * 3 * D + D;
      keys.set(qkv.subarray(k, k + D), (row * C + position) * D);
      for (let f = 0; f < D; f++) valuesT[(row * D + f) * C + position] = qkv[k + D + f];
    });
  }

  /** Every seated row now holds one more position (call after all layers wrote theirs). */
  advance(): void {
    this.rowIds.forEach((id, row) => {
      if (id !== FREE) this.rowLengths[row]++;
    });
  }

  dispose(): void {
    tf.dispose([...this.keys, ...this.valuesT]);
    this.keys = [];
    this.valuesT = [];
    this.rowIds = [];
    this.rowOfId.clear();
    this.rowLengths = new Int32Array(0);
    this.columns = 0;
    this.staged.clear();
  }

  private freeRow(row: number): void {
    this.rowOfId.delete(this.rowIds[row]);
    this.rowIds[row] = FREE;
    this.rowLengths[row] = 0;
  }

  /** Writes staged sequence `id`'s prompt into free `row`, zeroing the columns after it. */
  private seat(id: number, row: number): void {
    const prompt = this.staged.get(id)!;
    const D = this.config.dModel;
    const C = this.columns;
    for (let layer = 0; layer < this.config.nLayers; layer++) {
      const keys = heapView(this.keys[layer]);
      const valuesT = heapView(this.valuesT[layer]);
      keys.set(prompt.keys[layer], row * C * D);
      keys.fill(0, (row * C + prompt.length) * D, (row + 1) * C * D);
      const v = prompt.values[layer];
      for (let f = 0; f < D; f++) {
        const start = (row * D + f) * C;
        for (let p = 0; p < prompt.length; p++) valuesT[start + p] = v[p * D + f];
        valuesT.fill(0, start + prompt.length, start + C);
      }
    }
    this.staged.delete(id);
    this.rowIds[row] = id;
    this.rowOfId.set(id, row);
    this.rowLengths[row] = prompt.length;
  }

  /** New tensors with one row per id, in order, and `columns` columns; seated rows are copied over. */
  private reallocate(ids: readonly number[], columns: number): void {
    const { nLayers, nHeads, dModel: D } = this.config;
    const R = ids.length;
    const keys = Array.from({ length: nLayers }, () => tf.fill([R, columns, D], 0) as tf.Tensor3D);
    const valuesT = Array.from({ length: nLayers }, () => tf.fill([R, nHeads, headDim(this.config), columns], 0) as tf.Tensor4D);
    const oldRows = ids.map((id) => this.rowOfId.get(id));
    const lengths = Int32Array.from(oldRows, (old) => (old === undefined ? 0 : this.rowLengths[old]));
    // Allocation is done: heap views stay valid from here on.
    for (let layer = 0; layer < this.keys.length; layer++) {
      const [fromK, toK] = [heapView(this.keys[layer]), heapView(keys[layer])];
      const [fromV, toV] = [heapView(this.valuesT[layer]), heapView(valuesT[layer])];
      oldRows.forEach((old, row) => {
        if (old === undefined) return;
        const length = lengths[row];
        toK.set(fromK.subarray(old * this.columns * D, (old * this.columns + length) * D), row * columns * D);
        for (let f = 0; f < D; f++) {
          const start = (old * D + f) * this.columns;
          toV.set(fromV.subarray(start, start + length), (row * D + f) * columns);
        }
      });
    }
    tf.dispose([...this.keys, ...this.valuesT]);
    this.keys = keys;
    this.valuesT = valuesT;
    this.columns = columns;
    this.rowIds = ids.map((id, row) => (oldRows[row] === undefined ? FREE : id));
    this.rowLengths = lengths;
    this.rowOfId.clear();
    ids.forEach((id, row) => (oldRows[row] === undefined ? this.seat(id, row) : this.rowOfId.set(id, row)));
  }
}

/**
 * The file primitives every store shares: durable atomic writes, sealed records, and the errors a
 * worker reports when the disk is full or a stored file is corrupt.
 *
 * Durable: a write is fsynced, renamed (or linked) into place, and its folder fsynced before it
 * returns, so a file an activity reported to Temporal survives a power loss or kernel crash, not
 * only a process crash. A folder the write had to create is made durable in its parent as well.
 *
 * Sealed: a stored JSON record carries its length and checksum, so a torn or corrupt copy is
 * detected when read instead of being trained on. A sealed record is one line, valid JSON itself:
 *
 *   {"bytes":<N>,"sha256":"<64 hex digits>","body":<the record's JSON>}\n
 *
 * where N is the body's length in UTF-8 bytes and the hash is of those bytes; a reader checks both
 * on the exact bytes between `"body":` and the final `}`. A JSON file (turn, summary, group, step
 * result) is one sealed line; a JSON Lines file is one per record (jsonLines.ts). The Python
 * trainer reads and writes the same format (python/trajflow_py/trainer/files.py).
 */
import { ApplicationFailure } from '@temporalio/common';
import { createHash, randomUUID } from 'node:crypto';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { CORRUPT_STORED_FILE, DISK_FULL } from '../core/failures';

export interface WriteOptions {
  /**
   * fsync the file and its folder (default true). Off only to measure what durability costs
   * (bench/storage.ts): a write that is not durable may be lost, or left empty, by a machine crash.
   */
  durable?: boolean;
}

/**
 * A stored file failed its length or checksum check, or is not what its writer stores. Not
 * retryable: a retry reads the same bytes. `kind` names what the file holds ("record", "checkpoint").
 */
export class CorruptFileError extends ApplicationFailure {
  constructor(
    readonly kind: string,
    readonly file: string,
    readonly reason: string,
  ) {
    super(`corrupt ${kind} ${file}: ${reason}`, CORRUPT_STORED_FILE, true);
  }
}

/**
 * The filesystem a write went to is full (or the user's quota is): the write was undone and its
 * temp file removed. Retryable: space may be freed, and the next attempt writes the file whole.
 */
export class DiskFullError extends ApplicationFailure {
  constructor(
    readonly file: string,
    /** Bytes available to this process on the file's filesystem, if statfs could tell. */
    readonly freeBytes: number | undefined,
    readonly totalBytes: number | undefined,
    cause: Error,
  ) {
    const space = freeBytes === undefined ? 'free space unknown' : `${formatBytes(freeBytes)} free of ${formatBytes(totalBytes ?? 0)}`;
    super(`no space left on device writing ${file} (${space} on its filesystem): ${cause.message}`, DISK_FULL, false, undefined, cause);
  }
}

const DISK_FULL_CODES = new Set(['ENOSPC', 'EDQUOT']);

export function formatBytes(bytes: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return unit === 0 ? `${value} B` : `${value.toFixed(1)} ${units[unit]}`;
}

/** Available and total bytes of the filesystem holding `target` (or its nearest existing folder). */
export async function freeSpace(target: string): Promise<{ free: number; total: number } | undefined> {
  for (let at = path.resolve(target); ; at = path.dirname(at)) {
    try {
      const stats = await fs.statfs(at);
      return { free: stats.bavail * stats.bsize, total: stats.blocks * stats.bsize };
    } catch {
      if (at === path.dirname(at)) return undefined;
    }
  }
}

/** `err` as a DiskFullError naming `file` and the free space if it is one, else `err` itself. */
async function explained(err: unknown, file: string): Promise<unknown> {
  if (!DISK_FULL_CODES.has((err as NodeJS.ErrnoException)?.code ?? '')) return err;
  const space = await freeSpace(path.dirname(file));
  return new DiskFullError(file, space?.free, space?.total, err as Error);
}

async function fsyncDir(dir: string): Promise<void> {
  const handle = await fs.open(dir, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** mkdir -p; with `durable`, each folder it creates is made durable in its parent. */
async function makeDirs(dir: string, durable: boolean): Promise<void> {
  const first = await fs.mkdir(dir, { recursive: true });
  if (first === undefined || !durable) return;
  const created = path.resolve(first);
  for (let at = path.resolve(dir); ; at = path.dirname(at)) {
    await fsyncDir(path.dirname(at));
    if (at === created || at === path.dirname(at)) return;
  }
}

/** A unique temp path beside `file` (same folder, so a rename or link onto `file` is atomic). */
function tempBeside(file: string): string {
  return `${file}.${randomUUID()}.tmp`;
}

async function writeTemp(temp: string, data: string | Uint8Array, durable: boolean): Promise<void> {
  const handle = await fs.open(temp, 'wx');
  try {
    await handle.writeFile(data);
    if (durable) await handle.sync();
  } finally {
    await handle.close();
  }
}

/**
 * Writes `data` to a temp file beside `file`, then `place`s it (rename or link) and fsyncs the
 * folder. On any failure the temp file is removed, and a full disk becomes a DiskFullError.
 */
async function writeThenPlace<T>(file: string, data: string | Uint8Array, durable: boolean, place: (temp: string) => Promise<T>): Promise<T> {
  const temp = tempBeside(file);
  try {
    await makeDirs(path.dirname(file), durable);
    await writeTemp(temp, data, durable);
    const placed = await place(temp);
    if (durable) await fsyncDir(path.dirname(file));
    return placed;
  } catch (err) {
    throw await explained(err, file);
  } finally {
    // Gone after a rename; a link leaves it, and a failed write leaves part of it.
    await fs.rm(temp, { force: true });
  }
}

/** Replaces `file` with `data` atomically and durably: readers see the old or the new, never half. */
export function writeFileAtomically(file: string, data: string | Uint8Array, { durable = true }: WriteOptions = {}): Promise<void> {
  return writeThenPlace(file, data, durable, (temp) => fs.rename(temp, file));
}

/**
 * Creates `file` with `data` atomically and durably unless it exists. Returns whether this call
 * created it (false: another writer's file was there first, and is left as it is).
 */
export function createFileOnce(file: string, data: string | Uint8Array, { durable = true }: WriteOptions = {}): Promise<boolean> {
  return writeThenPlace(file, data, durable, async (temp) => {
    try {
      await fs.link(temp, file);
      return true;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false;
      throw err;
    }
  });
}

/**
 * Appends `line` (ending in a newline) to `file` durably. A file whose last line was torn by a
 * crash gets a newline first, so the torn line stays alone (and is skipped by readers); a failed
 * append is cut back off, so no partial line is left for the next one to join.
 */
export async function appendLine(file: string, line: string, { durable = true }: WriteOptions = {}): Promise<void> {
  try {
    await makeDirs(path.dirname(file), durable);
    const handle = await fs.open(file, 'a+');
    try {
      const { size } = await handle.stat();
      const last = Buffer.alloc(1);
      if (size > 0) await handle.read(last, 0, 1, size - 1);
      const text = size > 0 && last[0] !== 0x0a ? `\n${line}` : line;
      try {
        // appendFile writes until all of it is written (a single write may write less).
        await handle.appendFile(text);
        if (durable) await handle.sync();
      } catch (err) {
        await handle.truncate(size).catch(() => undefined);
        throw err;
      }
      // The first line created the file: its name must be durable too.
      if (durable && size === 0) await fsyncDir(path.dirname(file));
    } finally {
      await handle.close();
    }
  } catch (err) {
    throw await explained(err, file);
  }
}

export function sha256Hex(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex');
}

const SEAL_START = Buffer.from('{"bytes":');
/** The seal's head: everything before the body. Its length is bounded, so it is parsed from a slice. */
const SEAL_HEAD = /^\{"bytes":(\d{1,15}),"sha256":"([0-9a-f]{64})","body":/;
const SEAL_HEAD_MAX = 120;
const SEAL_END = Buffer.from('}');

/** `value` as one sealed line (see the top of this file), newline included. */
export function sealRecord(value: unknown): Buffer {
  const body = Buffer.from(JSON.stringify(value), 'utf8');
  return Buffer.concat([Buffer.from(`{"bytes":${body.length},"sha256":"${sha256Hex(body)}","body":`), body, Buffer.from('}\n')]);
}

/**
 * The record in one sealed line (without its newline), checked against its length and checksum.
 * Throws CorruptFileError naming `file`.
 */
export function unsealRecord(line: Buffer, file: string): unknown {
  const corrupt = (reason: string): never => {
    throw new CorruptFileError('record', file, reason);
  };
  if (line.length === 0) corrupt('empty (0 bytes)');
  const parse = (text: string, what: string): unknown => {
    try {
      return JSON.parse(text);
    } catch (err) {
      return corrupt(`${what} (${(err as Error).message})`);
    }
  };
  if (!line.subarray(0, SEAL_START.length).equals(SEAL_START)) {
    corrupt(`not a sealed record: it starts ${JSON.stringify(line.subarray(0, SEAL_START.length).toString('latin1'))}`);
  }
  const head = SEAL_HEAD.exec(line.subarray(0, SEAL_HEAD_MAX).toString('latin1'));
  if (!head) return corrupt(`the seal's head is damaged or cut: ${JSON.stringify(line.subarray(0, SEAL_HEAD_MAX).toString('latin1'))}`);
  const bytes = Number(head[1]);
  const start = head[0].length;
  const end = start + bytes;
  if (line.length < end) corrupt(`truncated: ${line.length - start} of ${bytes} body bytes`);
  if (line.length < end + SEAL_END.length) corrupt("truncated: the seal's end is missing");
  if (line.length > end + SEAL_END.length) corrupt(`${line.length - end - SEAL_END.length} unexpected bytes after the body`);
  if (!line.subarray(end).equals(SEAL_END)) corrupt(`the seal's end is damaged: ${JSON.stringify(line.subarray(end).toString('latin1'))}`);
  const body = line.subarray(start, end);
  const hash = sha256Hex(body);
  if (hash !== head[2]) corrupt(`checksum mismatch: the ${bytes} body bytes hash to sha256 ${hash}, the seal says ${head[2]}`);
  return parse(body.toString('utf8'), 'the body is not JSON');
}

/** The record in a sealed JSON file, or undefined if there is no such file; throws CorruptFileError. */
export async function readJson<T>(file: string): Promise<T | undefined> {
  let bytes: Buffer;
  try {
    bytes = await fs.readFile(file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  // One sealed line: the final newline is not part of the record.
  const line = bytes.length > 0 && bytes[bytes.length - 1] === 0x0a ? bytes.subarray(0, -1) : bytes;
  return unsealRecord(line, file) as T;
}

/** Replaces `file` with `value` as a sealed record, atomically and durably. */
export function writeJsonAtomically(file: string, value: unknown, options: WriteOptions = {}): Promise<void> {
  return writeFileAtomically(file, sealRecord(value), options);
}

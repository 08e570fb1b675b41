/** Small file primitives the stores share: atomic writes and tolerant JSON reads. */
import { randomUUID } from 'node:crypto';
import { promises as fs } from 'node:fs';
import path from 'node:path';

/** The parsed JSON in `file`, or undefined if there is no such file. */
export async function readJson<T>(file: string): Promise<T | undefined> {
  try {
    return JSON.parse(await fs.readFile(file, 'utf8')) as T;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

/** A unique temp path beside `file` (same folder, so a rename or link onto `file` is atomic). */
export async function tempBeside(file: string): Promise<string> {
  await fs.mkdir(path.dirname(file), { recursive: true });
  return `${file}.${randomUUID()}.tmp`;
}

/** Writes `file` through `write(temp)` then renames it in place: readers see old or new, never half. */
export async function writeAtomically(file: string, write: (temp: string) => Promise<void>): Promise<void> {
  const temp = await tempBeside(file);
  await write(temp);
  await fs.rename(temp, file);
}

export function writeJsonAtomically(file: string, value: unknown): Promise<void> {
  return writeAtomically(file, (temp) => fs.writeFile(temp, JSON.stringify(value)));
}

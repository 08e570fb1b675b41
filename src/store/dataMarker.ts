/**
 * The mark of a data directory: `<dataDir>/trajflow-data.json`, one sealed record with an id.
 *
 * Every host of a deployment must see the same data directory (a shared filesystem: NFS, EFS, a
 * Kubernetes ReadWriteMany volume): a turn stored by the inference worker on one host is trained
 * on by the trainer on another, whose checkpoints the inference workers load. A worker whose
 * `dataDir` is instead an empty local folder of the same name (a mount that failed or was
 * forgotten) would fail only at its first task, or store turns no other host sees. So:
 *
 *   whoever starts something marks the directory: `trajflow cluster prepare -c CONFIG` (or
 *   `--data-dir`), `trajflow run` and `trajflow train` (also `--local`), before any worker of
 *   theirs starts; `trajflow worker`, which only serves, refuses to start without the mark.
 */
import { hostname } from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { createFileOnce, readJson, sealRecord } from './files';
import { dataMarkerFile } from './runLayout';

const DataMarkerSchema = z.object({
  /** Names this data directory: the same on every host that mounts it. */
  id: z.string().min(1),
  createdAt: z.string(),
  createdBy: z.string(),
});

export type DataMarker = z.infer<typeof DataMarkerSchema>;

/** A worker's data directory holds no mark; the message says what to do, in one line. */
export class DataDirNotMarkedError extends Error {
  constructor(readonly dataDir: string) {
    const dir = path.resolve(dataDir);
    super(
      `data directory ${dir} holds no ${path.basename(dataMarkerFile(dir))}: it is not the data directory this deployment shares. ` +
        `Mount the shared data directory there (or set dataDir to where it is mounted); for a new deployment, mark it once with ` +
        `\`trajflow cluster prepare --data-dir ${dir}\` (trajflow run and train mark it too)`,
    );
    this.name = 'DataDirNotMarkedError';
  }
}

/** The mark of `dataDir`, if it has one; throws if the file is there but not a mark. */
export async function readDataMarker(dataDir: string): Promise<DataMarker | undefined> {
  const file = dataMarkerFile(dataDir);
  const raw = await readJson<unknown>(file);
  if (raw === undefined) return undefined;
  const parsed = DataMarkerSchema.safeParse(raw);
  if (!parsed.success) throw new Error(`${file} is not a trajflow data directory mark: ${parsed.error.message}`);
  return parsed.data;
}

/** A new mark, as `markDataDir` stores it (a sealed record). */
export function newDataMarker(): DataMarker {
  return { id: randomUUID(), createdAt: new Date().toISOString(), createdBy: `${hostname()}/${process.pid}` };
}

/** Marks `dataDir` unless it is marked; returns its mark and whether this call made it. */
export async function markDataDir(dataDir: string): Promise<{ marker: DataMarker; created: boolean }> {
  const marker = newDataMarker();
  if (await createFileOnce(dataMarkerFile(dataDir), sealRecord(marker))) return { marker, created: true };
  return { marker: (await readDataMarker(dataDir))!, created: false };
}

/** The mark of `dataDir`; throws DataDirNotMarkedError without one. */
export async function requireDataMarker(dataDir: string): Promise<DataMarker> {
  const marker = await readDataMarker(dataDir);
  if (!marker) throw new DataDirNotMarkedError(dataDir);
  return marker;
}

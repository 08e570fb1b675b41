/**
 * A real model's published checkpoint is a folder with a manifest, `trajflow-manifest.json`: a
 * sealed record of each file's size and sha256, written by the Python trainer when it publishes
 * the folder (python/trajflow_py/trainer/files.py, publish_directory). Before a model server is
 * told to load a folder, the folder is checked against it here, so a torn or corrupt checkpoint
 * is refused (CorruptFileError) instead of served.
 */
import { createHash } from 'node:crypto';
import { createReadStream, promises as fs } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { CorruptFileError, readJson } from './files';

export const MANIFEST_FILE = 'trajflow-manifest.json';

/**
 * The subfolder of what only a resume reads (optimizer state, master weights: trainer/policy.py
 * TRAINER_STATE_DIR): removed on purpose from a version no step resumes from, so its files may be absent.
 */
const TRAINER_STATE_PREFIX = 'trainer-state/';

const ManifestSchema = z.object({
  files: z.record(z.string(), z.object({ bytes: z.number().int().nonnegative(), sha256: z.string().regex(/^[0-9a-f]{64}$/) })),
});

async function fileSha256(file: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

/**
 * Checks every file `folder`'s manifest lists (size, then sha256); throws CorruptFileError naming
 * the first that differs or is missing, or a folder without a manifest (a published checkpoint
 * always has one).
 */
export async function verifyCheckpointFolder(folder: string): Promise<void> {
  const manifestFile = path.join(folder, MANIFEST_FILE);
  const corrupt = (reason: string) => new CorruptFileError('checkpoint', folder, reason);
  const record = await readJson<unknown>(manifestFile);
  if (record === undefined) throw corrupt(`${MANIFEST_FILE} is missing: not a checkpoint the trainer published`);
  const manifest = ManifestSchema.safeParse(record);
  if (!manifest.success)
    throw corrupt(`${MANIFEST_FILE} is not a manifest: ${manifest.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
  for (const [name, expected] of Object.entries(manifest.data.files)) {
    const file = path.join(folder, name);
    const stat = await fs.stat(file).catch(() => undefined);
    if (!stat?.isFile()) {
      if (name.startsWith(TRAINER_STATE_PREFIX)) continue;
      throw corrupt(`${name} is missing`);
    }
    if (stat.size !== expected.bytes) throw corrupt(`${name} has ${stat.size} bytes, the manifest says ${expected.bytes}`);
    const digest = await fileSha256(file);
    if (digest !== expected.sha256) throw corrupt(`${name}: checksum mismatch: it hashes to sha256 ${digest}, the manifest says ${expected.sha256}`);
  }
}

/**
 * A real model's checkpoint folder reaches a model server only after it matches its manifest
 * (each file's size and sha256, as the Python trainer writes it): a corrupt or unpublished folder
 * is refused, and the version before it is served instead, as on the embedded path.
 */
import { mkdtempSync, promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { CheckpointStore } from '../src/store/checkpointStore';
import { MANIFEST_FILE, verifyCheckpointFolder } from '../src/store/checkpointManifest';
import { CorruptFileError, sha256Hex, writeJsonAtomically } from '../src/store/files';
import { createLogger } from '../src/log';

const FILES: Record<string, string> = {
  'config.json': '{"model_type":"llama"}',
  'model.safetensors': 'weights of the version',
  'trainer-state/__0_0.distcp': 'state',
};

/** A checkpoint folder as the trainer publishes it: its files and their manifest. */
async function publish(folder: string, files = FILES): Promise<void> {
  await fs.mkdir(folder, { recursive: true });
  const manifest: Record<string, { bytes: number; sha256: string }> = {};
  for (const [name, text] of Object.entries(files)) {
    await fs.mkdir(path.dirname(path.join(folder, name)), { recursive: true });
    await fs.writeFile(path.join(folder, name), text);
    manifest[name] = { bytes: Buffer.byteLength(text), sha256: sha256Hex(Buffer.from(text)) };
  }
  await writeJsonAtomically(path.join(folder, MANIFEST_FILE), { files: manifest });
}

async function reasonOf(folder: string): Promise<string> {
  const error = await verifyCheckpointFolder(folder).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(CorruptFileError);
  return (error as CorruptFileError).reason;
}

describe('checkpoint manifests', () => {
  const root = mkdtempSync(path.join(os.tmpdir(), 'trajflow-manifest-'));

  it('passes an intact folder, and one whose trainer state (optimizer, master weights) was removed on purpose', async () => {
    const folder = path.join(root, 'intact');
    await publish(folder);
    await expect(verifyCheckpointFolder(folder)).resolves.toBeUndefined();
    await fs.rm(path.join(folder, 'trainer-state'), { recursive: true });
    await expect(verifyCheckpointFolder(folder)).resolves.toBeUndefined();
  });

  it('names what is wrong: a changed byte, a cut file, a missing file, no manifest', async () => {
    const flipped = path.join(root, 'flipped');
    await publish(flipped);
    await fs.writeFile(path.join(flipped, 'model.safetensors'), 'weights of the versioN');
    expect(await reasonOf(flipped)).toMatch(/^model\.safetensors: checksum mismatch/);

    const cut = path.join(root, 'cut');
    await publish(cut);
    await fs.truncate(path.join(cut, 'model.safetensors'), 4);
    expect(await reasonOf(cut)).toBe('model.safetensors has 4 bytes, the manifest says 22');

    const missing = path.join(root, 'missing');
    await publish(missing);
    await fs.rm(path.join(missing, 'config.json'));
    expect(await reasonOf(missing)).toBe('config.json is missing');

    const unpublished = path.join(root, 'unpublished');
    await fs.mkdir(unpublished);
    expect(await reasonOf(unpublished)).toMatch(/trajflow-manifest\.json is missing/);
  });

  it('a corrupt newest version never reaches the server: the version before it is loaded', async () => {
    const dataDir = path.join(root, 'data');
    const store = new CheckpointStore(dataDir, 'huggingface');
    await publish(store.location('run', 0));
    await publish(store.location('run', 1));
    await fs.writeFile(path.join(store.location('run', 1), 'model.safetensors'), 'torn');
    const loaded: string[] = [];
    const logger = createLogger('test');
    logger.level = 'silent';
    const version = await store.loadNewest('run', 0, async (location, v) => (loaded.push(location), v), logger);
    expect(version).toBe(0);
    expect(loaded).toEqual([store.location('run', 0)]);
    // Refused for good: asked for version 1 or newer, nothing usable is left.
    await expect(store.loadNewest('run', 1, async (_location, v) => v, logger)).rejects.toThrow('refused as corrupt: 1');
  });
});

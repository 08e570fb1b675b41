/**
 * Where a run's published weights live: one checkpoint file per policy version, written by the
 * trainer and read by inference workers when a trajectory needs a newer policy. A shared data
 * directory (or a shared filesystem across machines) is the transport; production engines load
 * the same files through their own weight-update endpoints.
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import type { Logger } from '../log';
import { verifyCheckpointFolder } from './checkpointManifest';
import { CorruptFileError } from './files';
import { checkpointVersionOf, runLayout } from './runLayout';

/** How a version is published: the embedded model's checkpoint file, or a real model's Hugging Face directory. */
export type CheckpointFormat = 'embedded' | 'huggingface';

export class CheckpointStore {
  /** Each run's versions found corrupt: never loaded again by this process. */
  private readonly refused = new Map<string, Set<number>>();
  /** Hugging Face folders checked against their manifests (a published folder never changes). */
  private readonly verified = new Set<string>();

  constructor(
    readonly root: string,
    readonly format: CheckpointFormat = 'embedded',
  ) {}

  dir(runId: string): string {
    return runLayout(this.root, runId).checkpointsDir;
  }

  /** The embedded model's checkpoint file of a version. */
  file(runId: string, version: number): string {
    return runLayout(this.root, runId).checkpointFile(version);
  }

  /**
   * Where a version is published in this store's format: what an inference backend loads. An
   * absolute path, since model servers resolve it from their own working directory.
   */
  location(runId: string, version: number): string {
    const run = runLayout(path.resolve(this.root), runId);
    return this.format === 'huggingface' ? run.checkpointDir(version) : run.checkpointFile(version);
  }

  /** The highest published version of a run, if any, passing over those `loadNewest` refused. */
  async latestVersion(runId: string): Promise<number | undefined> {
    const names = await fs.readdir(this.dir(runId)).catch(() => [] as string[]);
    const versions = names.flatMap((name) => checkpointVersionOf(name) ?? []).filter((version) => !this.refused.get(runId)?.has(version));
    return versions.length ? Math.max(...versions) : undefined;
  }

  /**
   * Loads the newest published version, `atLeast` or newer, through `load` (an inference
   * provider's) and returns the version loaded. A Hugging Face folder is checked against its
   * manifest before `load` sees it. A version whose checkpoint is corrupt is refused for good,
   * with an error logged, and the one before it used instead; throws if no usable version is new
   * enough.
   */
  async loadNewest(runId: string, atLeast: number, load: (location: string, version: number) => Promise<number>, logger: Logger): Promise<number> {
    for (;;) {
      const latest = await this.latestVersion(runId);
      if (latest === undefined || latest < atLeast) {
        const refused = [...(this.refused.get(runId) ?? [])];
        const note = refused.length ? `; refused as corrupt: ${refused.join(', ')}` : '';
        throw new Error(`run ${runId} has published no usable weights version >= ${atLeast} (latest: ${latest ?? 'none'}${note})`);
      }
      try {
        const location = this.location(runId, latest);
        await this.verify(location);
        return await load(location, latest);
      } catch (err) {
        if (!(err instanceof CorruptFileError)) throw err;
        this.refused.set(runId, (this.refused.get(runId) ?? new Set()).add(latest));
        logger.error({ runId, version: latest, file: err.file, reason: err.reason }, 'refusing a corrupt checkpoint; using the version before it');
      }
    }
  }

  /** Checks a Hugging Face folder against its manifest, once per process (CorruptFileError if it differs). */
  async verify(location: string): Promise<void> {
    if (this.format !== 'huggingface' || this.verified.has(location)) return;
    await verifyCheckpointFolder(location);
    this.verified.add(location);
  }
}

/**
 * Where a run's published weights live: one checkpoint file per policy version, written by the
 * trainer and read by inference workers when a trajectory needs a newer policy. A shared data
 * directory (or a shared filesystem across machines) is the transport; production engines load
 * the same files through their own weight-update endpoints.
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { checkpointVersionOf, runLayout } from './runLayout';

/** How a version is published: the embedded model's checkpoint file, or a real model's Hugging Face directory. */
export type CheckpointFormat = 'embedded' | 'huggingface';

export class CheckpointStore {
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

  /** The highest published version of a run, if any. */
  async latestVersion(runId: string): Promise<number | undefined> {
    const names = await fs.readdir(this.dir(runId)).catch(() => [] as string[]);
    const versions = names.flatMap((name) => checkpointVersionOf(name) ?? []);
    return versions.length ? Math.max(...versions) : undefined;
  }
}

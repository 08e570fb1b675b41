/**
 * Where a run's published weights live: one checkpoint file per policy version, written by the
 * trainer and read by inference workers when a trajectory needs a newer policy. A shared data
 * directory (or a shared filesystem across machines) is the transport; production engines load
 * the same files through their own weight-update endpoints.
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';

const FILE = /^v(\d{6,})\.ckpt$/;

export class CheckpointStore {
  constructor(readonly root: string) {}

  dir(runId: string): string {
    return path.join(this.root, 'runs', runId, 'checkpoints');
  }

  file(runId: string, version: number): string {
    return path.join(this.dir(runId), `v${String(version).padStart(6, '0')}.ckpt`);
  }

  /** The highest published version of a run, if any. */
  async latestVersion(runId: string): Promise<number | undefined> {
    const names = await fs.readdir(this.dir(runId)).catch(() => [] as string[]);
    const versions = names.flatMap((name) => {
      const match = FILE.exec(name);
      return match ? [Number(match[1])] : [];
    });
    return versions.length ? Math.max(...versions) : undefined;
  }
}

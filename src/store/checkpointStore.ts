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
import { CorruptFileError, DiskFullError, formatBytes, freeSpace } from './files';
import { checkpointVersionOf, runLayout } from './runLayout';

/**
 * Which published versions retention keeps (config/schema.ts `trainer.checkpoints`, with the run's
 * `maxStaleness` and `eval.everySteps`; python/trajflow_py/trainer/retention.py is the twin).
 */
export interface RetentionPolicy {
  keepLast: number;
  /** 0: no sparse history. */
  keepEvery: number;
  maxStaleness: number;
  /** 0: the run has no evaluations. */
  evalEverySteps: number;
}

/**
 * Of the published `versions`, those retention keeps: version 0 (the KL reference, and where a
 * fresh start begins), the newest max(keepLast, maxStaleness + 1) (resume, and the inference
 * workers, which may still be loading any version sampling may use), every keepEvery-th, and each
 * version an evaluation is due for until `evaluated` says its result is written.
 */
export function versionsToKeep(versions: readonly number[], policy: RetentionPolicy, evaluated: (version: number) => boolean): Set<number> {
  const present = [...new Set(versions)].sort((a, b) => a - b);
  const newestCount = Math.max(policy.keepLast, policy.maxStaleness + 1);
  const kept = new Set([0, ...present.slice(-newestCount)]);
  for (const version of present) {
    if (policy.keepEvery > 0 && version % policy.keepEvery === 0) kept.add(version);
    // A version is a step count: the workflow evaluates at multiples of everySteps.
    if (policy.evalEverySteps > 0 && version % policy.evalEverySteps === 0 && !evaluated(version)) kept.add(version);
  }
  return new Set(present.filter((version) => kept.has(version)));
}

/** What a deletion renames a version to: no checkpoint name, so no reader lists it while it is removed. */
const DELETING = /^\.v\d{6,}.*\.deleting$/;

function deletingName(entry: string): string {
  return `.${entry}.deleting`;
}

/** Bytes available on `folder`'s filesystem (statfs), or undefined where it cannot tell. */
export type FreeBytes = (folder: string) => Promise<number | undefined>;

const filesystemFreeBytes: FreeBytes = async (folder) => (await freeSpace(folder))?.free;

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

  /** Every published version of a run, ascending (none for a run without checkpoints). */
  async publishedVersions(runId: string): Promise<number[]> {
    const names = await fs.readdir(this.dir(runId)).catch(() => [] as string[]);
    return names.flatMap((name) => checkpointVersionOf(name) ?? []).sort((a, b) => a - b);
  }

  /** The highest published version of a run, if any, passing over those `loadNewest` refused. */
  async latestVersion(runId: string): Promise<number | undefined> {
    const versions = (await this.publishedVersions(runId)).filter((version) => !this.refused.get(runId)?.has(version));
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
        // Retention deleted it between the listing and the load (it renames a version away before
        // removing it): not corrupt, and a newer one exists; list again.
        if (!(await this.publishedVersions(runId)).includes(latest)) {
          logger.info({ runId, version: latest }, 'checkpoint deleted while loading it; loading the newest again');
          continue;
        }
        if (!(err instanceof CorruptFileError)) throw err;
        this.refused.set(runId, (this.refused.get(runId) ?? new Set()).add(latest));
        logger.error({ runId, version: latest, file: err.file, reason: err.reason }, 'refusing a corrupt checkpoint; using the version before it');
      }
    }
  }

  /**
   * Deletes the versions `versionsToKeep` does not keep, and what an earlier pass cut short by a
   * crash left behind; returns the versions deleted, oldest first. Each is renamed aside first,
   * so a reader never sees half of one.
   */
  async prune(runId: string, policy: RetentionPolicy, evaluated: (version: number) => Promise<boolean>): Promise<number[]> {
    const dir = this.dir(runId);
    const names = await fs.readdir(dir).catch(() => [] as string[]);
    await Promise.all(names.filter((name) => DELETING.test(name)).map((name) => fs.rm(path.join(dir, name), { recursive: true, force: true })));
    const entries = names.flatMap((name) => {
      const version = checkpointVersionOf(name);
      return version === undefined ? [] : [{ version, name }];
    });
    const versions = entries.map((entry) => entry.version);
    const evaluatedVersions = new Set((await Promise.all(versions.map(async (version) => ((await evaluated(version)) ? [version] : [])))).flat());
    const kept = versionsToKeep(versions, policy, (version) => evaluatedVersions.has(version));
    const doomed = entries.filter((entry) => !kept.has(entry.version)).sort((a, b) => a.version - b.version);
    for (const entry of doomed) await deleteEntry(dir, entry.name);
    return doomed.map((entry) => entry.version);
  }

  /**
   * Throws DiskFullError (retryable: space may be freed) when `neededBytes` would not fit on the
   * run's checkpoint folder's filesystem: said before a save, not found out halfway through it.
   */
  async ensureRoomFor(runId: string, neededBytes: number, freeBytes: FreeBytes = filesystemFreeBytes): Promise<void> {
    const dir = this.dir(runId);
    const free = await freeBytes(dir);
    if (free === undefined || free >= neededBytes) return;
    const space = await freeSpace(dir);
    const reason = `a checkpoint needs about ${formatBytes(neededBytes)} (${neededBytes} bytes), only ${formatBytes(free)} (${free} bytes) are free`;
    throw new DiskFullError(dir, free, space?.total, new Error(reason));
  }

  /** Checks a Hugging Face folder against its manifest, once per process (CorruptFileError if it differs). */
  async verify(location: string): Promise<void> {
    if (this.format !== 'huggingface' || this.verified.has(location)) return;
    await verifyCheckpointFolder(location);
    this.verified.add(location);
  }
}

/** Renames a version's file or folder aside, then removes it; one already gone is no error. */
async function deleteEntry(dir: string, name: string): Promise<void> {
  const aside = path.join(dir, deletingName(name));
  try {
    await fs.rename(path.join(dir, name), aside);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw err;
  }
  await fs.rm(aside, { recursive: true, force: true });
}

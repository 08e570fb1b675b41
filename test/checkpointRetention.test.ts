/**
 * Checkpoint retention (`trainer.checkpoints`, src/store/checkpointStore.ts) on the embedded
 * trainer's checkpoint files: which versions a pass keeps, a 30-step run of the trainer's
 * activities whose folder holds only those, a deletion cut short by a crash, the disk-space check
 * before a save, and an inference worker whose version is deleted while it loads it.
 */
import { mkdtempSync, readdirSync, rmSync, writeFileSync, mkdirSync, renameSync, existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { MockActivityEnvironment } from '@temporalio/testing';
import { AgentConfigSchema, EnvConfigSchema, ModelConfigSchema, TrainerConfigSchema } from '../config/schema';
import { createTrainerActivities, type TrainStepInput } from '../activities/trainer';
import { CheckpointStore, versionsToKeep, type RetentionPolicy } from '../src/store/checkpointStore';
import { DiskFullError, writeJsonAtomically } from '../src/store/files';
import { runLayout } from '../src/store/runLayout';
import { TrajectoryStore } from '../src/store/trajectoryStore';

const RUN = 'run-1';
const COMPATIBILITY = { code: 'test', model: 'test', modules: 'test' };
const silent = pino({ level: 'silent' });

let dataDir: string;
beforeEach(() => {
  dataDir = mkdtempSync(path.join(os.tmpdir(), 'trajflow-retention-'));
});
afterEach(() => rmSync(dataDir, { recursive: true, force: true }));

const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);

function policy(overrides: Partial<RetentionPolicy>): RetentionPolicy {
  return { keepLast: 3, keepEvery: 0, maxStaleness: 0, evalEverySteps: 0, ...overrides };
}

function publishFake(store: CheckpointStore, version: number): void {
  mkdirSync(store.dir(RUN), { recursive: true });
  writeFileSync(store.file(RUN, version), 'w'.repeat(16));
}

const folder = (store: CheckpointStore) => readdirSync(store.dir(RUN)).sort();
const never = async () => false;

describe('versionsToKeep', () => {
  it('keeps version 0, the newest max(keepLast, maxStaleness + 1), every keepEvery-th and each version awaiting its evaluation', () => {
    const all = range(0, 30);
    expect([...versionsToKeep(all, policy({ keepLast: 3, keepEvery: 10 }), () => true)].sort((a, b) => a - b)).toEqual([0, 10, 20, 28, 29, 30]);
    expect([...versionsToKeep(all, policy({ keepLast: 1, maxStaleness: 4 }), () => true)].sort((a, b) => a - b)).toEqual([0, 26, 27, 28, 29, 30]);
    const evaluated = (version: number) => version < 20;
    expect([...versionsToKeep(all, policy({ keepLast: 2, evalEverySteps: 5 }), evaluated)].sort((a, b) => a - b)).toEqual([0, 20, 25, 29, 30]);
  });
});

describe('CheckpointStore.prune', () => {
  it('over 30 published versions leaves exactly the kept ones in the folder', async () => {
    const store = new CheckpointStore(dataDir);
    publishFake(store, 0);
    for (const version of range(1, 30)) {
      publishFake(store, version);
      await store.prune(RUN, policy({ keepLast: 3, keepEvery: 10, maxStaleness: 1 }), never);
    }
    expect(folder(store)).toEqual(['v000000.ckpt', 'v000010.ckpt', 'v000020.ckpt', 'v000028.ckpt', 'v000029.ckpt', 'v000030.ckpt']);
  });

  it('keeps a version awaiting its evaluation until the result file exists', async () => {
    const store = new CheckpointStore(dataDir);
    for (const version of range(0, 12)) publishFake(store, version);
    const run = runLayout(dataDir, RUN);
    const evaluated = async (version: number) => existsSync(run.evaluationFile(version));
    expect(await store.prune(RUN, policy({ keepLast: 1, evalEverySteps: 5 }), evaluated)).toEqual([1, 2, 3, 4, 6, 7, 8, 9, 11]);
    expect(await store.publishedVersions(RUN)).toEqual([0, 5, 10, 12]);
    await writeJsonAtomically(run.evaluationFile(5), { version: 5 });
    expect(await store.prune(RUN, policy({ keepLast: 1, evalEverySteps: 5 }), evaluated)).toEqual([5]);
    expect(await store.publishedVersions(RUN)).toEqual([0, 10, 12]);
  });

  it('finishes a deletion a crash cut short, and deleting what is gone is no error', async () => {
    const store = new CheckpointStore(dataDir);
    for (const version of range(0, 4)) publishFake(store, version);
    // A crash between the rename and the removal leaves the renamed file behind.
    renameSync(store.file(RUN, 1), path.join(store.dir(RUN), '.v000001.ckpt.deleting'));
    expect(await store.prune(RUN, policy({ keepLast: 2 }), never)).toEqual([2]);
    expect(folder(store)).toEqual(['v000000.ckpt', 'v000003.ckpt', 'v000004.ckpt']);
    expect(await store.prune(RUN, policy({ keepLast: 2 }), never)).toEqual([]);
    expect(await new CheckpointStore(dataDir).prune('no-such-run', policy({}), never)).toEqual([]);
  });
});

/** The embedded trainer's activities on a tiny model, publishing into `checkpoints`. */
function tinyTrainer(checkpoints: CheckpointStore) {
  const model = ModelConfigSchema.parse({ dModel: 16, nLayers: 1, nHeads: 2, dFF: 32, maxContext: 64 });
  return createTrainerActivities({ model, compatibility: COMPATIBILITY, store: new TrajectoryStore(dataDir), checkpoints, dataDir, logger: silent });
}

describe('the embedded trainer with trainer.checkpoints', () => {
  it('a 30-step run keeps at most the configured checkpoints', async () => {
    const checkpoints = new CheckpointStore(dataDir);
    const activities = tinyTrainer(checkpoints);
    const trainer = TrainerConfigSchema.parse({ maxStaleness: 1, checkpoints: { keepLast: 2, keepEvery: 8 } });
    const env = EnvConfigSchema.parse({ name: 'frozenlake' });
    await new MockActivityEnvironment().run(activities.preparePolicy, { runId: RUN, trainer, temperature: 1, env, agent: AgentConfigSchema.parse({}) });
    for (const step of range(0, 29)) {
      // No groups: each step publishes the same weights as the next version, which is all retention looks at.
      const input: TrainStepInput = { runId: RUN, step, baseVersion: step, groups: [], trainer, temperature: 1, evalEverySteps: 0 };
      await new MockActivityEnvironment().run(activities.trainStep, input);
      expect((await checkpoints.publishedVersions(RUN)).length).toBeLessThanOrEqual(2 + 1 + Math.floor((step + 1) / 8));
    }
    expect(folder(checkpoints)).toEqual(['v000000.ckpt', 'v000008.ckpt', 'v000016.ckpt', 'v000024.ckpt', 'v000029.ckpt', 'v000030.ckpt']);
  });

  it('a run without the key in its input (started before it existed) keeps every version', async () => {
    const checkpoints = new CheckpointStore(dataDir);
    const activities = tinyTrainer(checkpoints);
    const { checkpoints: _dropped, ...trainer } = TrainerConfigSchema.parse({});
    const env = EnvConfigSchema.parse({ name: 'frozenlake' });
    const legacy = trainer as unknown as TrainStepInput['trainer'];
    await new MockActivityEnvironment().run(activities.preparePolicy, { runId: RUN, trainer: legacy, temperature: 1, env, agent: AgentConfigSchema.parse({}) });
    for (const step of range(0, 4)) {
      await new MockActivityEnvironment().run(activities.trainStep, { runId: RUN, step, baseVersion: step, groups: [], trainer: legacy, temperature: 1 });
    }
    expect(await checkpoints.publishedVersions(RUN)).toEqual(range(0, 5));
  });
});

describe('CheckpointStore.ensureRoomFor', () => {
  it('refuses a save the disk cannot hold, naming the folder, the bytes needed and those free', async () => {
    const store = new CheckpointStore(dataDir);
    const refused = store.ensureRoomFor(RUN, 5000, async () => 1200);
    await expect(refused).rejects.toThrow(DiskFullError);
    await expect(refused).rejects.toThrow(store.dir(RUN));
    await expect(refused).rejects.toThrow(/5000 bytes.*1200 bytes/);
    await expect(store.ensureRoomFor(RUN, 5000, async () => 5000)).resolves.toBeUndefined();
    // Where the free space cannot be told, the save goes ahead (a write that fails says so itself).
    await expect(store.ensureRoomFor(RUN, 5000, async () => undefined)).resolves.toBeUndefined();
  });
});

describe('CheckpointStore.loadNewest', () => {
  it('loads the newest again when the version it listed is deleted before it loads', async () => {
    const store = new CheckpointStore(dataDir);
    for (const version of range(0, 2)) publishFake(store, version);
    const tried: number[] = [];
    const loaded = await store.loadNewest(
      RUN,
      1,
      async (location, version) => {
        tried.push(version);
        if (version === 2) {
          // Meanwhile the trainer published v3 and retention deleted v2.
          publishFake(store, 3);
          rmSync(location);
          throw Object.assign(new Error(`ENOENT: ${location}`), { code: 'ENOENT' });
        }
        return version;
      },
      silent,
    );
    expect(tried).toEqual([2, 3]);
    expect(loaded).toBe(3);
  });

  it('still fails on a load error of a version that is there', async () => {
    const store = new CheckpointStore(dataDir);
    publishFake(store, 0);
    await expect(store.loadNewest(RUN, 0, async () => Promise.reject(new Error('engine down')), silent)).rejects.toThrow('engine down');
  });
});

/**
 * The store on real files: every write is fsynced, placed, and its folder fsynced before it
 * returns; a torn or corrupt turn file, JSON line or checkpoint is detected by its length and
 * checksum and refused with its reason; a full filesystem (a 1 MiB tmpfs) gives a retryable
 * error naming the path and the free space, and leaves no partial file behind.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, promises as fs, mkdtempSync, readdirSync, readFileSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { defaultFailureConverter, defaultPayloadConverter } from '@temporalio/common';
import { CORRUPT_STORED_FILE, DISK_FULL, EPISODE_FAILURE_STATUS } from '../src/core/failures';
import type { TurnRecord } from '../src/core/records';
import { readSnapshots, SnapshotReporter } from '../src/metrics/snapshots';
import { modelConfig } from '../src/model/config';
import { initWeights, loadCheckpoint, saveCheckpoint } from '../src/model/weights';
import { CheckpointStore } from '../src/store/checkpointStore';
import { CorruptFileError, DiskFullError, sealRecord, unsealRecord } from '../src/store/files';
import { appendJsonLine, readJsonLines } from '../src/store/jsonLines';
import { runLayout } from '../src/store/runLayout';
import { TrajectoryStore } from '../src/store/trajectoryStore';
import SEALED from './fixtures/twins/sealed.json';

const RUN = 'run-1';

function turn(trajectoryId: string, n: number): TurnRecord {
  const completionIds = Array.from({ length: 40 }, (_, i) => 100 + ((n * 7 + i) % 150));
  return {
    trajectoryId,
    turn: n,
    messages: [{ role: 'user', content: `observation ${n}: you are on cell ${n}` }],
    promptDeltaIds: Array.from({ length: 30 }, (_, i) => i + n),
    completionIds,
    logprobs: completionIds.map((_, i) => -0.01 * (i + 1)),
    policyVersions: completionIds.map(() => 2),
    finishReason: 'stop',
    text: `move ${n}`,
    contextTokens: 30 * (n + 1),
  };
}

/** A pino logger whose records land in `records` (parsed). */
function capturingLogger(records: Record<string, unknown>[]) {
  return pino({ level: 'debug' }, { write: (line: string) => void records.push(JSON.parse(line)) });
}

let dataDir: string;
beforeEach(() => {
  dataDir = mkdtempSync(path.join(os.tmpdir(), 'trajflow-durability-'));
});
afterEach(() => rmSync(dataDir, { recursive: true, force: true }));

describe('sealed records', () => {
  it('seals the twins fixture record to its line byte for byte, and reads the line back (as the Python trainer does)', () => {
    expect(sealRecord(SEALED.record).toString('utf8')).toBe(`${SEALED.sealed}\n`);
    expect(unsealRecord(Buffer.from(SEALED.sealed, 'utf8'), 'fixture')).toEqual(SEALED.record);
  });

  it('a stored turn is one line of JSON: the body with its byte length and sha256 in front', async () => {
    const store = new TrajectoryStore(dataDir);
    const record = turn('t0', 0);
    await store.putTurnOnce(RUN, record);
    const text = readFileSync(runLayout(dataDir, RUN).turnFile('t0', 0), 'utf8');
    const body = JSON.stringify(record);
    const sha256 = createHash('sha256').update(body).digest('hex');
    expect(text).toBe(`{"bytes":${Buffer.byteLength(body)},"sha256":"${sha256}","body":${body}}\n`);
    expect(JSON.parse(text).body).toEqual(record);
    expect(await store.getTurn(RUN, 't0', 0)).toEqual(record);
  });

  const corruptions: [string, (bytes: Buffer) => Buffer, RegExp][] = [
    ['cut short', (bytes) => bytes.subarray(0, Math.floor(bytes.length / 2)), /truncated: \d+ of \d+ body bytes/],
    ['empty (its data never reached the disk)', () => Buffer.alloc(0), /empty \(0 bytes\)/],
    ['zeroed', (bytes) => Buffer.alloc(bytes.length), /not a sealed record: it starts "\\u0000/],
    [
      'with a flipped bit in the body',
      (bytes) => {
        const copy = Buffer.from(bytes);
        copy[copy.indexOf('"text":"move') + 9] ^= 0x01;
        return copy;
      },
      /checksum mismatch: the \d+ body bytes hash to sha256 [0-9a-f]{64}, the seal says [0-9a-f]{64}/,
    ],
    [
      'a changed length',
      (bytes) =>
        Buffer.from(
          bytes.toString('latin1').replace(/^\{"bytes":(\d+)/, (_, n) => `{"bytes":${Number(n) + 1}`),
          'latin1',
        ),
      /truncated/,
    ],
  ];

  it.each(corruptions)('a turn file %s is refused with the reason, as a non-retryable CorruptStoredFile', async (_, corrupt, reason) => {
    const store = new TrajectoryStore(dataDir);
    for (let n = 0; n < 3; n++) await store.putTurnOnce(RUN, turn('t0', n));
    const file = runLayout(dataDir, RUN).turnFile('t0', 1);
    writeFileSync(file, corrupt(readFileSync(file)));

    // getTurns is what generate (the prompt) and the trainer (the batch) read turns with.
    const error = await store.getTurns(RUN, 't0').catch((err: unknown) => err);
    expect(error).toBeInstanceOf(CorruptFileError);
    const corruptError = error as CorruptFileError;
    expect(corruptError.file).toBe(file);
    expect(corruptError.reason).toMatch(reason);
    expect(corruptError.message).toBe(`corrupt record ${file}: ${corruptError.reason}`);
    // What a workflow receives: the failure type it recognises, not retryable, and the episode ends failed.
    const failure = defaultFailureConverter.errorToFailure(error, defaultPayloadConverter);
    expect(failure.applicationFailureInfo).toMatchObject({ type: CORRUPT_STORED_FILE, nonRetryable: true });
    expect(failure.message).toContain(file);
    expect(EPISODE_FAILURE_STATUS[CORRUPT_STORED_FILE]).toBe('failed');
    // The intact turns around it still read.
    expect(await store.getTurn(RUN, 't0', 2)).toEqual(turn('t0', 2));
  });

  it('a retried write finds the stored turn, and a corrupt one is reported rather than kept', async () => {
    const store = new TrajectoryStore(dataDir);
    const first = turn('t0', 0);
    await store.putTurnOnce(RUN, first);
    expect(await store.putTurnOnce(RUN, { ...first, text: 'a second attempt' })).toEqual(first);
    const file = runLayout(dataDir, RUN).turnFile('t0', 0);
    truncateSync(file, 50);
    await expect(store.putTurnOnce(RUN, first)).rejects.toThrow(CorruptFileError);
    expect(readdirSync(path.dirname(file))).toEqual([path.basename(file)]);
  });

  it('plain JSON without a seal is refused: nothing vouches for its length or content', async () => {
    const file = runLayout(dataDir, RUN).turnFile('t0', 0);
    await fs.mkdir(path.dirname(file), { recursive: true });
    writeFileSync(file, JSON.stringify(turn('t0', 0)));
    await expect(new TrajectoryStore(dataDir).getTurn(RUN, 't0', 0)).rejects.toThrow(/not a sealed record: it starts "\{\\"traject/);
  });
});

describe('worker snapshots', () => {
  it('a corrupt snapshot is left out, not failing the reader (a train step measuring utilization)', async () => {
    const dir = path.join(dataDir, 'engines');
    await new SnapshotReporter(() => ({ busyMs: 5 }), dir).flush();
    writeFileSync(path.join(dir, 'other-host-1.json'), '{"bytes":40,"sha256":"');
    expect(await readSnapshots<{ busyMs: number }>(dir)).toEqual([expect.objectContaining({ busyMs: 5 })]);
  });
});

describe('JSON Lines', () => {
  it('a corrupt line and a line torn by a crash are skipped with a warning; the next append starts its own line', async () => {
    const file = runLayout(dataDir, RUN).metricsFile;
    for (const step of [0, 1, 2]) await appendJsonLine(file, { step, loss: step / 10 });
    // Line 2 (step 1) rots: a digit of its body changes. Then a crash cuts an append short.
    const lines = readFileSync(file, 'utf8').split('\n');
    lines[1] = lines[1].replace('"loss":0.1', '"loss":0.7');
    const torn = `{"bytes":20,"sha256":"${'ab'.repeat(32)}","body":{"step":`;
    writeFileSync(file, `${lines.join('\n')}${torn}`);
    await appendJsonLine(file, { step: 3, loss: 0.3 });

    const records: Record<string, unknown>[] = [];
    const read = await readJsonLines<{ step: number; loss: number }>(file, (m) => m.step, capturingLogger(records));
    expect(read).toEqual([
      { step: 0, loss: 0 },
      { step: 2, loss: 0.2 },
      { step: 3, loss: 0.3 },
    ]);
    const warnings = records.filter((r) => r.msg === 'skipping a torn or corrupt JSON line');
    expect(warnings.map((w) => [w.file, w.line])).toEqual([
      [file, 2],
      [file, 4],
    ]);
    expect(warnings[0].reason).toMatch(/checksum mismatch/);
    expect(warnings[1].reason).toMatch(/truncated/);
  });
});

describe('embedded checkpoints', () => {
  const config = modelConfig({ maxContext: 64, dModel: 32, nLayers: 1, nHeads: 2 });

  it('a truncated checkpoint is refused with its reason and the version before it is used', async () => {
    const checkpoints = new CheckpointStore(dataDir);
    for (const version of [0, 1]) await saveCheckpoint(checkpoints.file(RUN, version), { weights: initWeights(config, version), policyVersion: version });
    const newest = checkpoints.file(RUN, 1);
    truncateSync(newest, readFileSync(newest).length - 100);

    await expect(loadCheckpoint(newest)).rejects.toThrow(new RegExp(`^corrupt checkpoint ${newest}: truncated: \\d+ data bytes, expected \\d+$`));
    const loads: number[] = [];
    // An inference provider's loadWeights: read the file, return its version.
    const load = async (location: string, version: number) => {
      loads.push(version);
      return (await loadCheckpoint(location)).policyVersion;
    };
    const records: Record<string, unknown>[] = [];
    const logger = capturingLogger(records);
    expect(await checkpoints.loadNewest(RUN, 0, load, logger)).toBe(0);
    expect(records).toEqual([
      expect.objectContaining({
        level: 50,
        msg: 'refusing a corrupt checkpoint; using the version before it',
        runId: RUN,
        version: 1,
        file: newest,
        reason: expect.stringMatching(/^truncated: /),
      }),
    ]);
    // Refused for good: the newest usable version is 0, and version 1 is not read again.
    expect(await checkpoints.latestVersion(RUN)).toBe(0);
    expect(await checkpoints.loadNewest(RUN, 0, load, logger)).toBe(0);
    expect(loads).toEqual([1, 0, 0]);
    await expect(checkpoints.loadNewest(RUN, 1, load, logger)).rejects.toThrow(
      `run ${RUN} has published no usable weights version >= 1 (latest: 0; refused as corrupt: 1)`,
    );
  });
});

describe('durability', () => {
  /** Records, in order, each fsync (of the file or folder it was opened as), rename and link. */
  async function recordingSyscalls(work: () => Promise<unknown>): Promise<string[]> {
    const events: string[] = [];
    const opened = new WeakMap<object, string>();
    const probe = await fs.open(dataDir, 'r');
    const handlePrototype = Object.getPrototypeOf(probe);
    await probe.close();
    const { open, rename, link } = fs;
    const { sync } = handlePrototype;
    // Each records its call, then does the real thing.
    const spies = [
      jest.spyOn(fs, 'open').mockImplementation(async (...args: Parameters<typeof fs.open>) => {
        const handle = await open(...args);
        opened.set(handle, path.relative(dataDir, String(args[0])));
        return handle;
      }),
      jest.spyOn(handlePrototype, 'sync').mockImplementation(function (this: object) {
        events.push(`fsync ${opened.get(this)}`);
        return sync.call(this);
      }),
      jest.spyOn(fs, 'rename').mockImplementation((from, to) => {
        events.push(`rename ${path.relative(dataDir, String(to))}`);
        return rename(from, to);
      }),
      jest.spyOn(fs, 'link').mockImplementation((from, to) => {
        events.push(`link ${path.relative(dataDir, String(to))}`);
        return link(from, to);
      }),
    ];
    try {
      await work();
    } finally {
      for (const spy of spies) spy.mockRestore();
    }
    // Temp names are random: name them by what they become.
    return events.map((e) => e.replace(/\.[0-9a-f-]{36}\.tmp$/, '.tmp'));
  }

  it('a turn is fsynced, linked into place and its folder fsynced (new folders in their parents) before putTurnOnce returns', async () => {
    const store = new TrajectoryStore(dataDir);
    await fs.mkdir(path.join(dataDir, 'runs', RUN, 'trajectories'), { recursive: true });
    const events = await recordingSyscalls(() => store.putTurnOnce(RUN, turn('t0', 0)));
    const dir = `runs/${RUN}/trajectories/t0`;
    expect(events).toEqual([`fsync runs/${RUN}/trajectories`, `fsync ${dir}/turn-000000.json.tmp`, `link ${dir}/turn-000000.json`, `fsync ${dir}`]);
  });

  it('a summary and a checkpoint are fsynced, renamed into place and their folder fsynced', async () => {
    const store = new TrajectoryStore(dataDir);
    await store.putTurnOnce(RUN, turn('t0', 0));
    const summary = { runId: RUN, trajectoryId: 't0' } as Parameters<TrajectoryStore['putTrajectory']>[0];
    const dir = `runs/${RUN}/trajectories/t0`;
    expect(await recordingSyscalls(() => store.putTrajectory(summary))).toEqual([
      `fsync ${dir}/summary.json.tmp`,
      `rename ${dir}/summary.json`,
      `fsync ${dir}`,
    ]);

    const checkpoints = new CheckpointStore(dataDir);
    const weights = initWeights(modelConfig({ maxContext: 64, dModel: 32, nLayers: 1, nHeads: 2 }), 0);
    const events = await recordingSyscalls(() => saveCheckpoint(checkpoints.file(RUN, 0), { weights, policyVersion: 0 }));
    const ckpt = `runs/${RUN}/checkpoints`;
    expect(events).toEqual([`fsync runs/${RUN}`, `fsync ${ckpt}/v000000.ckpt.tmp`, `rename ${ckpt}/v000000.ckpt`, `fsync ${ckpt}`]);
  });

  it('an appended JSON line is fsynced before appendJsonLine returns, and the new file in its folder', async () => {
    const file = runLayout(dataDir, RUN).metricsFile;
    await fs.mkdir(path.dirname(file), { recursive: true });
    const train = `runs/${RUN}/train`;
    expect(await recordingSyscalls(() => appendJsonLine(file, { step: 0 }))).toEqual([`fsync ${train}/metrics.jsonl`, `fsync ${train}`]);
    expect(await recordingSyscalls(() => appendJsonLine(file, { step: 1 }))).toEqual([`fsync ${train}/metrics.jsonl`]);
  });
});

/** Mounts a 1 MiB tmpfs at `dir`; false where this process may not mount (not root). */
function mountSmallFilesystem(dir: string): boolean {
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', dir], { stdio: 'pipe' });
    return true;
  } catch {
    return false;
  }
}

const smallFs = mkdtempSync(path.join(os.tmpdir(), 'trajflow-fullfs-'));
const mounted = mountSmallFilesystem(smallFs);
const onSmallFs = mounted ? describe : describe.skip;
if (!mounted) {
  console.warn(`store.durability: cannot mount a tmpfs at ${smallFs} (needs root); the full-disk tests are skipped`);
  rmSync(smallFs, { recursive: true, force: true });
}

onSmallFs('a full filesystem (1 MiB tmpfs as the data directory)', () => {
  afterAll(() => {
    execFileSync('umount', [smallFs]);
    rmSync(smallFs, { recursive: true, force: true });
  });
  afterEach(async () => {
    for (const name of await fs.readdir(smallFs)) await fs.rm(path.join(smallFs, name), { recursive: true, force: true });
  });

  /** Fills the filesystem: a file written until the disk refuses more. */
  async function fill(): Promise<string> {
    const filler = path.join(smallFs, 'filler');
    await expect(fs.writeFile(filler, Buffer.alloc(2 << 20))).rejects.toThrow(/ENOSPC/);
    return filler;
  }

  it('a turn write fails with a retryable DiskFull error naming the path and the free space, leaves no file, and a retry succeeds once space is freed', async () => {
    const store = new TrajectoryStore(smallFs);
    await store.putTurnOnce(RUN, turn('t0', 0));
    const filler = await fill();

    const file = runLayout(smallFs, RUN).turnFile('t0', 1);
    const error = await store.putTurnOnce(RUN, turn('t0', 1)).catch((err: unknown) => err);
    expect(error).toBeInstanceOf(DiskFullError);
    expect((error as Error).message).toMatch(
      new RegExp(`^no space left on device writing ${file} \\(\\d+(\\.\\d)? (B|KiB) free of 1\\.0 MiB on its filesystem\\): ENOSPC`),
    );
    expect((error as DiskFullError).freeBytes).toBeLessThan(8192);
    const failure = defaultFailureConverter.errorToFailure(error, defaultPayloadConverter);
    expect(failure.applicationFailureInfo).toMatchObject({ type: DISK_FULL, nonRetryable: false });
    // Nothing half-written: no turn file, no temp file; the earlier turn intact.
    expect(readdirSync(path.dirname(file))).toEqual(['turn-000000.json']);
    expect(await store.getTurn(RUN, 't0', 0)).toEqual(turn('t0', 0));

    await fs.rm(filler);
    expect(await store.putTurnOnce(RUN, turn('t0', 1))).toEqual(turn('t0', 1));
    expect(await store.getTurns(RUN, 't0')).toEqual([turn('t0', 0), turn('t0', 1)]);
  });

  it('a JSON line that does not fit is cut back off, so the file keeps only whole lines', async () => {
    const file = runLayout(smallFs, RUN).metricsFile;
    await appendJsonLine(file, { step: 0 });
    const before = readFileSync(file);
    // 16 KiB left: the first 16 KiB of the line are written before the disk refuses the rest.
    const filler = await fill();
    await fs.truncate(filler, (await fs.stat(filler)).size - (16 << 10));
    const big = { step: 1, note: 'x'.repeat(64 << 10) };
    await expect(appendJsonLine(file, big)).rejects.toThrow(new RegExp(`^no space left on device writing ${file} \\(`));
    expect(readFileSync(file).equals(before)).toBe(true);
  });

  it('a checkpoint larger than the free space fails with DiskFull and leaves no temp file', async () => {
    const checkpoints = new CheckpointStore(smallFs);
    // About 2 MiB of float32 weights: more than the whole filesystem.
    const weights = initWeights(modelConfig({ maxContext: 256, dModel: 128, nLayers: 2, nHeads: 4, dFF: 512 }), 0);
    const file = checkpoints.file(RUN, 0);
    await expect(saveCheckpoint(file, { weights, policyVersion: 0 })).rejects.toThrow(DiskFullError);
    expect(readdirSync(path.dirname(file))).toEqual([]);
    expect(existsSync(file)).toBe(false);
  });
});

/**
 * `npm run bench:storage`: what durable storage costs. Turn writes per second through the
 * trajectory store, durable (each turn fsynced, linked into place, its folder fsynced: what
 * trajflow does) and not (the same sealed writes without any fsync), side by side in one run:
 * one write at a time (one trajectory's turns follow each other) and 16 at a time (an inference
 * worker storing a batch of turns together). The two kinds alternate over a few rounds and each
 * figure is the median round, since these machines are noisy.
 *
 * Options: --dir <folder> (default: a folder under .trajflow/, on the data directory's
 * filesystem; on a tmpfs an fsync costs nothing), --turns N per round (default 300).
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import type { TurnRecord } from '../src/core/records';
import { PROJECT_ROOT } from '../src/paths';
import { sealRecord } from '../src/store/files';
import { TrajectoryStore } from '../src/store/trajectoryStore';

const ROUNDS = 3;
/** Turns per trajectory: each new trajectory also creates (and, durably, syncs) its folder. */
const TURNS_PER_TRAJECTORY = 12;
const CONCURRENCY = [1, 16];

/** statfs magic numbers of the filesystems these machines use. */
const FILESYSTEMS: Record<number, string> = { 0xef53: 'ext4', 0x01021994: 'tmpfs', 0x58465342: 'xfs', 0x9123683e: 'btrfs', 0x794c7630: 'overlayfs' };

function argument(name: string): string | undefined {
  const at = process.argv.indexOf(`--${name}`);
  return at >= 0 ? process.argv[at + 1] : undefined;
}

/** A turn of a tool-using agent: a 200-token prompt delta, 64 completion tokens with logprobs. */
function turnRecord(trajectoryId: string, turn: number): TurnRecord {
  const completionIds = Array.from({ length: 64 }, (_, i) => 1000 + ((turn * 31 + i * 17) % 30000));
  return {
    trajectoryId,
    turn,
    messages: [{ role: 'user', content: `Tool result for call ${turn}: ${'0123456789'.repeat(20)}` }],
    promptDeltaIds: Array.from({ length: 200 }, (_, i) => 2000 + ((turn * 13 + i * 7) % 30000)),
    completionIds,
    logprobs: completionIds.map((_, i) => -Math.abs(Math.sin(turn + i)) * 3),
    policyVersions: completionIds.map(() => 7),
    finishReason: 'stop',
    text: `<tool_call>{"name":"calculator","arguments":{"expression":"${turn} * 17"}}</tool_call>`,
    contextTokens: 264 * (turn + 1),
  };
}

/** Turns per second writing `turns` turns into fresh trajectories, `concurrency` writes in flight. */
async function writeRate(store: TrajectoryStore, runId: string, turns: number, concurrency: number): Promise<number> {
  let next = 0;
  const started = performance.now();
  const writer = async () => {
    for (let i = next++; i < turns; i = next++) {
      await store.putTurnOnce(runId, turnRecord(`t${Math.floor(i / TURNS_PER_TRAJECTORY)}`, i % TURNS_PER_TRAJECTORY));
    }
  };
  await Promise.all(Array.from({ length: concurrency }, writer));
  return turns / ((performance.now() - started) / 1000);
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

async function main(): Promise<void> {
  const turns = Number(argument('turns') ?? 300);
  if (!Number.isInteger(turns) || turns < 1) throw new Error(`--turns needs a positive integer, got ${JSON.stringify(argument('turns'))}`);
  const parent = argument('dir') ?? path.join(PROJECT_ROOT, '.trajflow');
  await fs.mkdir(parent, { recursive: true });
  const dir = await fs.mkdtemp(path.join(parent, 'bench-storage-'));
  const stores = { durable: new TrajectoryStore(dir), notDurable: new TrajectoryStore(dir, { durable: false }) };
  try {
    const { type } = await fs.statfs(dir);
    const turnBytes = sealRecord(turnRecord('t0', 5)).length;
    console.log(`turn writes through the trajectory store (${turnBytes} bytes each, ${turns} a round, median of ${ROUNDS} rounds)`);
    console.log(`  in ${dir} (${FILESYSTEMS[type] ?? `filesystem 0x${type.toString(16)}`})`);
    console.log('  in flight   durable (fsync)   not durable   ratio');
    let round = 0;
    for (const concurrency of CONCURRENCY) {
      const rates = { durable: [] as number[], notDurable: [] as number[] };
      for (let r = 0; r < ROUNDS; r++) {
        for (const kind of ['durable', 'notDurable'] as const) rates[kind].push(await writeRate(stores[kind], `round-${round++}`, turns, concurrency));
      }
      const durable = median(rates.durable);
      const notDurable = median(rates.notDurable);
      console.log(
        `  ${String(concurrency).padStart(9)}   ${durable.toFixed(0).padStart(11)} /s   ${notDurable.toFixed(0).padStart(9)} /s   durable is ${(notDurable / durable).toFixed(1)}x slower`,
      );
    }
  } finally {
    await fs.rm(dir, { recursive: true, force: true });
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});

/**
 * The claim-check store: trajectory token records and summaries as JSON files under the data
 * directory, so nothing large travels through workflow history.
 *
 * Files: a run's trajectories/<trajectoryId>/turn-NNNNNN.json and summary.json, and its
 * groups/<groupId>.json (see runLayout.ts), each one sealed record (files.ts).
 *
 * Every write is atomic (temp file + rename or link) and durable (fsynced, with its folder, before
 * it returns), and turn records are write-once: a retried activity finds the first attempt's
 * record and returns it, so work is never done twice and a record is never half-written. A read
 * checks the record's length and checksum: a corrupt file throws CorruptFileError (not retryable).
 */
import { promises as fs } from 'node:fs';
import type { GroupSummary, TrajectorySummary, TurnRecord } from '../core/records';
import { createFileOnce, readJson, sealRecord, writeJsonAtomically, type WriteOptions } from './files';
import { isTurnFileName, runLayout, type RunLayout } from './runLayout';

/** Creates `file` unless it exists; returns whichever content is now stored. */
async function createJsonOnce<T>(file: string, value: T, options: WriteOptions): Promise<T> {
  if (await createFileOnce(file, sealRecord(value), options)) return value;
  return (await readJson<T>(file)) as T;
}

/**
 * What workers store and read per trajectory: every use of turn records and summaries goes through
 * this, so another backend (an object store: create-once is a conditional put) can replace the
 * files below without touching the activities.
 */
export interface TrajectoryStorage {
  /** Stores a turn unless one is already stored for (trajectory, turn); returns the stored one. */
  putTurnOnce(runId: string, record: TurnRecord): Promise<TurnRecord>;
  getTurn(runId: string, trajectoryId: string, turn: number): Promise<TurnRecord | undefined>;
  /** Turns 0..turnCount-1 (all stored ones without a count); throws if one is missing. */
  getTurns(runId: string, trajectoryId: string, turnCount?: number): Promise<TurnRecord[]>;
  putTrajectory(summary: TrajectorySummary): Promise<void>;
  getTrajectory(runId: string, trajectoryId: string): Promise<TrajectorySummary | undefined>;
  listTrajectories(runId: string): Promise<string[]>;
  putGroup(summary: GroupSummary): Promise<void>;
  getGroup(runId: string, groupId: string): Promise<GroupSummary | undefined>;
}

/** TrajectoryStorage on a filesystem: the data directory, shared by every host of a deployment. */
export class TrajectoryStore implements TrajectoryStorage {
  /** `options.durable` false only to measure what durability costs (bench/storage.ts). */
  constructor(
    readonly root: string,
    private readonly options: WriteOptions = {},
  ) {}

  private run(runId: string): RunLayout {
    return runLayout(this.root, runId);
  }

  runDir(runId: string): string {
    return this.run(runId).dir;
  }

  /** Stores a turn unless one is already stored for (trajectory, turn); returns the stored one. */
  putTurnOnce(runId: string, record: TurnRecord): Promise<TurnRecord> {
    return createJsonOnce(this.run(runId).turnFile(record.trajectoryId, record.turn), record, this.options);
  }

  getTurn(runId: string, trajectoryId: string, turn: number): Promise<TurnRecord | undefined> {
    return readJson<TurnRecord>(this.run(runId).turnFile(trajectoryId, turn));
  }

  /**
   * Turns 0..turnCount-1; throws if one is missing (the store and the workflow disagree), and
   * CorruptFileError if one is corrupt.
   */
  async getTurns(runId: string, trajectoryId: string, turnCount?: number): Promise<TurnRecord[]> {
    let count = turnCount;
    if (count === undefined) {
      const names = await fs.readdir(this.run(runId).trajectoryDir(trajectoryId)).catch(() => [] as string[]);
      count = names.filter(isTurnFileName).length;
    }
    const turns: TurnRecord[] = [];
    for (let turn = 0; turn < count; turn++) {
      const record = await this.getTurn(runId, trajectoryId, turn);
      if (!record) throw new Error(`trajectory ${trajectoryId} of run ${runId} has no stored turn ${turn}`);
      turns.push(record);
    }
    return turns;
  }

  putTrajectory(summary: TrajectorySummary): Promise<void> {
    return writeJsonAtomically(this.run(summary.runId).trajectorySummaryFile(summary.trajectoryId), summary, this.options);
  }

  getTrajectory(runId: string, trajectoryId: string): Promise<TrajectorySummary | undefined> {
    return readJson(this.run(runId).trajectorySummaryFile(trajectoryId));
  }

  async listTrajectories(runId: string): Promise<string[]> {
    return (await fs.readdir(this.run(runId).trajectoriesDir).catch(() => [] as string[])).sort();
  }

  putGroup(summary: GroupSummary): Promise<void> {
    return writeJsonAtomically(this.run(summary.runId).groupFile(summary.groupId), summary, this.options);
  }

  getGroup(runId: string, groupId: string): Promise<GroupSummary | undefined> {
    return readJson(this.run(runId).groupFile(groupId));
  }
}

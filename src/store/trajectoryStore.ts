/**
 * The claim-check store: trajectory token records and summaries as JSON files under the data
 * directory, so nothing large travels through workflow history.
 *
 * Layout: <root>/runs/<runId>/trajectories/<trajectoryId>/turn-000003.json
 *                            /trajectories/<trajectoryId>/summary.json
 *                            /groups/<groupId>.json
 *
 * Every write is atomic (temp file + rename or link), and turn records are write-once: a retried
 * activity finds the first attempt's record and returns it, so work is never done twice and a
 * record is never half-written.
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import type { GroupSummary, TrajectorySummary, TurnRecord } from '../core/records';
import { readJson, tempBeside, writeJsonAtomically } from './files';

const SAFE_ID = /^[A-Za-z0-9_.-]+$/;

function checkId(kind: string, id: string): string {
  if (!SAFE_ID.test(id)) throw new Error(`${kind} id ${JSON.stringify(id)} may only hold letters, digits, _ . -`);
  return id;
}

/** Creates `file` atomically unless it exists; returns whichever content is now stored. */
async function createJsonOnce<T>(file: string, value: T): Promise<T> {
  const temp = await tempBeside(file);
  await fs.writeFile(temp, JSON.stringify(value));
  try {
    await fs.link(temp, file);
    return value;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    return (await readJson<T>(file)) as T;
  } finally {
    await fs.rm(temp, { force: true });
  }
}

export class TrajectoryStore {
  constructor(readonly root: string) {}

  runDir(runId: string): string {
    return path.join(this.root, 'runs', checkId('run', runId));
  }

  private trajectoryDir(runId: string, trajectoryId: string): string {
    return path.join(this.runDir(runId), 'trajectories', checkId('trajectory', trajectoryId));
  }

  private turnFile(runId: string, trajectoryId: string, turn: number): string {
    return path.join(this.trajectoryDir(runId, trajectoryId), `turn-${String(turn).padStart(6, '0')}.json`);
  }

  /** Stores a turn unless one is already stored for (trajectory, turn); returns the stored one. */
  putTurnOnce(runId: string, record: TurnRecord): Promise<TurnRecord> {
    return createJsonOnce(this.turnFile(runId, record.trajectoryId, record.turn), record);
  }

  getTurn(runId: string, trajectoryId: string, turn: number): Promise<TurnRecord | undefined> {
    return readJson<TurnRecord>(this.turnFile(runId, trajectoryId, turn));
  }

  /** Turns 0..turnCount-1; throws if one is missing (the store and the workflow disagree). */
  async getTurns(runId: string, trajectoryId: string, turnCount?: number): Promise<TurnRecord[]> {
    let count = turnCount;
    if (count === undefined) {
      const names = await fs.readdir(this.trajectoryDir(runId, trajectoryId)).catch(() => [] as string[]);
      count = names.filter((name) => /^turn-\d+\.json$/.test(name)).length;
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
    return writeJsonAtomically(path.join(this.trajectoryDir(summary.runId, summary.trajectoryId), 'summary.json'), summary);
  }

  getTrajectory(runId: string, trajectoryId: string): Promise<TrajectorySummary | undefined> {
    return readJson(path.join(this.trajectoryDir(runId, trajectoryId), 'summary.json'));
  }

  async listTrajectories(runId: string): Promise<string[]> {
    const dir = path.join(this.runDir(runId), 'trajectories');
    return (await fs.readdir(dir).catch(() => [] as string[])).sort();
  }

  putGroup(summary: GroupSummary): Promise<void> {
    return writeJsonAtomically(path.join(this.runDir(summary.runId), 'groups', `${checkId('group', summary.groupId)}.json`), summary);
  }

  getGroup(runId: string, groupId: string): Promise<GroupSummary | undefined> {
    return readJson(path.join(this.runDir(runId), 'groups', `${checkId('group', groupId)}.json`));
  }
}

/**
 * A run's episodes by the policy version they started with: how many, how many called a tool and
 * got its result (a `tool` message that is no error), how many solved the task. Read from the
 * run's store, so it works on a finished or a running run (bench:tool-use, bench:agents).
 */
import { TrajectoryStore } from '../src/store/trajectoryStore';

export interface VersionRow {
  episodes: number;
  toolResults: number;
  solved: number;
}

/** Each policy version's row, in version order. */
export async function toolUseByVersion(dataDir: string, runId: string): Promise<Map<number, VersionRow>> {
  const store = new TrajectoryStore(dataDir);
  const rows = new Map<number, VersionRow>();
  for (const trajectoryId of await store.listTrajectories(runId)) {
    const summary = await store.getTrajectory(runId, trajectoryId);
    if (!summary || summary.turns === 0) continue;
    const turns = await store.getTurns(runId, trajectoryId, summary.turns);
    const usedTool = turns.some((turn) => turn.messages.some((message) => message.role === 'tool' && !message.content.startsWith('error')));
    const row = rows.get(summary.minPolicyVersion) ?? { episodes: 0, toolResults: 0, solved: 0 };
    row.episodes++;
    if (usedTool) row.toolResults++;
    if (summary.envReturn > 0) row.solved++;
    rows.set(summary.minPolicyVersion, row);
  }
  return new Map([...rows].sort(([a], [b]) => a - b));
}

/** `part` of `whole` as a percentage, right-aligned in 8 characters. */
export function percentCell(part: number, whole: number): string {
  return `${((100 * part) / whole).toFixed(1)}%`.padStart(8);
}

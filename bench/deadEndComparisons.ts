/**
 * What per-turn credit can learn the dead ends from, in a random-map run: the turns where one of
 * down and right leads onto a dead end, in groups the mixed-outcomes filter trains, and the cells
 * where one group played both moves (the move onto the dead end against the other, on the same
 * cell of the same map: the only comparison that tells them apart).
 */
import { hasMixedOutcomes } from '../src/core/groupStats';
import type { GroupSummary } from '../src/core/records';

/** A turn where one of down and right leads onto a dead end and the other does not. */
export interface DeadEndTurn {
  /** The first version of the band the turn's episode is counted in. */
  band: number;
  groupId: string;
  /** The observed grid, player included: the same cell of the same map. */
  cell: string;
  move: string;
}

/** Whether each episode of a group solved its map (`solvedTask`), as the group filter reads it. */
export type GroupOutcome = Pick<GroupSummary, 'solved'>;

/** Per band: such turns in mixed-outcome groups, and the (group, cell) pairs where both moves were played. */
export interface Comparisons {
  inMixedGroups: number;
  comparedCells: number;
}

/** Counts per band; a (group, cell) pair counts once, in the band of its first turn. */
export function countComparisons(turns: readonly DeadEndTurn[], outcomes: ReadonlyMap<string, GroupOutcome>): Map<number, Comparisons> {
  const movesOnCell = new Map<string, { band: number; moves: Set<string> }>();
  const byBand = new Map<number, Comparisons>();
  for (const turn of turns) {
    const outcome = outcomes.get(turn.groupId);
    if (!outcome || !hasMixedOutcomes(outcome)) continue;
    const band = byBand.get(turn.band) ?? { inMixedGroups: 0, comparedCells: 0 };
    band.inMixedGroups++;
    byBand.set(turn.band, band);
    const key = `${turn.groupId}\n${turn.cell}`;
    const seen = movesOnCell.get(key) ?? { band: turn.band, moves: new Set<string>() };
    seen.moves.add(turn.move);
    movesOnCell.set(key, seen);
  }
  for (const { band, moves } of movesOnCell.values()) {
    if (moves.has('down') && moves.has('right')) byBand.get(band)!.comparedCells++;
  }
  return byBand;
}

/**
 * How the random-map benches read a FrozenLake grid (rows of 'S', 'F', 'H', 'G'; G at the bottom
 * right): which cells a move can land on, and which are dead ends for a policy heading for G.
 */
import { MOVES } from '../src/envs/frozenlake';

export type Cell = readonly [number, number];
export type Step = readonly [number, number];

/** Towards G. */
export const [, DOWN, RIGHT] = MOVES;

/** The cell a move from `cell` lands on (it may be off the map). */
export function beyond([row, col]: Cell, [dr, dc]: Step): Cell {
  return [row + dr, col + dc];
}

/** Whether `cell` is on the map and not a hole. Any other mark (a player drawn on it) counts as open. */
export function isOpen(grid: readonly string[], [row, col]: Cell): boolean {
  const mark = grid[row]?.[col];
  return mark !== undefined && mark !== 'H';
}

/** The open ones of down and right from `cell`, in that order. */
export function openTowardsG(grid: readonly string[], cell: Cell): Step[] {
  return [DOWN, RIGHT].filter((move) => isOpen(grid, beyond(cell, move)));
}

/** Whether `cell` is not G and neither down nor right from it is open: a policy that never steps back fails there. */
export function isDeadEnd(grid: readonly string[], cell: Cell): boolean {
  return grid[cell[0]][cell[1]] !== 'G' && openTowardsG(grid, cell).length === 0;
}

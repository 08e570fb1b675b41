/**
 * FrozenLake: walk from S to G across frozen cells (F) without falling into a hole (H).
 *
 * Gymnasium's rules: actions 0=left, 1=down, 2=right, 3=up; bumping into the edge leaves you in
 * place; on slippery ice you move in the intended direction or either perpendicular one with
 * probability 1/3 each; reward 1 at G and 0 otherwise; the episode ends at G, in a hole, or after
 * `maxSteps` steps (truncation).
 *
 * Every episode is a pure function of the options and the actions taken (`reset()` restarts the
 * slip stream from `seed`), so durable recovery can replay recorded actions on a fresh environment
 * and reach the same states. The module is pure too, so the agent may import its constants inside
 * the workflow sandbox.
 */
import { isHeldOut } from '../core/heldOut';
import { createRng, hashString, type Rng } from '../core/random';
import type { Environment, StepResult } from './environment';

/** Action names, indexed by action id. */
export const ACTION_NAMES = ['left', 'down', 'right', 'up'] as const;

/** Row and column change of each action, indexed by action id. */
export const MOVES: readonly (readonly [number, number])[] = [
  [0, -1],
  [1, 0],
  [0, 1],
  [-1, 0],
];

export const CLASSIC_MAPS: Readonly<Record<4 | 8, readonly string[]>> = {
  4: ['SFFF', 'FHFH', 'FFFH', 'HFFG'],
  8: ['SFFFFFFF', 'FFFFFFFF', 'FFFHFFFF', 'FFFFFHFF', 'FFFHFFFF', 'FHHFFFHF', 'FHFFHFHF', 'FFFHFFFG'],
};

/** Chance that a cell of a random map is frozen rather than a hole. */
export const DEFAULT_P_FROZEN = 0.8;

/** Random maps with very few frozen cells are rarely solvable: give up instead of looping forever. */
const MAX_MAP_ATTEMPTS = 10_000;

export interface FrozenLakeOptions {
  size: 4 | 8;
  /** `random` generates a solvable map from `mapSeed`; `classic` ignores `mapSeed`. */
  map: 'classic' | 'random';
  mapSeed: number;
  /** Probability that a random map's cell is frozen (default DEFAULT_P_FROZEN). */
  pFrozen?: number;
  /** Random maps: which side of the held-out split to draw from (default: any map). */
  heldOut?: HeldOutSplit;
  slippery: boolean;
  /** Seeds the slips, so the same options and actions always give the same episode. */
  seed: number;
  maxSteps: number;
  /**
   * Penalty (`StepResult.penalty`) on the move into a hole (default 0: none, as in Gymnasium). The
   * return stays Gymnasium's, 1 at G and 0 otherwise, so a hole and running out of steps still
   * fail alike; the penalty is charged to the fatal move alone. Without it the only cost of that
   * move is the goal not reached, a signal too faint to teach a small model to read the map.
   */
  holePenalty?: number;
  /**
   * Penalty (`StepResult.penalty`) on every move that brings the player no closer to G: this much
   * per step of distance (`progressDistance`) it fails to gain, so 0 for a move towards G, once
   * this for a move into the edge (nothing moves) and twice for a move away (default 0: none). It
   * is potential-based shaping (Ng et al. 1999, potential minus the distance to G) written as a
   * cost: every turn pays this less the distance it gained, so standing still, stepping back and
   * forth and any detour pay for each turn they take, and a policy cannot avoid the holes by not
   * moving.
   */
  progressPenalty?: number;
  /**
   * The distance to G that `progressPenalty` reads (default `manhattan`). `path`: the fewest moves
   * over the ice (the geodesic distance, as navigation tasks reward its change), so a move onto a
   * dead end, which the player must walk back out of, takes it further from G and pays for it on
   * its own turn, where the Manhattan distance counts it as progress. A hole's distance is one more
   * than its nearest frozen neighbour's, so the move into it is charged as any other step.
   */
  progressDistance?: ProgressDistance;
  /**
   * Share of episodes that start on a cell drawn from the map instead of on S (default 0: all on
   * S): Monte-Carlo exploring starts. The cell is drawn from `seed`, uniformly among the frozen
   * cells G can be reached from, so the episodes of one seed (a group) share it and compare their
   * moves from there. Cells a policy seldom walks onto from S (a dead end it must step back out
   * of) are then started on as often as any other, and their moves get compared.
   */
  exploringStarts?: number;
}

export const PROGRESS_DISTANCES = ['manhattan', 'path'] as const;
export type ProgressDistance = (typeof PROGRESS_DISTANCES)[number];

export interface FrozenLakeObservation {
  /** Map rows, top first, without the player. */
  grid: string[];
  row: number;
  col: number;
  size: number;
  /** Steps taken so far in this episode. */
  steps: number;
}

export type FrozenLakeOutcome = 'goal' | 'hole' | 'truncated' | 'running';

/** A type alias rather than an interface, so it satisfies `StepResult`'s `Record<string, unknown>`. */
export type FrozenLakeInfo = {
  position: { row: number; col: number };
  outcome: FrozenLakeOutcome;
  truncated: boolean;
};

export type FrozenLakeStep = StepResult<FrozenLakeObservation> & { info: FrozenLakeInfo };

/** Random map layouts whose hash falls below `share` are kept for evaluation ("heldout"). */
export interface HeldOutSplit {
  share: number;
  pool: 'train' | 'heldout';
}

/** Whether a layout belongs to the held-out share: a fixed function of the layout alone. */
export function isHeldOutMap(grid: readonly string[], share: number): boolean {
  return isHeldOut(grid.join('\n'), share);
}

function inPool(grid: readonly string[], split: HeldOutSplit | undefined): boolean {
  return split === undefined || isHeldOutMap(grid, split.share) === (split.pool === 'heldout');
}

/**
 * A `size`x`size` map with S top-left and G bottom-right, every other cell frozen with probability
 * `pFrozen`. Maps without a path from S to G, or outside the asked side of the held-out split,
 * are redrawn from the same stream, so a seed always gives the same map.
 */
export function generateMap(size: number, seed: number, pFrozen = DEFAULT_P_FROZEN, heldOut?: HeldOutSplit): string[] {
  if (!Number.isInteger(size) || size < 2) throw new Error(`map size must be an integer >= 2, got ${size}`);
  if (!(pFrozen > 0 && pFrozen <= 1)) throw new Error(`pFrozen must be in (0, 1], got ${pFrozen}`);
  const rng = createRng(seed);
  const cell = (row: number, col: number): string => {
    if (row === 0 && col === 0) return 'S';
    if (row === size - 1 && col === size - 1) return 'G';
    return rng() < pFrozen ? 'F' : 'H';
  };
  for (let attempt = 0; attempt < MAX_MAP_ATTEMPTS; attempt++) {
    const grid = Array.from({ length: size }, (_, row) => Array.from({ length: size }, (_, col) => cell(row, col)).join(''));
    if (isSolvable(grid) && inPool(grid, heldOut)) return grid;
  }
  const pool = heldOut ? ` in the ${heldOut.pool} pool (held-out share ${heldOut.share})` : '';
  throw new Error(`no solvable ${size}x${size} map${pool} after ${MAX_MAP_ATTEMPTS} attempts (pFrozen ${pFrozen})`);
}

/** Whether some path of non-hole cells leads from S to G. */
export function isSolvable(grid: readonly string[]): boolean {
  const start = findCell(grid, 'S');
  return start !== undefined && Number.isFinite(pathDistances(grid)[start[0]][start[1]]);
}

/**
 * The fewest moves from each cell to G over non-hole cells (breadth-first search from G), by row
 * and column; Infinity where G cannot be reached (everywhere, if the grid has no G). A hole is
 * given one more than its nearest frozen neighbour but never walked through.
 */
export function pathDistances(grid: readonly string[]): number[][] {
  const distances = grid.map((line) => Array.from(line, () => Infinity));
  const goal = findCell(grid, 'G');
  if (!goal) return distances;
  distances[goal[0]][goal[1]] = 0;
  const queue = [goal];
  for (let i = 0; i < queue.length; i++) {
    const [row, col] = queue[i];
    for (const [dr, dc] of MOVES) {
      const [nextRow, nextCol] = [row + dr, col + dc];
      const cell = grid[nextRow]?.[nextCol];
      if (cell === undefined || distances[nextRow][nextCol] !== Infinity) continue;
      distances[nextRow][nextCol] = distances[row][col] + 1;
      if (cell !== 'H') queue.push([nextRow, nextCol]);
    }
  }
  return distances;
}

function findCell(grid: readonly string[], cell: string): [number, number] | undefined {
  const row = grid.findIndex((line) => line.includes(cell));
  return row < 0 ? undefined : [row, grid[row].indexOf(cell)];
}

/**
 * The start of an episode drawn for exploring starts (see `FrozenLakeOptions.exploringStarts`), or
 * undefined for S. Its own stream of `seed`, so the slips stay those of an episode started on S.
 */
function exploringStart(grid: readonly string[], options: FrozenLakeOptions): [number, number] | undefined {
  const share = options.exploringStarts ?? 0;
  if (share === 0) return undefined;
  const rng = createRng(hashString(`exploring start ${options.seed}`));
  if (rng() >= share) return undefined;
  const distances = pathDistances(grid);
  const cells: [number, number][] = [];
  grid.forEach((line, row) => {
    for (let col = 0; col < line.length; col++) if (line[col] !== 'H' && line[col] !== 'G' && Number.isFinite(distances[row][col])) cells.push([row, col]);
  });
  return cells[Math.floor(rng() * cells.length)];
}

/** Slipping turns the intended direction by 0, +90 or -90 degrees, each with probability 1/3. */
const SLIP_TURNS = [0, 1, 3] as const;

/** Where a move meant in direction `action` goes on slippery ice, each of `slipDirections` alike. */
function slipDirections(action: number): number[] {
  return SLIP_TURNS.map((turn) => (action + turn) % 4);
}

function slip(action: number, rng: Rng): number {
  return slipDirections(action)[Math.floor(rng() * SLIP_TURNS.length)];
}

function validateOptions(options: FrozenLakeOptions): void {
  const { size, map, mapSeed, seed, maxSteps } = options;
  if (size !== 4 && size !== 8) throw new Error(`FrozenLake size must be 4 or 8, got ${size}`);
  if (map !== 'classic' && map !== 'random') throw new Error(`FrozenLake map must be classic or random, got ${map}`);
  if (!Number.isSafeInteger(mapSeed) || !Number.isSafeInteger(seed)) {
    throw new Error(`FrozenLake seeds must be integers, got seed ${seed}, mapSeed ${mapSeed}`);
  }
  if (!Number.isSafeInteger(maxSteps) || maxSteps < 1) {
    throw new Error(`FrozenLake maxSteps must be a positive integer, got ${maxSteps}`);
  }
  for (const key of ['holePenalty', 'progressPenalty'] as const) {
    const value = options[key] ?? 0;
    if (!(Number.isFinite(value) && value >= 0)) throw new Error(`FrozenLake ${key} must be a finite number >= 0, got ${value}`);
  }
  const { exploringStarts = 0 } = options;
  if (!(exploringStarts >= 0 && exploringStarts <= 1)) throw new Error(`FrozenLake exploringStarts must be a share in [0, 1], got ${exploringStarts}`);
  const { progressDistance = 'manhattan' } = options;
  if (!PROGRESS_DISTANCES.includes(progressDistance)) {
    throw new Error(`FrozenLake progressDistance must be one of ${PROGRESS_DISTANCES.join(', ')}, got ${String(progressDistance)}`);
  }
}

export class FrozenLake implements Environment<FrozenLakeObservation, number> {
  readonly grid: readonly string[];
  private readonly start: readonly [number, number];
  private readonly goal: readonly [number, number];
  /** By row and column; only with `progressDistance: path`. */
  private readonly pathDistance?: readonly (readonly number[])[];
  /** Set by `reset()`, which `step()` requires first. */
  private rng!: Rng;
  private row = 0;
  private col = 0;
  private steps = 0;
  /** False before the first `reset()` and once an episode is done. */
  private running = false;

  constructor(readonly options: FrozenLakeOptions) {
    validateOptions(options);
    this.grid = options.map === 'classic' ? CLASSIC_MAPS[options.size] : generateMap(options.size, options.mapSeed, options.pFrozen, options.heldOut);
    this.goal = findCell(this.grid, 'G')!;
    if (options.progressDistance === 'path') this.pathDistance = pathDistances(this.grid);
    this.start = exploringStart(this.grid, options) ?? findCell(this.grid, 'S')!;
  }

  reset(): FrozenLakeObservation {
    this.rng = createRng(this.options.seed);
    [this.row, this.col] = this.start;
    this.steps = 0;
    this.running = true;
    return this.observe();
  }

  step(action: number): FrozenLakeStep {
    if (!(Number.isInteger(action) && action >= 0 && action < MOVES.length)) {
      throw new Error(`FrozenLake: invalid action ${String(action)} (expected 0=left, 1=down, 2=right, 3=up)`);
    }
    if (!this.running) throw new Error('FrozenLake: no episode running; call reset() first');

    const actionPenalties = this.charges() ? MOVES.map((_, intended) => this.expectedPenalty(intended)) : undefined;
    const [row, col] = this.moved(this.options.slippery ? slip(action, this.rng) : action);
    const penalty = this.penaltyOfMove(row, col);
    [this.row, this.col] = [row, col];
    this.steps++;

    // Reaching G or H on the last allowed step counts as that outcome, not as a truncation.
    const cell = this.grid[this.row][this.col];
    const outcome: FrozenLakeOutcome = cell === 'G' ? 'goal' : cell === 'H' ? 'hole' : this.steps >= this.options.maxSteps ? 'truncated' : 'running';
    this.running = outcome === 'running';
    return {
      observation: this.observe(),
      reward: outcome === 'goal' ? 1 : 0,
      done: !this.running,
      info: { position: { row: this.row, col: this.col }, outcome, truncated: outcome === 'truncated' },
      ...(penalty > 0 ? { penalty } : {}),
      ...(actionPenalties ? { actionPenalties } : {}),
    };
  }

  /** Whether any move is charged at all (a penalty is set). */
  private charges(): boolean {
    return (this.options.holePenalty ?? 0) > 0 || (this.options.progressPenalty ?? 0) > 0;
  }

  /** Where a move in `direction` from the current cell lands: the same cell at the edge. */
  private moved(direction: number): [number, number] {
    const [dr, dc] = MOVES[direction];
    const [row, col] = [this.row + dr, this.col + dc];
    const { size } = this.options;
    return row >= 0 && row < size && col >= 0 && col < size ? [row, col] : [this.row, this.col];
  }

  /** The penalty of moving from the current cell to (row, col): the hole's, and the distance to G not gained. */
  private penaltyOfMove(row: number, col: number): number {
    const { holePenalty = 0, progressPenalty = 0 } = this.options;
    const gained = this.distanceToGoal(this.row, this.col) - this.distanceToGoal(row, col);
    return (this.grid[row][col] === 'H' ? holePenalty : 0) + progressPenalty * (1 - gained);
  }

  /** What `intended` is charged from the current cell: on slippery ice, the mean over where it may slip. */
  private expectedPenalty(intended: number): number {
    const directions = this.options.slippery ? slipDirections(intended) : [intended];
    return directions.reduce((sum, direction) => sum + this.penaltyOfMove(...this.moved(direction)), 0) / directions.length;
  }

  private distanceToGoal(row: number, col: number): number {
    if (this.pathDistance) return this.pathDistance[row][col];
    return Math.abs(this.goal[0] - row) + Math.abs(this.goal[1] - col);
  }

  /** Nothing to release: the environment holds no resources. */
  close(): void {}

  private observe(): FrozenLakeObservation {
    return { grid: [...this.grid], row: this.row, col: this.col, size: this.options.size, steps: this.steps };
  }
}

/**
 * What a random-map run's held-out evaluation can show for a policy that reads only the cells next
 * to the player: the share of the evaluation's maps (the very maps `eval` plays for each run seed)
 * that such policies solve, beside what the shortest path solves.
 *
 * A policy that has learned to read the holes next to it, and to head for G (always at the
 * bottom right), moves down or right onto ice. Where down and right are both a hole or the edge,
 * it has to step back (left or up), which nothing in its first moves ever rewarded; these
 * policies never do, so they fail there. Their scores are the level a run's held-out success
 * reaches once it reads the holes, before it learns to plan around them, and they differ from seed
 * to seed because each seed evaluates on its own maps (`eval.episodes` of them). One more policy
 * reads one cell further: it does not move onto a cell that is such a dead end while the other
 * move is open and is not one.
 * The last one reads no further than the one-step readers but steps back: where down and right
 * are both blocked it moves left or up (whichever is open, at even odds), and since it keeps
 * choosing between down and right at even odds, it may take the other way the next time.
 *
 *   npm run build && node dist/bench/heldOutCeiling.js [--config FILE] [--seeds 1,2,3]
 */
import { parseArgs } from 'node:util';
import { FrozenLake, MOVES, pathDistances } from '../src/envs/frozenlake';
import { createEnvironment } from '../src/plugins/registry';
import { evaluationSeeds } from '../src/rl/evaluate';
import { loadRunConfig } from '../src/runConfig';
import { beyond, isDeadEnd, isOpen, openTowardsG, type Cell, type Step } from './frozenlakeCells';

const DEFAULT_CONFIG = 'config/examples/frozenlake-random-train.yaml';

const [LEFT, , , UP] = MOVES;

/**
 * Probability that a policy reaches G within `turns` moves from S, choosing among the open ones of
 * down and right (in that order) with the probabilities `choose` gives them. Neither open: it
 * fails there, or with `stepBack` it moves to an open one of left and up at even odds (none open:
 * it fails). With `lookAhead`, the moves onto a dead end are left out where another is not. A
 * policy that steps back may come back to a cell, so each (cell, moves left) is computed once.
 */
function successProbability(
  grid: readonly string[],
  turns: number,
  choose: (openMoves: Step[]) => number[],
  { lookAhead = false, stepBack = false } = {},
): number {
  const memo = new Map<string, number>();
  const from = (cell: Cell, left: number): number => {
    if (grid[cell[0]][cell[1]] === 'G') return 1;
    if (left === 0) return 0;
    const key = `${cell[0]},${cell[1]},${left}`;
    const known = memo.get(key);
    if (known !== undefined) return known;
    let moves = openTowardsG(grid, cell);
    let odds: number[];
    if (moves.length === 0) {
      moves = stepBack ? [LEFT, UP].filter((move) => isOpen(grid, beyond(cell, move))) : [];
      odds = evenOdds(moves);
    } else {
      if (lookAhead) {
        const offDeadEnds = moves.filter((move) => !isDeadEnd(grid, beyond(cell, move)));
        if (offDeadEnds.length > 0) moves = offDeadEnds;
      }
      odds = choose(moves);
    }
    const p = odds.reduce((sum, q, i) => sum + (q > 0 ? q * from(beyond(cell, moves[i]), left - 1) : 0), 0);
    memo.set(key, p);
    return p;
  };
  return from([0, 0], turns);
}

const evenOdds = (moves: Step[]): number[] => moves.map(() => 1 / moves.length);

const POLICIES: { name: string; solve: (grid: readonly string[], turns: number) => number }[] = [
  // S is at the top left: its fewest moves over the ice to G.
  { name: 'shortest path', solve: (grid, turns) => Number(pathDistances(grid)[0][0] <= turns) },
  { name: 'down, else right', solve: (grid, turns) => successProbability(grid, turns, (moves) => moves.map((_, i) => Number(i === 0))) },
  { name: 'right, else down', solve: (grid, turns) => successProbability(grid, turns, (moves) => moves.map((_, i) => Number(i === moves.length - 1))) },
  { name: 'down or right at even odds', solve: (grid, turns) => successProbability(grid, turns, evenOdds) },
  { name: 'even odds, off dead ends', solve: (grid, turns) => successProbability(grid, turns, evenOdds, { lookAhead: true }) },
  { name: 'even odds, stepping back', solve: (grid, turns) => successProbability(grid, turns, evenOdds, { stepBack: true }) },
];

function main(): void {
  const { values } = parseArgs({ options: { config: { type: 'string', default: DEFAULT_CONFIG }, seeds: { type: 'string', default: '1,2,3' } } });
  const seeds = values.seeds.split(',').map(Number);
  const bad = seeds.find((seed) => !Number.isSafeInteger(seed));
  if (bad !== undefined) throw new Error(`--seeds: expected integers separated by commas, got ${JSON.stringify(values.seeds)}`);
  const config = loadRunConfig(values.config);
  if (config.env.name !== 'frozenlake' || config.env.map !== 'random' || config.env.slippery) {
    throw new Error(`${values.config}: env must be frozenlake with map: random and slippery: false`);
  }
  const turns = Math.min(Number(config.env.maxSteps), config.agent.maxTurns);
  console.log(
    `held-out evaluation maps of ${values.config} (${config.eval.episodes} a seed, as eval plays them, ${turns} moves at most): ` +
      'share solved by the shortest path, and by policies that read only the neighbouring cells (the fifth: and the cells beyond) and never move left or up ' +
      '(the last: but where down and right are both blocked)',
  );
  const width = Math.max(...POLICIES.map((policy) => policy.name.length)) + 2;
  console.log(`seed  ${POLICIES.map((policy) => policy.name.padStart(width)).join('')}`);
  const totals = POLICIES.map(() => 0);
  for (const seed of seeds) {
    const grids = evaluationSeeds(seed, config.eval.episodes).map((envSeed) => {
      const env = createEnvironment(config.env, envSeed, 'eval');
      if (!(env instanceof FrozenLake)) throw new Error(`env ${config.env.name} is not the built-in FrozenLake`);
      return env.grid;
    });
    const shares = POLICIES.map((policy) => grids.reduce((sum, grid) => sum + policy.solve(grid, turns), 0) / grids.length);
    shares.forEach((share, i) => (totals[i] += share));
    console.log(`${String(seed).padEnd(4)}  ${shares.map((share) => `${(100 * share).toFixed(0)}%`.padStart(width)).join('')}`);
  }
  console.log(`mean  ${totals.map((total) => `${((100 * total) / seeds.length).toFixed(0)}%`.padStart(width)).join('')}`);
}

try {
  main();
} catch (error) {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
}

/**
 * A FrozenLake run read back from its trajectory store: per band of policy versions, how the
 * episodes ended, how often a move went into a hole shown next to the player (and, there, into the
 * edge), and the share of answers the agent could not read as a move. It tells a policy that reads the map (moves into a
 * visible hole near 0) from one that plays a fixed mix of moves (as often into a hole as onto ice),
 * and shows the answer format wearing away. It also counts the turns where down and right (towards
 * G) are both a hole or the edge, and how often the move there was left or up: a policy that only
 * ever moves down or right walks into the hole there. And one cell further: the turns where one of
 * down and right leads onto such a dead end and the other onto ice that is not one, and how often
 * the move there went onto the dead end (a policy that reads only the cells next to it: about half)
 * and how often it went right (a policy that picks by position rather than by the dead end: near 0 or 1).
 * Of those turns it also counts the ones in groups with mixed outcomes (the only groups the
 * mixed-outcomes filter trains) and, there, the cells on which the group played both down and right:
 * the comparisons per-turn credit can learn the dead end from.
 *
 *   npm run build && node dist/bench/frozenlakeMoves.js <runId> [dataDir=.trajflow] [band=20]
 */
import path from 'node:path';
import { parseAction } from '../src/agents/frozenlakeAgent';
import { ACTION_NAMES } from '../src/envs/frozenlake';
import { TrajectoryStore } from '../src/store/trajectoryStore';
import { solvedTask } from '../src/core/groupStats';
import type { TrajectorySummary, TurnRecord } from '../src/core/records';
import { beyond, DOWN, isDeadEnd, isOpen, RIGHT, type Cell, type Step } from './frozenlakeCells';
import { countComparisons, type DeadEndTurn, type GroupOutcome } from './deadEndComparisons';

interface Band {
  episodes: number;
  goal: number;
  hole: number;
  /** Answers, and those the agent could not read as a move. */
  turns: number;
  unreadable: number;
  /**
   * Turns whose observation showed a hole next to the player, moves into one of them, and moves
   * into the edge there (a policy can keep out of the holes by never leaving its cell).
   */
  nextToHole: number;
  intoHole: number;
  intoEdge: number;
  /** Turns where neither down nor right leads onto the map's ice, and moves left or up there. */
  boxedIn: number;
  backOut: number;
  /**
   * Turns where down leads onto a dead end and right onto ice that is not one (or the reverse),
   * moves onto the dead end there, and moves right there (near 0 or 1: the choice between down and
   * right is made without looking at which one is the dead end).
   */
  deadEndAhead: number;
  ontoDeadEnd: number;
  rightAtDeadEndAhead: number;
}

/**
 * The cell beyond each move, from the observation's last line as the FrozenLake agent's
 * `renderObservation` writes it: "left F, down H, right F, up #".
 */
function neighbours(turn: TurnRecord): Map<string, string> {
  const observation = turn.messages.at(-1)?.content ?? '';
  const line = observation.split('\n').at(-1) ?? '';
  return new Map(line.split(', ').map((entry) => entry.split(' ') as [string, string]));
}

/** The observation's grid lines and the player's cell on them ('P' marks it), or undefined if it shows no grid. */
function playerOnGrid(turn: TurnRecord): { grid: string[]; player: Cell } | undefined {
  const observation = turn.messages.at(-1)?.content ?? '';
  const grid = observation.split('\n').slice(0, -1);
  const row = grid.findIndex((line) => line.includes('P'));
  return row < 0 ? undefined : { grid, player: [row, grid[row].indexOf('P')] };
}

/** Whether `move` from the player lands on a dead end; undefined for a move that is blocked itself. */
function ontoDeadEnd(grid: readonly string[], player: Cell, move: Step): boolean | undefined {
  const target = beyond(player, move);
  return isOpen(grid, target) ? isDeadEnd(grid, target) : undefined;
}

function count(band: Band, bandStart: number, summary: TrajectorySummary, turns: readonly TurnRecord[], deadEndTurns: DeadEndTurn[]): void {
  band.episodes++;
  band.turns += summary.turns;
  band.unreadable += summary.invalidActions;
  if (summary.envReturn > 0) band.goal++;
  else if (summary.reason.includes('hole')) band.hole++;
  for (const turn of turns) {
    const cells = neighbours(turn);
    const parsed = parseAction(turn.text);
    const seen = playerOnGrid(turn);
    if (!parsed.ok || !seen) continue;
    const { grid, player } = seen;
    const move = ACTION_NAMES[parsed.action];
    const down = ontoDeadEnd(grid, player, DOWN);
    const right = ontoDeadEnd(grid, player, RIGHT);
    if (down !== undefined && right !== undefined && down !== right) {
      band.deadEndAhead++;
      if (move === (down ? 'down' : 'right')) band.ontoDeadEnd++;
      if (move === 'right') band.rightAtDeadEndAhead++;
      deadEndTurns.push({ band: bandStart, groupId: summary.groupId, cell: grid.join('\n'), move });
    }
    if (![...cells.values()].includes('H')) continue;
    band.nextToHole++;
    const landing = cells.get(move);
    if (landing === 'H') band.intoHole++;
    if (landing === '#') band.intoEdge++;
    if (isDeadEnd(grid, player)) {
      band.boxedIn++;
      if (move === 'left' || move === 'up') band.backOut++;
    }
  }
}

async function main(): Promise<void> {
  const [runId, dataDir = '.trajflow', bandArg = '20'] = process.argv.slice(2);
  const width = Number(bandArg);
  if (!runId || !(Number.isInteger(width) && width > 0)) {
    throw new Error('usage: node dist/bench/frozenlakeMoves.js <runId> [dataDir=.trajflow] [band=20]');
  }
  const store = new TrajectoryStore(path.resolve(dataDir));
  const bands = new Map<number, Band>();
  const deadEndTurns: DeadEndTurn[] = [];
  const outcomes = new Map<string, GroupOutcome>();
  for (const trajectoryId of await store.listTrajectories(runId)) {
    const summary = await store.getTrajectory(runId, trajectoryId);
    if (!summary) continue;
    const start = Math.floor(summary.minPolicyVersion / width) * width;
    const band = bands.get(start) ?? {
      episodes: 0,
      goal: 0,
      hole: 0,
      turns: 0,
      unreadable: 0,
      nextToHole: 0,
      intoHole: 0,
      intoEdge: 0,
      boxedIn: 0,
      backOut: 0,
      deadEndAhead: 0,
      ontoDeadEnd: 0,
      rightAtDeadEndAhead: 0,
    };
    bands.set(start, band);
    count(band, start, summary, await store.getTurns(runId, trajectoryId, summary.turns), deadEndTurns);
    const outcome = outcomes.get(summary.groupId) ?? { solved: [] };
    outcome.solved.push(solvedTask(summary));
    outcomes.set(summary.groupId, outcome);
  }
  const comparisons = countComparisons(deadEndTurns, outcomes);
  if (bands.size === 0) throw new Error(`no trajectories of run ${runId} under ${path.resolve(dataDir)}`);
  const percent = (part: number, whole: number) => `${whole ? Math.round((100 * part) / whole) : 0}%`;
  const share = (part: number, whole: number) => (part / Math.max(1, whole)).toFixed(2);
  for (const [start, b] of [...bands].sort(([x], [y]) => x - y)) {
    const other = b.episodes - b.goal - b.hole;
    console.log(
      `v${start}-${start + width - 1}: ${b.episodes} episodes, goal ${percent(b.goal, b.episodes)}, hole ${percent(b.hole, b.episodes)}, ` +
        `out of steps ${percent(other, b.episodes)}; moves into a visible hole ${share(b.intoHole, b.nextToHole)} (of ${b.nextToHole} turns next to one; into the edge there ${share(b.intoEdge, b.nextToHole)}); ` +
        `down and right blocked on ${b.boxedIn} of them, left or up there ${share(b.backOut, b.boxedIn)}; ` +
        `onto a dead end where the other of down and right was not one ${share(b.ontoDeadEnd, b.deadEndAhead)} (of ${b.deadEndAhead} turns, right there ${share(b.rightAtDeadEndAhead, b.deadEndAhead)}; ` +
        `${comparisons.get(start)?.inMixedGroups ?? 0} of them in groups with mixed outcomes, on ${comparisons.get(start)?.comparedCells ?? 0} cells the group played both); ` +
        `unreadable answers ${percent(b.unreadable, b.turns)}`,
    );
  }
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
});

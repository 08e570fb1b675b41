/**
 * The FrozenLake agent's side of the conversation: what the model reads (system prompt, rendered
 * grid) and how its answer becomes an action.
 *
 * Answer format: the move alone (left, down, right or up), so the decision is the answer's first
 * token, read right after the observation; `Action: <move>` anywhere in the text (the move or its
 * first letter, case-insensitive) is accepted too. Texts are kept short because the model is tiny
 * and its context small.
 *
 * Pure and deterministic, and never throws on model output.
 */
import type { Rng } from '../core/random';
import type { ChatMessage } from '../core/tokenizer';
import { ACTION_NAMES, MOVES, type FrozenLakeObservation } from '../envs/frozenlake';
import { ConversationalAgent, type History, type ParsedAction } from './agent';

const ANSWER_FORMAT = 'Move: left, down, right or up.';

/**
 * Terse on purpose: every turn's context starts with it, so its length is paid in every forward
 * and backward pass (without history, about a third of a turn's tokens).
 */
export const FROZENLAKE_SYSTEM_PROMPT = `Walk P to G; H hole, # edge. ${ANSWER_FORMAT}`;

/** Marks the player's cell in the rendered grid. */
const PLAYER = 'P';

/** Completions are short; anything longer is rambling, and is not scanned for an action. */
const MAX_ANSWER_CHARS = 200;

/**
 * `Action: <move>` anywhere in the text, not inside a longer word ("reaction:", "Action: dog").
 * Matching by first letter works because the four move names start with distinct letters.
 */
const TAGGED_MOVE = /(?<![\p{L}\p{N}_])action\s*:\s*(left|down|right|up|[ldru])(?![\p{L}\p{N}_])/iu;
const BARE_MOVE = /^(left|down|right|up)[.!]?$/i;
const ANY_MOVE_WORD = /\b(?:left|down|right|up)\b/gi;

/** Shown for a neighbour beyond the edge of the map. */
const WALL = '#';

/**
 * The grid, one row per line, with the player's cell shown as `P`, then the four neighbouring
 * cells in move order. The neighbours repeat what the grid shows, but at the same place in every
 * prompt of a map size, right before the answer: a small model reads a fixed position far more
 * easily than it finds `P` somewhere in the grid (an untrained one ignores the grid altogether).
 */
export function renderObservation(obs: FrozenLakeObservation): string {
  const grid = obs.grid.map((line, row) => (row === obs.row ? line.slice(0, obs.col) + PLAYER + line.slice(obs.col + 1) : line));
  const neighbours = MOVES.map(([dr, dc], action) => `${ACTION_NAMES[action]} ${obs.grid[obs.row + dr]?.[obs.col + dc] ?? WALL}`);
  return [...grid, neighbours.join(', ')].join('\n');
}

/** The first `Action: <move>` in the text, or a lone move word; otherwise a short reason. */
export function parseAction(text: string): ParsedAction<number> {
  const answer = text.trim();
  if (answer === '') return { ok: false, error: 'empty answer' };
  if (answer.length > MAX_ANSWER_CHARS) return { ok: false, error: 'answer too long' };
  const move = (TAGGED_MOVE.exec(answer) ?? BARE_MOVE.exec(answer))?.[1];
  if (move !== undefined) {
    const action = ACTION_NAMES.findIndex((name) => name[0] === move[0].toLowerCase());
    return { ok: true, action };
  }
  const mentioned = answer.match(ANY_MOVE_WORD)?.length ?? 0;
  return { ok: false, error: mentioned > 1 ? 'ambiguous: several moves' : 'no move' };
}

/** Told to the model instead of an observation when its answer did not parse; the episode goes on. */
export function invalidActionMessage(error: string): string {
  // Short on purpose: it is repeated in the context after every malformed answer.
  return `Invalid answer (${error}). ${ANSWER_FORMAT}`;
}

/** The exact well-formed answer for `action`: the target text of format warm-up examples. */
export function formatExample(action: number): string {
  const name = ACTION_NAMES[action];
  if (name === undefined) throw new Error(`formatExample: invalid action ${action}`);
  return name;
}

/** Moves that keep the player on the map (holes included: they end the episode, legally). */
export function legalMoves({ row, col, size }: FrozenLakeObservation): number[] {
  return MOVES.flatMap(([dr, dc], action) => (row + dr >= 0 && row + dr < size && col + dc >= 0 && col + dc < size ? [action] : []));
}

export class FrozenLakeAgent extends ConversationalAgent<FrozenLakeObservation, number> {
  constructor(history: History = 'full') {
    super(history);
  }

  systemPrompt(): string {
    return FROZENLAKE_SYSTEM_PROMPT;
  }

  observationMessages(observation: FrozenLakeObservation): ChatMessage[] {
    return [{ role: 'user', content: renderObservation(observation) }];
  }

  parseResponse(text: string): ParsedAction<number> {
    return parseAction(text);
  }

  override invalidResponseMessages(error: string): ChatMessage[] {
    return [{ role: 'user', content: invalidActionMessage(error) }];
  }

  /**
   * A uniformly random legal move (one that stays on the map, holes included): it teaches the
   * format and to read where the player stands, never where the goal or the holes are.
   */
  formatExample(observation: FrozenLakeObservation, rng: Rng): string {
    const legal = legalMoves(observation);
    return formatExample(legal[Math.floor(rng() * legal.length)]);
  }

  answerFor(action: number): string {
    return formatExample(action);
  }
}

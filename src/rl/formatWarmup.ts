/**
 * Format warm-up: a short supervised phase that teaches an untrained policy to answer in the
 * agent's format (`Action: <move>` then <|end|>) so that RL starts from parseable answers.
 *
 * It teaches the format only, never solutions: every example shows a random map with the player
 * on a random cell, and answers with a uniformly random move. Conversations run 1 to MAX_TURNS
 * turns (each turn an independent random position) so later-turn contexts are covered too, and
 * some turns follow a malformed answer and the agent's "invalid answer" reply, so the policy also
 * learns to get back to the format. The loss mask is 1 on the well-formed answers only.
 */
import { FROZENLAKE_SYSTEM_PROMPT, formatExample, invalidActionMessage, parseAction, renderObservation } from '../agents/frozenlakeAgent';
import { createRng, type Rng } from '../core/random';
import { encode, renderContinuation, renderConversationStart, SPECIAL_TOKENS, type ChatMessage } from '../core/tokenizer';
import { ACTION_NAMES, generateMap, type FrozenLakeObservation } from '../envs/frozenlake';
import type { MaskedSequence } from './loss';
import type { PolicyTrainer } from './trainer';

const MAX_TURNS = 6;
/** No new turn starts past this length, so conversations fit the default context (1024). */
const MAX_TOKENS = 700;
/** Share of turns that follow a malformed answer instead of a move. */
const RECOVERY_SHARE = 0.1;
/** Malformed answers of the kinds an untrained or drifting policy writes. */
const MALFORMED = ['Act', 'Action: le', 'Action:', 'down down', '', 'Action: forward'];
const MAP_SIZES = [4, 8] as const;

/** `count` warm-up conversations, a pure function of (count, seed). */
export function formatWarmupSamples(count: number, seed: number): MaskedSequence[] {
  if (!Number.isSafeInteger(count) || count < 0) throw new Error(`count must be a non-negative integer, got ${count}`);
  const rng = createRng(seed);
  return Array.from({ length: count }, () => conversation(rng));
}

function conversation(rng: Rng): MaskedSequence {
  const pick = (n: number) => Math.floor(rng() * n);
  const size = MAP_SIZES[pick(MAP_SIZES.length)];
  const grid = generateMap(size, pick(2 ** 32));
  const observe = (): ChatMessage => ({ role: 'user', content: renderObservation(randomPosition(grid, pick)) });
  const ids: number[] = [];
  const lossMask: number[] = [];
  const append = (tokens: readonly number[], trained: 0 | 1) => {
    ids.push(...tokens);
    lossMask.push(...tokens.map(() => trained));
  };
  append(renderConversationStart([{ role: 'system', content: FROZENLAKE_SYSTEM_PROMPT }, observe()]), 0);
  const turns = 1 + pick(MAX_TURNS);
  let answer: number[] = [];
  for (let turn = 0; turn < turns && ids.length < MAX_TOKENS; turn++) {
    if (turn > 0) append(renderContinuation(answer, [observe()]), 0);
    if (rng() < RECOVERY_SHARE) {
      // The malformed answer is context, not a target (mask 0); the reply to it is a target.
      const malformed = MALFORMED[pick(MALFORMED.length)];
      const parsed = parseAction(malformed);
      answer = [...encode(malformed), SPECIAL_TOKENS.end];
      append(answer, 0);
      append(renderContinuation(answer, [{ role: 'user', content: invalidActionMessage(parsed.ok ? 'unexpected' : parsed.error) }]), 0);
    }
    answer = [...encode(formatExample(pick(ACTION_NAMES.length))), SPECIAL_TOKENS.end];
    append(answer, 1);
  }
  return { ids, lossMask };
}

/** The map with the player on a random cell where the agent could be asked to move (not H or G). */
function randomPosition(grid: string[], pick: (n: number) => number): FrozenLakeObservation {
  const cells = grid.flatMap((line, row) => [...line].flatMap((cell, col) => (cell === 'H' || cell === 'G' ? [] : [{ row, col }])));
  const { row, col } = cells[pick(cells.length)];
  return { grid, row, col, size: grid.length, steps: 0 };
}

export interface FormatWarmupOptions {
  steps: number;
  /** Conversations per supervised step (default 8). */
  batchSize?: number;
  /**
   * Adam's step size for the warm-up, independent of the RL one (default 1e-2: measured on the
   * default model, 40 steps of 8 conversations then reach the loss floor of a uniform move).
   */
  learningRate?: number;
  seed: number;
}

/** `steps` supervised steps on fresh warm-up conversations; the loss of each. */
export function runFormatWarmup(trainer: PolicyTrainer, { steps, batchSize = 8, learningRate = 1e-2, seed }: FormatWarmupOptions): { losses: number[] } {
  if (!Number.isSafeInteger(steps) || steps < 0) throw new Error(`steps must be a non-negative integer, got ${steps}`);
  if (!Number.isSafeInteger(batchSize) || batchSize < 1) throw new Error(`batchSize must be a positive integer, got ${batchSize}`);
  const samples = formatWarmupSamples(steps * batchSize, seed);
  const losses: number[] = [];
  for (let step = 0; step < steps; step++) {
    losses.push(trainer.supervisedStep(samples.slice(step * batchSize, (step + 1) * batchSize), { learningRate }).loss);
  }
  return { losses };
}

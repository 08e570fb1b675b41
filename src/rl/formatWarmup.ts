/**
 * Format warm-up: a short supervised phase that teaches an untrained policy to answer in the
 * agent's format (a move word, then <|end|>) so that RL starts from parseable answers.
 *
 * It teaches the format only, never solutions: every example is an episode on a random map played
 * with uniformly random legal moves (any move that stays on the map, holes included, up to
 * MAX_TURNS), so later-turn contexts are covered too, and some turns follow a malformed answer and
 * the agent's "invalid answer" reply, so the policy also learns to get back to the format. The
 * loss mask is 1 on the well-formed answers only.
 *
 * Legal rather than arbitrary moves, because a move's validity depends on the observation: the
 * policy learns to read where it stands. Answers that ignored the observation would teach the
 * opposite, and RL would have to unlearn it before it could learn anything about holes and goals,
 * which the warm-up never mentions.
 */
import { FROZENLAKE_SYSTEM_PROMPT, formatExample, invalidActionMessage, parseAction, renderObservation } from '../agents/frozenlakeAgent';
import { createRng, type Rng } from '../core/random';
import { encode, renderContinuation, renderConversationStart, SPECIAL_TOKENS } from '../core/tokenizer';
import { FrozenLake, MOVES, type FrozenLakeObservation } from '../envs/frozenlake';
import type { MaskedSequence } from './loss';
import type { PolicyTrainer } from './trainer';

const MAX_TURNS = 8;
/**
 * No new turn starts once a conversation is this long, so it fits the model's context: the
 * longest turn (an 8x8 grid after a malformed answer) adds under 200 tokens.
 */
const TURN_HEADROOM = 200;
/** Share of turns that follow a malformed answer instead of a move. */
const RECOVERY_SHARE = 0.1;
/** Malformed answers of the kinds an untrained or drifting policy writes. */
const MALFORMED = ['do', 'lef', 'Action:', 'down down', '', 'forward'];
const MAP_SIZES = [4, 8] as const;

/** Whether warm-up turns continue one conversation (`full`) or each start afresh (`none`), as the agent's. */
export type WarmupHistory = 'full' | 'none';

/**
 * Warm-up sequences from `count` random episodes, a pure function of its arguments: one sequence
 * per episode with history, one per turn without (matching what the agent will show the model).
 */
export function formatWarmupSamples(count: number, seed: number, maxContext = 1024, history: WarmupHistory = 'full'): MaskedSequence[] {
  if (!Number.isSafeInteger(count) || count < 0) throw new Error(`count must be a non-negative integer, got ${count}`);
  const rng = createRng(seed);
  const maxLength = maxContext - TURN_HEADROOM;
  if (maxLength < 200) throw new Error(`format warm-up needs a context of at least ${200 + TURN_HEADROOM} tokens, got ${maxContext}`);
  return Array.from({ length: count }, () => episode(rng, maxLength, history)).flat();
}

/** Moves that keep the player on the map (holes included: they end the episode, legally). */
export function legalMoves({ row, col, size }: FrozenLakeObservation): number[] {
  return MOVES.flatMap(([dr, dc], action) => (row + dr >= 0 && row + dr < size && col + dc >= 0 && col + dc < size ? [action] : []));
}

function episode(rng: Rng, maxLength: number, history: WarmupHistory): MaskedSequence[] {
  const pick = (n: number) => Math.floor(rng() * n);
  const size = MAP_SIZES[pick(MAP_SIZES.length)];
  // A real episode played with uniformly random legal moves, so the contexts look like rollouts
  // while the answers teach no solution.
  const env = new FrozenLake({ size, map: 'random', mapSeed: pick(2 ** 32), slippery: false, seed: 0, maxSteps: MAX_TURNS });
  const start = (observation: FrozenLakeObservation) =>
    renderConversationStart([{ role: 'system', content: FROZENLAKE_SYSTEM_PROMPT }, { role: 'user', content: renderObservation(observation) }]);
  const sequences: MaskedSequence[] = [];
  let current: MaskedSequence = { ids: [], lossMask: [] };
  const append = (tokens: readonly number[], trained: 0 | 1) => {
    current.ids.push(...tokens);
    current.lossMask.push(...tokens.map(() => trained));
  };
  const newContext = (observation: FrozenLakeObservation) => {
    current = { ids: [], lossMask: [] };
    sequences.push(current);
    append(start(observation), 0);
  };
  let observation = env.reset();
  newContext(observation);
  let answer: number[] = [];
  for (let done = false; !done && current.ids.length < maxLength; ) {
    // Recovery turns exist only with history: without it the model never sees its bad answer.
    if (history === 'full' && rng() < RECOVERY_SHARE) {
      // The malformed answer is context, not a target (mask 0); the reply to it is a target.
      const malformed = MALFORMED[pick(MALFORMED.length)];
      const parsed = parseAction(malformed);
      answer = [...encode(malformed), SPECIAL_TOKENS.end];
      append(answer, 0);
      append(renderContinuation(answer, [{ role: 'user', content: invalidActionMessage(parsed.ok ? 'unexpected' : parsed.error) }]), 0);
    }
    const legal = legalMoves(observation);
    const action = legal[pick(legal.length)];
    answer = [...encode(formatExample(action)), SPECIAL_TOKENS.end];
    append(answer, 1);
    const result = env.step(action);
    observation = result.observation;
    done = result.done;
    if (done) break;
    if (history === 'full') append(renderContinuation(answer, [{ role: 'user', content: renderObservation(observation) }]), 0);
    else newContext(observation);
  }
  return sequences;
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
  /** The agent's history mode, so warm-up contexts look like the run's (default full). */
  history?: WarmupHistory;
}

/** `steps` supervised steps on fresh warm-up conversations; the loss of each. */
export function runFormatWarmup(
  trainer: PolicyTrainer,
  { steps, batchSize = 8, learningRate = 1e-2, seed, history = 'full' }: FormatWarmupOptions,
): { losses: number[] } {
  if (!Number.isSafeInteger(steps) || steps < 0) throw new Error(`steps must be a non-negative integer, got ${steps}`);
  if (!Number.isSafeInteger(batchSize) || batchSize < 1) throw new Error(`batchSize must be a positive integer, got ${batchSize}`);
  const losses: number[] = [];
  for (let step = 0; step < steps; step++) {
    // A step trains on `batchSize` episodes: that many sequences with history, all their turns without.
    losses.push(trainer.supervisedStep(formatWarmupSamples(batchSize, seed + step, trainer.config.maxContext, history), { learningRate }).loss);
  }
  return { losses };
}

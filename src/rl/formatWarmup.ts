/**
 * Format warm-up: a short supervised phase that teaches an untrained policy to answer in its
 * agent's format (a move word, a tool call, ... then <|end|>) so that RL starts from parseable
 * answers.
 *
 * It teaches the format only, never solutions: every example is a real episode of the run's own
 * environment and agent (training instances) in which each answer is the agent's `formatExample`,
 * e.g. a uniformly random legal move, or a tool call with random arguments. With history, some
 * turns follow a malformed answer and the agent's reply to it, so the policy also learns to get
 * back to the format. The loss mask is 1 on the well-formed answers only.
 */
import { TrainerConfigSchema, type AgentConfig, type EnvConfig } from '../../config/schema';
import type { NextTurn } from '../agents/agent';
import { Episode } from '../episode/episode';
import { createRng, type Rng } from '../core/random';
import { encode, renderContinuation, renderConversationStart, SPECIAL_TOKENS } from '../core/tokenizer';
import type { MaskedSequence } from './loss';
import type { PolicyTrainer } from './trainer';

/** Turns per warm-up episode at most (and the agent's own limit). */
const MAX_TURNS = 8;
/** Room left in the context for an answer: a turn that would not leave it ends the episode. */
const ANSWER_HEADROOM = 64;
/** Share of turns that follow a malformed answer instead of a well-formed one. */
const RECOVERY_SHARE = 0.1;
/** Malformed answers of the kinds an untrained or drifting policy writes. */
const MALFORMED = ['do', 'lef', 'Action:', 'down down', '', 'forward', '<tool_call>{"name"'];

/** Whose episodes the warm-up plays: the run's environment and agent. */
export interface WarmupSetup {
  env: EnvConfig;
  agent: AgentConfig;
}

/**
 * Warm-up sequences from `count` episodes, a pure function of its arguments: one sequence per
 * episode with history, one per turn without (matching what the agent will show the model).
 */
export async function formatWarmupSamples(count: number, seed: number, setup: WarmupSetup, maxContext = 1024): Promise<MaskedSequence[]> {
  if (!Number.isSafeInteger(count) || count < 0) throw new Error(`count must be a non-negative integer, got ${count}`);
  const rng = createRng(seed);
  const sequences: MaskedSequence[] = [];
  for (let i = 0; i < count; i++) sequences.push(...(await episode(rng, setup, maxContext)));
  return sequences;
}

async function episode(rng: Rng, { env, agent }: WarmupSetup, maxContext: number): Promise<MaskedSequence[]> {
  const pick = (n: number) => Math.floor(rng() * n);
  const { episode: session, first } = await Episode.open({ env, agent, seed: pick(2 ** 32), pool: 'train' });
  const conversational = session.agent;
  if (!conversational.formatExample) {
    await session.close();
    throw new Error(`agent ${JSON.stringify(agent.name)} has no format examples; set trainer.formatWarmupSteps to 0`);
  }
  const sequences: MaskedSequence[] = [];
  let current: MaskedSequence = { ids: [], lossMask: [] };
  let answer: number[] = [];
  const append = (tokens: readonly number[], trained: 0 | 1) => {
    current.ids.push(...tokens);
    current.lossMask.push(...tokens.map(() => trained));
  };
  /** Adds the turn's prompt tokens; false (nothing added) when the answer would not fit. */
  const beginTurn = (next: NextTurn): boolean => {
    const tokens = next.freshContext ? renderConversationStart(next.messages) : renderContinuation(answer, next.messages);
    const base = next.freshContext ? 0 : current.ids.length;
    if (base + tokens.length + ANSWER_HEADROOM > maxContext) return false;
    if (next.freshContext) {
      current = { ids: [], lossMask: [] };
      sequences.push(current);
    }
    append(tokens, 0);
    return true;
  };
  const answerWith = (text: string, trained: 0 | 1) => {
    answer = [...encode(text), SPECIAL_TOKENS.end];
    append(answer, trained);
  };

  try {
    let next: NextTurn | undefined = first;
    for (let turn = 0; next && turn < Math.min(MAX_TURNS, agent.maxTurns) && beginTurn(next); turn++) {
      // Recovery turns exist only with history: without it the model never sees its bad answer.
      const malformed = MALFORMED[pick(MALFORMED.length)];
      if (conversational.history === 'full' && rng() < RECOVERY_SHARE && !conversational.parseResponse(malformed).ok) {
        // The malformed answer is context, not a target (mask 0); the reply to it is a target.
        answerWith(malformed, 0);
        const outcome = await session.respond(malformed);
        if (outcome.kind !== 'invalid' || !beginTurn(outcome.next)) break;
      }
      const example = conversational.formatExample(session.currentObservation, rng);
      answerWith(example, 1);
      const outcome = await session.respond(example);
      if (outcome.kind === 'invalid')
        throw new Error(`agent ${JSON.stringify(agent.name)}: its format example ${JSON.stringify(example)} does not parse (${outcome.error})`);
      next = outcome.done ? undefined : outcome.next;
    }
  } finally {
    await session.close();
  }
  return sequences;
}

export interface FormatWarmupOptions extends WarmupSetup {
  steps: number;
  /** Episodes per supervised step (default 8). */
  batchSize?: number;
  /** Adam's step size for the warm-up (default: `trainer.formatWarmupLearningRate`'s). */
  learningRate?: number;
  seed: number;
}

/** `steps` supervised steps on fresh warm-up episodes; the loss of each. */
export async function runFormatWarmup(
  trainer: PolicyTrainer,
  { steps, batchSize = 8, learningRate = TrainerConfigSchema.parse({}).formatWarmupLearningRate, seed, env, agent }: FormatWarmupOptions,
): Promise<{ losses: number[] }> {
  if (!Number.isSafeInteger(steps) || steps < 0) throw new Error(`steps must be a non-negative integer, got ${steps}`);
  if (!Number.isSafeInteger(batchSize) || batchSize < 1) throw new Error(`batchSize must be a positive integer, got ${batchSize}`);
  const losses: number[] = [];
  for (let step = 0; step < steps; step++) {
    const samples = await formatWarmupSamples(batchSize, seed + step, { env, agent }, trainer.config.maxContext);
    losses.push(trainer.supervisedStep(samples, { learningRate }).loss);
  }
  return { losses };
}

/**
 * Evaluation of one policy version: episodes on held-out environment instances, played in this
 * process with the batching engine and the same agent logic and conversation rules as the durable
 * rollouts, but sampled near-greedily and never trained on. Its success rate is the learning curve
 * a user reads; the training groups' own success rate mixes in exploration.
 */
import type { AgentConfig, EnvConfig } from '../../config/schema';
import type { NextTurn } from '../agents/agent';
import { Episode } from '../agents/episode';
import { hashString } from '../core/random';
import { decode, renderContinuation, renderConversationStart, STOP_TOKENS } from '../core/tokenizer';
import { BatchingEngine } from '../model/engine';
import type { ModelWeights } from '../model/weights';

export interface EvaluationOptions {
  weights: ModelWeights;
  env: EnvConfig;
  agent: AgentConfig;
  /** One episode per seed, each on the environment instance the seed gives in the held-out pool. */
  envSeeds: readonly number[];
  temperature: number;
  maxTokens: number;
  /** Episodes the engine decodes together. */
  maxBatch: number;
}

export interface EvaluationResult {
  episodes: number;
  solved: number;
  successRate: number;
  meanReturn: number;
  /** Share of the model's answers that parsed as an action. */
  validAnswerShare: number;
  meanTurns: number;
}

interface EpisodeOutcome {
  envReturn: number;
  turns: number;
  invalidAnswers: number;
}

/** The seeds of a run's evaluation episodes: their own stream, apart from the training groups'. */
export function evaluationSeeds(runSeed: number, episodes: number): number[] {
  return Array.from({ length: episodes }, (_, i) => hashString(`${runSeed}/eval/${i}`));
}

export async function evaluatePolicy(options: EvaluationOptions): Promise<EvaluationResult> {
  const engine = await BatchingEngine.create({ weights: options.weights, maxBatch: options.maxBatch });
  try {
    const outcomes = await Promise.all(options.envSeeds.map((seed) => playEpisode(engine, options, seed)));
    const episodes = outcomes.length;
    const solved = outcomes.filter((o) => o.envReturn > 0).length;
    const turns = outcomes.reduce((sum, o) => sum + o.turns, 0);
    const invalid = outcomes.reduce((sum, o) => sum + o.invalidAnswers, 0);
    return {
      episodes,
      solved,
      successRate: episodes ? solved / episodes : 0,
      meanReturn: episodes ? outcomes.reduce((sum, o) => sum + o.envReturn, 0) / episodes : 0,
      validAnswerShare: turns ? 1 - invalid / turns : 0,
      meanTurns: episodes ? turns / episodes : 0,
    };
  } finally {
    engine.close();
  }
}

async function playEpisode(engine: BatchingEngine, options: EvaluationOptions, seed: number): Promise<EpisodeOutcome> {
  const { maxContext } = engine.config;
  const { episode, first } = await Episode.open({ env: options.env, agent: options.agent, seed, pool: 'eval' });
  const outcome: EpisodeOutcome = { envReturn: 0, turns: 0, invalidAnswers: 0 };
  try {
    let next: NextTurn | undefined = first;
    let context: number[] = [];
    let lastCompletion: number[] = [];
    while (next && outcome.turns < options.agent.maxTurns) {
      context = next.freshContext ? renderConversationStart(next.messages) : [...context, ...renderContinuation(lastCompletion, next.messages)];
      if (context.length >= maxContext) break;
      const result = await engine.generate({
        promptIds: context,
        sampling: {
          maxTokens: Math.min(options.maxTokens, maxContext - context.length),
          temperature: options.temperature,
          topP: 1,
          seed: hashString(`eval/${seed}/${outcome.turns}`),
          stopTokens: STOP_TOKENS,
        },
      });
      outcome.turns++;
      lastCompletion = result.completionIds;
      context.push(...lastCompletion);
      const turn = await episode.respond(decode(lastCompletion));
      if (turn.kind === 'invalid') {
        outcome.invalidAnswers++;
        next = turn.next;
        continue;
      }
      outcome.envReturn += turn.reward;
      next = turn.done ? undefined : turn.next;
    }
  } finally {
    await episode.close();
  }
  return outcome;
}

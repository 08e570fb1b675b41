/**
 * Evaluation of one policy version: episodes on held-out environment instances, played in this
 * process with the same agent logic and conversation rules as the durable rollouts, but sampled
 * near-greedily and never trained on. Its success rate is the learning curve a user reads; the
 * training groups' own success rate mixes in exploration. The embedded model plays on a batching
 * engine of its own (`evaluatePolicy`); a real model through its inference servers
 * (`playEvaluation` with the HTTP provider), which report the versions that sampled each token.
 */
import type { AgentConfig, EnvConfig } from '../../config/schema';
import type { NextTurn } from '../agents/agent';
import { Episode } from '../episode/episode';
import { embeddedChatFormat, type ChatFormat } from '../chat/format';
import { hashString } from '../core/random';
import type { GenerateRequest, GenerateResult } from '../inference/provider';
import { BatchingEngine } from '../model/engine';
import type { ModelWeights } from '../model/weights';

/** Anything that samples completions: the embedded engine, an inference provider. */
export interface Sampler {
  generate(request: GenerateRequest): Promise<Pick<GenerateResult, 'completionIds' | 'policyVersion' | 'tokenPolicyVersions'>>;
}

export interface EvaluationOptions extends EvaluationPlay {
  weights: ModelWeights;
  /** Episodes the engine decodes together. */
  maxBatch: number;
}

/** What an evaluation plays, whatever samples it. */
export interface EvaluationPlay {
  env: EnvConfig;
  agent: AgentConfig;
  /** One episode per seed, each on the environment instance the seed gives in the held-out pool. */
  envSeeds: readonly number[];
  temperature: number;
  maxTokens: number;
}

export interface EvaluationResult {
  episodes: number;
  solved: number;
  successRate: number;
  meanReturn: number;
  /** Share of the model's answers that parsed as an action. */
  validAnswerShare: number;
  meanTurns: number;
  /** The oldest and newest policy version that sampled a token (absent when nothing was sampled). */
  sampledVersions?: { min: number; max: number };
}

interface EpisodeOutcome {
  envReturn: number;
  turns: number;
  invalidAnswers: number;
  versions: number[];
}

/** The seeds of a run's evaluation episodes: their own stream, apart from the training groups'. */
export function evaluationSeeds(runSeed: number, episodes: number): number[] {
  return Array.from({ length: episodes }, (_, i) => hashString(`${runSeed}/eval/${i}`));
}

/** The embedded model's evaluation, on a batching engine of its own holding `weights`. */
export async function evaluatePolicy(options: EvaluationOptions): Promise<EvaluationResult> {
  const engine = await BatchingEngine.create({ weights: options.weights, maxBatch: options.maxBatch });
  try {
    // The engine labels its weights with no run version: what it sampled with is `weights` alone.
    const { sampledVersions: _unlabelled, ...result } = await playEvaluation(engine, embeddedChatFormat, engine.config.maxContext, options);
    return result;
  } finally {
    engine.close();
  }
}

/** Plays every evaluation episode at once through `sampler`, in `chat`'s conversation format. */
export async function playEvaluation(sampler: Sampler, chat: ChatFormat, maxContext: number, play: EvaluationPlay): Promise<EvaluationResult> {
  const outcomes = await Promise.all(play.envSeeds.map((seed) => playEpisode(sampler, chat, maxContext, play, seed)));
  const episodes = outcomes.length;
  const solved = outcomes.filter((o) => o.envReturn > 0).length;
  const turns = outcomes.reduce((sum, o) => sum + o.turns, 0);
  const invalid = outcomes.reduce((sum, o) => sum + o.invalidAnswers, 0);
  const versions = outcomes.flatMap((o) => o.versions);
  return {
    episodes,
    solved,
    successRate: episodes ? solved / episodes : 0,
    meanReturn: episodes ? outcomes.reduce((sum, o) => sum + o.envReturn, 0) / episodes : 0,
    validAnswerShare: turns ? 1 - invalid / turns : 0,
    meanTurns: episodes ? turns / episodes : 0,
    ...(versions.length ? { sampledVersions: { min: Math.min(...versions), max: Math.max(...versions) } } : {}),
  };
}

async function playEpisode(sampler: Sampler, chat: ChatFormat, maxContext: number, options: EvaluationPlay, seed: number): Promise<EpisodeOutcome> {
  const { episode, first } = await Episode.open({ env: options.env, agent: options.agent, seed, pool: 'eval' });
  const outcome: EpisodeOutcome = { envReturn: 0, turns: 0, invalidAnswers: 0, versions: [] };
  try {
    let next: NextTurn | undefined = first;
    let context: number[] = [];
    let lastCompletion: number[] = [];
    while (next && outcome.turns < options.agent.maxTurns) {
      context = next.freshContext ? chat.renderConversationStart(next.messages) : [...context, ...chat.renderContinuation(lastCompletion, next.messages)];
      if (context.length >= maxContext) break;
      const result = await sampler.generate({
        promptIds: context,
        sampling: {
          maxTokens: Math.min(options.maxTokens, maxContext - context.length),
          temperature: options.temperature,
          topP: 1,
          seed: hashString(`eval/${seed}/${outcome.turns}`),
          stopTokens: chat.stopTokens,
        },
      });
      outcome.turns++;
      lastCompletion = result.completionIds;
      outcome.versions.push(...(result.tokenPolicyVersions ?? (lastCompletion.length ? [result.policyVersion] : [])));
      context.push(...lastCompletion);
      const turn = await episode.respond(chat.decode(lastCompletion));
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

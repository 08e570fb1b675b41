/**
 * One episode of an agent in its environment: the unit an env worker holds per trajectory
 * (a session), and what evaluation and the format warm-up play in process. It turns each model
 * answer into the agent's action, steps the environment with it, and says what the model is shown
 * next, so the durable workflow, evaluation and warm-up share the same conversation rules. What the
 * model is shown is checked to be chat messages and held to `agent.maxTurnTextBytes` (src/agents/turnText).
 *
 * It lives above plugins/ because it creates the environment and agent a config names by looking
 * them up in the registry.
 *
 * Failures are typed so the trajectory can record them as its outcome: `EpisodeError` with kind
 * `environment` (reset or step threw), `reward` (scoring failed) or `agent` (agent code threw).
 */
import { DEFAULT_MAX_TURN_TEXT_BYTES, type AgentConfig, type EnvConfig } from '../../config/schema';
import { checkMessages, fitTurnText } from '../agents/turnText';
import type { ConversationalAgent, NextTurn } from '../agents/agent';
import type { InstancePool } from '../envs/definition';
import type { Environment, StepResult } from '../envs/environment';
import { RewardError } from '../envs/taskEnvironment';
import { createAgent, createEnvironment } from '../plugins/registry';

export type EpisodeErrorKind = 'environment' | 'reward' | 'agent';

export class EpisodeError extends Error {
  constructor(
    readonly kind: EpisodeErrorKind,
    message: string,
  ) {
    super(message);
    this.name = 'EpisodeError';
  }
}

/** What came of one model answer. */
export type TurnOutcome =
  | { kind: 'invalid'; error: string; next: NextTurn }
  | {
      kind: 'stepped';
      reward: number;
      done: boolean;
      info: Record<string, unknown>;
      penalty?: number;
      /** What each well-formed answer would have been charged on this turn's state, by its text (`answerPenalties`). */
      answerPenalties?: Record<string, number>;
      next?: NextTurn;
    };

export interface EpisodeSetup {
  env: EnvConfig;
  agent: AgentConfig;
  seed: number;
  pool?: InstancePool;
}

export class Episode {
  private observation: unknown;
  private steps = 0;
  private closed = false;

  private constructor(
    readonly environment: Environment,
    readonly agent: ConversationalAgent,
    private readonly envName: string,
    private readonly maxTurnTextBytes: number,
  ) {}

  /** Creates the environment and agent and resets the environment; `first` is the first turn. */
  static async open({ env, agent, seed, pool = 'train' }: EpisodeSetup): Promise<{ episode: Episode; first: NextTurn }> {
    const environment = guard('environment', `environment ${JSON.stringify(env.name)}: create failed`, () => createEnvironment(env, seed, pool));
    let episode: Episode | undefined;
    try {
      const conversational = guard('agent', `agent ${JSON.stringify(agent.name)}: create failed`, () => createAgent(agent, environment));
      episode = new Episode(environment, conversational, env.name, agent.maxTurnTextBytes ?? DEFAULT_MAX_TURN_TEXT_BYTES);
      episode.observation = await guardAsync('environment', `environment ${JSON.stringify(env.name)}: reset failed`, () => environment.reset());
      const first = guard('agent', `agent ${JSON.stringify(agent.name)}: first turn failed`, () => episode!.shown(conversational.begin(episode!.observation)));
      return { episode, first };
    } catch (err) {
      await (episode ? episode.close() : Promise.resolve(environment.close())).catch(() => undefined);
      throw err;
    }
  }

  /** The observation the agent last read. */
  get currentObservation(): unknown {
    return this.observation;
  }

  /** Reads the model's answer and, if it is an action, steps the environment with it. */
  async respond(text: string): Promise<TurnOutcome> {
    const parsed = guard('agent', 'agent failed to read the answer', () => this.agent.respond(text));
    if (!parsed.ok) {
      const next = guard('agent', 'agent failed to answer an invalid response', () =>
        this.shown(this.agent.afterInvalidResponse(this.observation, parsed.error)),
      );
      return { kind: 'invalid', error: parsed.error, next };
    }
    const where = `environment ${JSON.stringify(this.envName)}: step ${this.steps} failed`;
    const result: StepResult<unknown> = await guardAsync('environment', where, () => this.environment.step(parsed.action));
    const { penalty = 0 } = result;
    if (!(Number.isFinite(penalty) && penalty >= 0)) throw new EpisodeError('environment', `${where}: penalty must be a finite number >= 0, got ${penalty}`);
    if (!Number.isFinite(result.reward)) throw new EpisodeError('environment', `${where}: reward must be a finite number, got ${result.reward}`);
    const answers = this.answerPenalties(result.actionPenalties, where);
    this.steps++;
    this.observation = result.observation;
    const stepped = {
      kind: 'stepped' as const,
      reward: result.reward,
      info: result.info,
      ...(penalty > 0 ? { penalty } : {}),
      ...(answers ? { answerPenalties: answers } : {}),
    };
    if (result.done) return { ...stepped, done: true };
    const next = guard('agent', 'agent failed to read the observation', () => this.shown(this.agent.afterStep(result.observation)));
    return { ...stepped, done: false, next };
  }

  /**
   * The environment's price of each action, keyed by the answer that takes it; undefined where the
   * environment prices none or the agent cannot write the answers.
   */
  private answerPenalties(actionPenalties: readonly number[] | undefined, where: string): Record<string, number> | undefined {
    if (actionPenalties === undefined) return undefined;
    if (!Array.isArray(actionPenalties))
      throw new EpisodeError('environment', `${where}: actionPenalties must be an array of numbers, got ${typeof actionPenalties}`);
    const bad = actionPenalties.findIndex((p) => !(Number.isFinite(p) && p >= 0));
    if (bad >= 0) throw new EpisodeError('environment', `${where}: actionPenalties[${bad}] must be a finite number >= 0, got ${actionPenalties[bad]}`);
    if (!this.agent.answerFor) return undefined;
    const answers: Record<string, number> = {};
    actionPenalties.forEach((penalty, action) => {
      const answer = guard('agent', `agent failed to write the answer for action ${action}`, () => this.agent.answerFor!(action));
      if (Object.hasOwn(answers, answer)) throw new EpisodeError('agent', `agent wrote the same answer ${JSON.stringify(answer)} for two actions`);
      answers[answer] = penalty;
    });
    return answers;
  }

  /** What the agent shows the model next, checked and held to `agent.maxTurnTextBytes`. */
  private shown(next: NextTurn): NextTurn {
    checkMessages(next.messages);
    return { ...next, messages: fitTurnText(next.messages, this.maxTurnTextBytes) };
  }

  /** Closes the environment once; safe to call again. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.environment.close();
  }
}

function wrap(kind: EpisodeErrorKind, where: string, err: unknown): EpisodeError {
  if (err instanceof EpisodeError) return err;
  if (err instanceof RewardError) return new EpisodeError('reward', `${where}: ${err.message}`);
  return new EpisodeError(kind, `${where}: ${err instanceof Error ? err.message : String(err)}`);
}

function guard<T>(kind: EpisodeErrorKind, where: string, fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    throw wrap(kind, where, err);
  }
}

async function guardAsync<T>(kind: EpisodeErrorKind, where: string, fn: () => T | Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw wrap(kind, where, err);
  }
}

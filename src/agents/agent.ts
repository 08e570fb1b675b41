/**
 * Conversational agents: what the model reads (system prompt, observations as messages) and how
 * its answer becomes an action. Subclasses say what is specific to them; this base class keeps the
 * message history and the conversation rules every agent shares.
 *
 * Agents run next to their environment in the env worker (an episode session), so they may be any
 * code; they should be deterministic, because a lost session is rebuilt by feeding the same
 * recorded answers to a fresh agent and environment.
 */
import type { Rng } from '../core/random';
import type { ChatMessage } from '../core/tokenizer';

/** `full`: the model reads the whole conversation. `none`: each turn is a fresh context. */
export type History = 'full' | 'none';

export type ParsedAction<Act> = { ok: true; action: Act } | { ok: false; error: string };

/** What the model is shown next. */
export interface NextTurn {
  messages: ChatMessage[];
  /** The messages start a new context instead of continuing the conversation. */
  freshContext: boolean;
}

export abstract class ConversationalAgent<Obs = unknown, Act = unknown> {
  /** Every message of the episode so far, the model's answers included, oldest first. */
  readonly messages: ChatMessage[] = [];

  constructor(readonly history: History = 'full') {}

  /** The system prompt; it may depend on the first observation (a task, the tools on offer). */
  abstract systemPrompt(observation: Obs): string;

  /** An observation as the messages the model reads (usually one user message). */
  abstract observationMessages(observation: Obs): ChatMessage[];

  /** The model's answer as an action, or why it is not one. Must not throw on any text. */
  abstract parseResponse(text: string): ParsedAction<Act>;

  /** What the model is told when its answer did not parse; the episode goes on. */
  invalidResponseMessages(error: string): ChatMessage[] {
    return [{ role: 'user', content: `Invalid answer (${error}).` }];
  }

  /**
   * A well-formed answer to `observation` for the supervised format warm-up: it must teach the
   * answer format only, never the solution (e.g. a random legal move). Agents without one cannot
   * be warmed up (`trainer.formatWarmupSteps` must then be 0).
   */
  formatExample?(observation: Obs, rng: Rng): string;

  /**
   * The well-formed answer that takes `action`, for an environment that prices every action of a
   * turn (`StepResult.actionPenalties`): per-turn credit can then score the answers not given too.
   */
  answerFor?(action: Act): string;

  /** The first turn: system prompt and the first observation. */
  begin(observation: Obs): NextTurn {
    this.system = this.systemPrompt(observation);
    return this.fresh(observation);
  }

  /** Records the model's answer and reads it. */
  respond(text: string): ParsedAction<Act> {
    this.messages.push({ role: 'assistant', content: text });
    return this.parseResponse(text);
  }

  /** After a step: the new observation, appended (full) or in a fresh context (none). */
  afterStep(observation: Obs): NextTurn {
    return this.history === 'full' ? this.append(this.observationMessages(observation)) : this.fresh(observation);
  }

  /**
   * After an answer that did not parse: with history, the reason; without, the same observation
   * again, since the model could not see the answer a message would be about.
   */
  afterInvalidResponse(observation: Obs, error: string): NextTurn {
    return this.history === 'full' ? this.append(this.invalidResponseMessages(error)) : this.fresh(observation);
  }

  private system = '';

  private fresh(observation: Obs): NextTurn {
    return this.append([{ role: 'system', content: this.system }, ...this.observationMessages(observation)], true);
  }

  private append(messages: ChatMessage[], freshContext = false): NextTurn {
    this.messages.push(...messages);
    return { messages, freshContext };
  }
}

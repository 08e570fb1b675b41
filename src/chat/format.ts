/**
 * The seam between trajflow and a model's chat conventions: how messages become prompt ids, turn
 * by turn, and how sampled ids become text again.
 *
 * Prompts are built incrementally and never re-tokenized: turn 0 is `renderConversationStart`,
 * every later turn appends `renderContinuation(previous completion, new messages)` to the stored
 * context, and completions stay exactly the ids the model sampled (token-in/token-out). Two
 * implementations: the embedded policy's byte-level format below, and a real model's own tokenizer
 * and chat template (./hfChatFormat).
 */
import { decode, renderContinuation, renderConversationStart, STOP_TOKENS, type ChatMessage } from '../core/tokenizer';

export type { ChatMessage, Role } from '../core/tokenizer';

/** How a model's conversation becomes token ids, one turn at a time. */
export interface ChatFormat {
  /** Ids opening a conversation with `messages` and handing the turn to the model. */
  renderConversationStart(messages: readonly ChatMessage[]): number[];
  /** Ids appended after the model's completion (its sampled ids) to add `messages` and hand the turn back. */
  renderContinuation(previousCompletion: readonly number[], messages: readonly ChatMessage[]): number[];
  /** Completion ids to the text the agent parses (special tokens dropped). */
  decode(ids: readonly number[]): string;
  /** Ids that end the model's turn (sampling stops after one; it is kept in the completion). */
  readonly stopTokens: readonly number[];
}

/** The embedded policy's byte tokenizer and chat template (src/core/tokenizer.ts), unchanged. */
export const embeddedChatFormat: ChatFormat = Object.freeze({
  renderConversationStart,
  renderContinuation,
  decode,
  stopTokens: STOP_TOKENS,
});

/**
 * Where a model call of an agent framework falls in its trajectory. Frameworks send the whole
 * conversation on every call; trajflow stores each call as a turn whose prompt continues the
 * tokens of the turns before it (the completions exactly as sampled, never re-tokenized). So each
 * call is matched against the stored turns of the trajectory's latest context:
 *
 *   continues   the prompt is that context's messages and replies, in order, each reply the one
 *               its turn sampled, then new messages: the call is the next turn, and only the new
 *               messages are rendered (after the last completion's ids).
 *   repeats     the prompt stops right after the last stored turn's messages: a retry of that
 *               call (its first attempt stored the turn and was lost), answered from the store.
 *   new segment anything else (the agent edited, cut or summarised its history, or put in a reply
 *               trajflow did not sample): the call starts a new context rendered from its text,
 *               stored as a turn that starts a context, with the reason, so the trajectory shows
 *               it and its training sequences split there.
 */
import type { TurnRecord } from '../core/records';
import type { ChatMessage } from '../core/tokenizer';
import type { ToolCallFormat } from '../tools/parsers';
import type { PromptItem } from './prompt';
import { replyMessage, replyOfText, sameReply } from './reply';

export type CallPlace =
  | { kind: 'continues'; turn: number; messages: ChatMessage[] }
  | { kind: 'repeats'; turn: number; messages: ChatMessage[] }
  | { kind: 'new segment'; turn: number; messages: ChatMessage[]; reason: string };

/** The place of a call with prompt `items` in a trajectory whose stored turns are `stored` (0..n-1, in order). */
export function placeCall(items: readonly PromptItem[], stored: readonly TurnRecord[], format: ToolCallFormat): CallPlace {
  const turn = stored.length;
  if (turn === 0) return { kind: 'new segment', turn, messages: asMessages(items, format), reason: 'first call' };
  const mismatch = matchLatestContext(items, stored, format);
  if (typeof mismatch !== 'string') return mismatch;
  return { kind: 'new segment', turn, messages: asMessages(items, format), reason: mismatch };
}

/** The stored turns' latest context matched against `items`: the call's place, or why it is not there. */
function matchLatestContext(items: readonly PromptItem[], stored: readonly TurnRecord[], format: ToolCallFormat): CallPlace | string {
  const first = latestContextStart(stored);
  let at = 0;
  for (let turn = first; turn < stored.length; turn++) {
    const record = stored[turn];
    for (const [index, expected] of record.messages.entries()) {
      // A reply in the messages of a context's first turn was rendered from its text: compare it so.
      const item = items[at] === undefined ? undefined : asMessage(items[at], format);
      if (item?.role !== expected.role || item.content !== expected.content) return `prompt item ${at} differs from message ${index} of turn ${turn}`;
      at++;
    }
    if (at === items.length) {
      if (turn === stored.length - 1) return { kind: 'repeats', turn, messages: record.messages };
      return `the prompt ends before turn ${turn}'s reply`;
    }
    const item = items[at];
    if (item.kind !== 'reply' || !sameReply(item.reply, replyOfText(record.text, format, turn)))
      return `prompt item ${at} is not the reply turn ${turn} sampled`;
    at++;
  }
  const rest = items.slice(at);
  if (rest.some((item) => item.kind === 'reply'))
    return `prompt item ${at + rest.findIndex((item) => item.kind === 'reply')} is a reply trajflow did not sample`;
  return { kind: 'continues', turn: stored.length, messages: asMessages(rest, format) };
}

/** The first turn of the context the last stored turn belongs to. */
function latestContextStart(stored: readonly TurnRecord[]): number {
  for (let turn = stored.length - 1; turn > 0; turn--) if (stored[turn].startsContext) return turn;
  return 0;
}

function asMessages(items: readonly PromptItem[], format: ToolCallFormat): ChatMessage[] {
  return items.map((item) => asMessage(item, format));
}

function asMessage(item: PromptItem, format: ToolCallFormat): ChatMessage {
  return item.kind === 'message' ? item.message : replyMessage(item.reply, format);
}

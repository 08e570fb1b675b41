/**
 * Where a model call of an agent framework falls in its trajectory. Frameworks send the whole
 * conversation on every call; trajflow stores each call as a turn whose prompt continues the
 * tokens of the turns before it (the completions exactly as sampled, never re-tokenized). So each
 * call is matched against the stored turns of the trajectory's latest context:
 *
 *   continues   the prompt is that context's messages and replies, in order, each reply the one
 *               its turn sampled, then new messages: the call is the next turn, and only the new
 *               messages are rendered (after the last completion's ids).
 *   repeats     the prompt stops right after a stored turn's messages: a retry of that call (its
 *               first attempt stored the turn and was lost), or an agent program started again
 *               from the beginning, answered from the store. Within a trajectory, one prompt
 *               gets one answer. Earlier contexts are looked at for this too.
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
  const starts = contextStarts(stored);
  const latest = matchContext(items, stored, starts[starts.length - 1], format);
  if (typeof latest !== 'string') return latest;
  // Only a repeat may fall in an earlier context: a call continuing one would fork the trajectory.
  for (const start of starts.slice(0, -1).reverse()) {
    const earlier = matchContext(items, stored, start, format);
    if (typeof earlier !== 'string' && earlier.kind === 'repeats') return earlier;
  }
  return { kind: 'new segment', turn, messages: asMessages(items, format), reason: latest };
}

/** The context of the stored turns from `first` on matched against `items`: the call's place, or why it is not there. */
function matchContext(items: readonly PromptItem[], stored: readonly TurnRecord[], first: number, format: ToolCallFormat): CallPlace | string {
  const end = stored.findIndex((record, turn) => turn > first && record.startsContext === true);
  const last = end === -1 ? stored.length : end;
  let at = 0;
  for (let turn = first; turn < last; turn++) {
    const record = stored[turn];
    for (const [index, expected] of record.messages.entries()) {
      // A reply in the messages of a context's first turn was rendered from its text: compare it so.
      const item = items[at] === undefined ? undefined : asMessage(items[at], format);
      if (item?.role !== expected.role || item.content !== expected.content) return `prompt item ${at} differs from message ${index} of turn ${turn}`;
      at++;
    }
    if (at === items.length) return { kind: 'repeats', turn, messages: record.messages };
    const item = items[at];
    if (item.kind !== 'reply' || !sameReply(item.reply, replyOfText(record.text, format, turn)))
      return `prompt item ${at} is not the reply turn ${turn} sampled`;
    at++;
  }
  if (last < stored.length) return `the prompt continues a context that a later one replaced (turn ${last})`;
  const rest = items.slice(at);
  if (rest.some((item) => item.kind === 'reply'))
    return `prompt item ${at + rest.findIndex((item) => item.kind === 'reply')} is a reply trajflow did not sample`;
  return { kind: 'continues', turn: stored.length, messages: asMessages(rest, format) };
}

/** The first turn of each context, in order. */
function contextStarts(stored: readonly TurnRecord[]): number[] {
  return stored.flatMap((record, turn) => (turn === 0 || record.startsContext === true ? [turn] : []));
}

function asMessages(items: readonly PromptItem[], format: ToolCallFormat): ChatMessage[] {
  return items.map((item) => asMessage(item, format));
}

function asMessage(item: PromptItem, format: ToolCallFormat): ChatMessage {
  return item.kind === 'message' ? item.message : replyMessage(item.reply, format);
}

/**
 * A model call's answer as an agent framework sees it: the text outside tool calls and the calls,
 * each with an id. Read from the sampled text with the configured format's parser; the ids are a
 * function of the turn, so the answer of a stored turn reads back the same on every retry and can
 * be recognised when the agent sends it back in its history.
 */
import type { LanguageModelV4Content } from '@ai-sdk/provider';
import type { ChatMessage } from '../core/tokenizer';
import { getToolCallParser, type ToolCallFormat } from '../tools/parsers';
import { formatToolCall } from '../tools/render';

export interface ReplyCall {
  id: string;
  name: string;
  /** The arguments: an object, or its JSON text (as the AI SDK's tool-call content carries them). */
  input: unknown;
}

export interface Reply {
  text: string;
  calls: ReplyCall[];
}

/** The id of call `index` of turn `turn`: unique within a trajectory, the same on every read. */
export function callId(turn: number, index: number): string {
  return `call_${turn}_${index}`;
}

/**
 * The reply in a sampled text. A text whose calls do not parse is all text: the agent reads what
 * the model wrote, and its reward judges it.
 */
export function replyOfText(text: string, format: ToolCallFormat, turn: number): Reply {
  const { calls, errors, content } = getToolCallParser(format)(text);
  if (errors.length > 0 || calls.length === 0) return { text: errors.length > 0 ? text.trim() : content, calls: [] };
  return { text: content, calls: calls.map((call, index) => ({ id: callId(turn, index), name: call.name, input: call.arguments ?? {} })) };
}

/** Whether two replies say the same: same text (trimmed), same calls with the same ids and arguments. */
export function sameReply(a: Reply, b: Reply): boolean {
  return (
    a.text.trim() === b.text.trim() &&
    a.calls.length === b.calls.length &&
    a.calls.every((call, i) => call.id === b.calls[i].id && call.name === b.calls[i].name && canonicalJson(call.input) === canonicalJson(b.calls[i].input))
  );
}

/** A reply written as an assistant message, for a context trajflow renders from text (a new segment). */
export function replyMessage(reply: Reply, format: ToolCallFormat): ChatMessage {
  const calls = reply.calls.map((call) => formatToolCall(format, { name: call.name, arguments: inputObject(call.input) }));
  return { role: 'assistant', content: [reply.text, ...calls].filter((part) => part !== '').join('\n') };
}

/** The reply as the AI SDK's content parts. */
export function contentOf(reply: Reply): LanguageModelV4Content[] {
  return [
    ...(reply.text === '' ? [] : [{ type: 'text' as const, text: reply.text }]),
    ...reply.calls.map((call) => ({ type: 'tool-call' as const, toolCallId: call.id, toolName: call.name, input: JSON.stringify(inputObject(call.input)) })),
  ];
}

function inputObject(input: unknown): unknown {
  if (typeof input !== 'string') return input;
  try {
    return JSON.parse(input);
  } catch {
    return input;
  }
}

/** JSON with object keys sorted, so equal arguments compare equal whatever their key order. */
function canonicalJson(input: unknown): string {
  const sorted = (value: unknown): unknown => {
    if (Array.isArray(value)) return value.map(sorted);
    if (typeof value === 'object' && value !== null)
      return Object.fromEntries(
        Object.keys(value)
          .sort()
          .map((key) => [key, sorted((value as Record<string, unknown>)[key])]),
      );
    return value;
  };
  return JSON.stringify(sorted(inputObject(input)));
}

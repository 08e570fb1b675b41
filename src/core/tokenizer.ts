/**
 * Byte-level tokenizer and chat template of trajflow's embedded policy.
 *
 * Ids 0..255 are the UTF-8 bytes, so any text round-trips exactly and nothing is ever "unknown".
 * The special tokens above them mark the chat structure, and only the template writes them: message
 * content is always its bytes, so an observation spelling `<|end|>` cannot close a turn. Pure and Temporal-free: workflows,
 * activities and the model all import it.
 *
 * Token-in/token-out: the template only ever tokenizes text that trajflow itself wrote (system
 * prompts, observations, tool results). Completions stay the ids the model sampled; `decode` turns
 * them into text for parsing, and nothing turns that text back into ids.
 */

export const SPECIAL_TOKENS = {
  pad: 256,
  bos: 257,
  system: 258,
  user: 259,
  assistant: 260,
  end: 261,
  /** Opens a tool result message (what a tool call returned). */
  tool: 262,
} as const;

/** 256 byte ids + the specials, rounded up to a multiple of 8 for friendlier matrix shapes. */
export const VOCAB_SIZE = 264;

const SPECIAL_NAMES: Record<number, string> = Object.fromEntries(Object.entries(SPECIAL_TOKENS).map(([name, id]) => [id, `<|${name}|>`]));

export type Role = 'system' | 'user' | 'assistant' | 'tool';

export interface ChatMessage {
  role: Role;
  content: string;
}

/** UTF-8 encoding without Node's Buffer, so the workflow sandbox can use it too. */
export function encode(text: string): number[] {
  return Array.from(new TextEncoder().encode(text));
}

/** Decodes byte ids to text; special ids are dropped, invalid UTF-8 becomes U+FFFD. */
export function decode(ids: readonly number[]): string {
  const bytes = ids.filter((id) => id >= 0 && id < 256);
  return new TextDecoder('utf-8', { fatal: false }).decode(new Uint8Array(bytes));
}

/** Like `decode` but shows special tokens by name: for logs and the Web UI, never for parsing. */
export function describe(ids: readonly number[]): string {
  let out = '';
  let run: number[] = [];
  const flush = () => {
    out += decode(run);
    run = [];
  };
  for (const id of ids) {
    if (id < 256) run.push(id);
    else {
      flush();
      out += SPECIAL_NAMES[id] ?? `<|${id}|>`;
    }
  }
  flush();
  return out;
}

function roleToken(role: Role): number {
  return SPECIAL_TOKENS[role];
}

/** One message as `<|role|>content<|end|>`. */
export function renderMessage(message: ChatMessage): number[] {
  return [roleToken(message.role), ...encode(message.content), SPECIAL_TOKENS.end];
}

/**
 * Ids that open a conversation and hand the turn to the model:
 * `<|bos|>` + each message + `<|assistant|>`.
 */
export function renderConversationStart(messages: readonly ChatMessage[]): number[] {
  return [SPECIAL_TOKENS.bos, ...messages.flatMap(renderMessage), SPECIAL_TOKENS.assistant];
}

/**
 * Ids appended after the model's completion to continue the conversation: closes the assistant
 * message if the model did not (it hit its token limit), then the new messages, then
 * `<|assistant|>`. These are template/environment tokens: loss mask 0.
 */
export function renderContinuation(previousCompletion: readonly number[], messages: readonly ChatMessage[]): number[] {
  const closed = previousCompletion[previousCompletion.length - 1] === SPECIAL_TOKENS.end;
  return [...(closed ? [] : [SPECIAL_TOKENS.end]), ...messages.flatMap(renderMessage), SPECIAL_TOKENS.assistant];
}

/** Token ids at which generation stops. */
export const STOP_TOKENS: readonly number[] = [SPECIAL_TOKENS.end];

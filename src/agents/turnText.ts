/**
 * The text one turn adds to the model's context, checked and held to a budget
 * (`agent.maxTurnTextBytes`). An observation of megabytes would overflow any context window, and
 * a turn's messages travel through workflow history (the session's result, the `generate` input),
 * where Temporal refuses large payloads. So short messages stay whole, the long ones share what is
 * left of the budget equally, and each cut message ends with a note telling the model how much of
 * it is not shown.
 */
import type { ChatMessage, Role } from '../core/tokenizer';

const ROLES: Readonly<Record<Role, true>> = { system: true, user: true, assistant: true, tool: true };

/** Throws, saying what is wrong, unless `messages` are chat messages (agents may be plain JavaScript). */
export function checkMessages(messages: unknown): asserts messages is ChatMessage[] {
  if (!Array.isArray(messages)) throw new Error(`the next turn's messages are not a list (${typeof messages})`);
  messages.forEach((message: Partial<ChatMessage> | null, index) => {
    if (typeof message?.role !== 'string' || !Object.hasOwn(ROLES, message.role)) {
      throw new Error(`message ${index}: role ${JSON.stringify(message?.role)} is none of ${Object.keys(ROLES).join(', ')}`);
    }
    if (typeof message.content !== 'string') throw new Error(`message ${index}: content is ${typeof message.content}, not text`);
  });
}

/** `messages` within about `budgetBytes` of UTF-8 text in all, the longest cut first, each cut one with its note. */
export function fitTurnText(messages: readonly ChatMessage[], budgetBytes: number): ChatMessage[] {
  const sizes = messages.map((message) => Buffer.byteLength(message.content, 'utf8'));
  const share = fairShare(sizes, budgetBytes);
  return messages.map((message, i) => (sizes[i] <= share ? message : { ...message, content: cutText(message.content, share) }));
}

/**
 * The most bytes each message may keep so that all fit in `budgetBytes` (Infinity: all fit whole):
 * messages under it keep all their text, and those over it each keep that much.
 */
export function fairShare(sizes: readonly number[], budgetBytes: number): number {
  const ascending = [...sizes].sort((a, b) => a - b);
  let left = budgetBytes;
  for (const [i, size] of ascending.entries()) {
    const share = Math.floor(left / (ascending.length - i));
    if (size > share) return share;
    left -= size;
  }
  return Infinity;
}

/** What the model reads where a text was cut. */
export function cutNote(cutBytes: number, totalBytes: number): string {
  return `\n[cut: the last ${cutBytes} of ${totalBytes} bytes are not shown (agent.maxTurnTextBytes)]`;
}

/**
 * `text` in at most `maxBytes` of UTF-8 with the note included, cut at a character boundary. A
 * share smaller than the note itself keeps the note alone.
 */
export function cutText(text: string, maxBytes: number): string {
  const bytes = Buffer.from(text, 'utf8');
  let keep = Math.max(0, maxBytes - Buffer.byteLength(cutNote(bytes.length, bytes.length)));
  // Back off to the first byte of a character: UTF-8 continuation bytes are 10xxxxxx.
  while (keep > 0 && (bytes[keep] & 0xc0) === 0x80) keep--;
  return bytes.subarray(0, keep).toString('utf8') + cutNote(bytes.length - keep, bytes.length);
}

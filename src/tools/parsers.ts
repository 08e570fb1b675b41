/**
 * Tool-call parsers, one per chat format, chosen by name. Each takes the model's raw answer and
 * returns the calls in it, the text around them, and one error per call it could not read.
 *
 * Model output is untrusted and often truncated (the token budget ran out mid-call), so parsers
 * never throw: a broken call becomes an `errors` entry the agent can show the model. Pure and
 * dependency-free, so agents can use them inside the Temporal workflow sandbox.
 */

export interface ParsedToolCall {
  name: string;
  arguments: unknown;
}

export interface ParseResult {
  calls: ParsedToolCall[];
  errors: string[];
  /** The answer's text outside tool calls, trimmed. */
  content: string;
}

export type ToolCallParser = (text: string) => ParseResult;

/** Hermes / Qwen 2.5–3: `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`. */
export const parseHermes: ToolCallParser = (text) => parseTagged(text, '<tool_call>', '</tool_call>', (body) => callFromJson(parseJson(body)));

/**
 * Qwen3-Coder: `<tool_call><function=NAME><parameter=ARG>value</parameter>...</function></tool_call>`.
 * Values are raw text; one that reads as JSON (number, boolean, object, array) is taken as such.
 */
export const parseQwen3Coder: ToolCallParser = (text) => parseTagged(text, '<tool_call>', '</tool_call>', parseQwenFunction);

/** Gemma 4: `<|tool_call>call:NAME{key:<|"|>text<|"|>,n:3}<tool_call|>`. */
export const parseGemma4: ToolCallParser = (text) => parseTagged(text, '<|tool_call>', '<tool_call|>', parseGemmaCall);

/**
 * Plain JSON: the whole answer, or each ```json fenced block, is `{"name", "arguments"}` or an
 * array of them. An answer that is not JSON-shaped and has no such block holds no call.
 */
export const parseJsonCalls: ToolCallParser = (text) => {
  const result: ParseResult = { calls: [], errors: [], content: '' };
  const fence = /```json[ \t]*\r?\n?/gi;
  if (!fence.test(text)) {
    const trimmed = text.trim();
    if (!trimmed.startsWith('{') && !trimmed.startsWith('[')) return { ...result, content: trimmed };
    addJsonCalls(result, trimmed, 'answer');
    return result;
  }
  fence.lastIndex = 0;
  const outside: string[] = [];
  let pos = 0;
  let block = 0;
  for (let m = fence.exec(text); m; m = fence.exec(text)) {
    block++;
    outside.push(text.slice(pos, m.index));
    const end = text.indexOf('```', fence.lastIndex);
    if (end < 0) {
      result.errors.push(`json block ${block}: unclosed \`\`\`json fence (truncated answer?)`);
      pos = text.length;
      break;
    }
    addJsonCalls(result, text.slice(fence.lastIndex, end), `json block ${block}`);
    pos = end + 3;
    fence.lastIndex = pos;
  }
  outside.push(text.slice(pos));
  result.content = outside.join('').trim();
  return result;
};

const PARSERS = {
  hermes: parseHermes,
  'qwen3-coder': parseQwen3Coder,
  gemma4: parseGemma4,
  json: parseJsonCalls,
} satisfies Record<string, ToolCallParser>;

export type ToolCallFormat = keyof typeof PARSERS;
export const TOOL_CALL_FORMATS = Object.keys(PARSERS) as ToolCallFormat[];

export function getToolCallParser(name: string): ToolCallParser {
  const parser = (PARSERS as Record<string, ToolCallParser>)[name];
  if (!parser) throw new Error(`unknown tool-call format ${JSON.stringify(name)}; known formats: ${TOOL_CALL_FORMATS.join(', ')}`);
  return parser;
}

/** A call body that could not be read; its message goes to `errors`. */
class CallError extends Error {}

/**
 * Splits text into open/close-delimited call bodies and the text around them, and parses each
 * body. An unclosed block (a truncated answer) is an error and is left out of the content.
 */
function parseTagged(text: string, open: string, close: string, parseBody: (body: string) => ParsedToolCall): ParseResult {
  const result: ParseResult = { calls: [], errors: [], content: '' };
  const outside: string[] = [];
  let pos = 0;
  for (let n = 1; ; n++) {
    const start = text.indexOf(open, pos);
    const stray = text.indexOf(close, pos);
    if (stray >= 0 && (start < 0 || stray < start)) {
      result.errors.push(`${close} at offset ${stray} has no matching ${open}`);
    }
    if (start < 0) break;
    outside.push(text.slice(pos, start));
    const bodyStart = start + open.length;
    const end = text.indexOf(close, bodyStart);
    if (end < 0) {
      result.errors.push(`tool call ${n}: unclosed ${open} (no ${close}; truncated answer?)`);
      pos = text.length;
      break;
    }
    try {
      result.calls.push(parseBody(text.slice(bodyStart, end)));
    } catch (err) {
      result.errors.push(`tool call ${n}: ${err instanceof Error ? err.message : String(err)}`);
    }
    pos = end + close.length;
  }
  outside.push(text.slice(pos));
  result.content = outside.join('').trim();
  return result;
}

function parseJson(body: string): unknown {
  try {
    return JSON.parse(body);
  } catch (err) {
    throw new CallError(`invalid JSON: ${(err as Error).message}`);
  }
}

/** `{"name", "arguments"}`, arguments optional (no-argument tools), possibly JSON-encoded as a string. */
function callFromJson(value: unknown): ParsedToolCall {
  if (!isPlainObject(value)) throw new CallError(`expected an object with "name" and "arguments", got ${describe(value)}`);
  const { name, arguments: args } = value;
  if (typeof name !== 'string' || name === '') throw new CallError('missing "name" (a non-empty string)');
  if (args === undefined) return { name, arguments: {} };
  if (typeof args === 'string') {
    // OpenAI-style APIs send arguments as a JSON string; some models imitate that.
    const decoded = parseJson(args);
    if (!isPlainObject(decoded)) throw new CallError(`"arguments" of ${name} must be an object, got ${describe(decoded)}`);
    return { name, arguments: decoded };
  }
  if (!isPlainObject(args)) throw new CallError(`"arguments" of ${name} must be an object, got ${describe(args)}`);
  return { name, arguments: args };
}

function addJsonCalls(result: ParseResult, text: string, where: string): void {
  let value: unknown;
  try {
    value = parseJson(text);
  } catch (err) {
    result.errors.push(`${where}: ${(err as Error).message}`);
    return;
  }
  const items = Array.isArray(value) ? value : [value];
  items.forEach((item, i) => {
    try {
      result.calls.push(callFromJson(item));
    } catch (err) {
      result.errors.push(`${where}${Array.isArray(value) ? ` item ${i + 1}` : ''}: ${(err as Error).message}`);
    }
  });
}

function parseQwenFunction(body: string): ParsedToolCall {
  const head = /^\s*<function=([^>\n]*)>/.exec(body);
  if (!head) throw new CallError('expected <function=NAME> at the start of the call');
  const name = head[1].trim();
  if (name === '') throw new CallError('empty function name in <function=>');
  const end = body.indexOf('</function>', head[0].length);
  if (end < 0) throw new CallError(`unclosed <function=${name}> (no </function>)`);
  if (body.slice(end + '</function>'.length).trim() !== '') throw new CallError(`unexpected text after </function> in call to ${name}`);

  const args: Record<string, unknown> = {};
  const inner = body.slice(head[0].length, end);
  const param = /<parameter=([^>\n]*)>/g;
  let pos = 0;
  for (let m = param.exec(inner); m; m = param.exec(inner)) {
    if (inner.slice(pos, m.index).trim() !== '') throw new CallError(`unexpected text between parameters of ${name}`);
    const key = m[1].trim();
    if (key === '') throw new CallError(`empty parameter name in call to ${name}`);
    const valueEnd = inner.indexOf('</parameter>', param.lastIndex);
    if (valueEnd < 0) throw new CallError(`unclosed <parameter=${key}> in call to ${name}`);
    // The chat template writes each value on its own lines; those newlines are not part of it.
    args[key] = qwenValue(
      inner
        .slice(param.lastIndex, valueEnd)
        .replace(/^\r?\n/, '')
        .replace(/\r?\n$/, ''),
    );
    pos = valueEnd + '</parameter>'.length;
    param.lastIndex = pos;
  }
  if (inner.slice(pos).trim() !== '') throw new CallError(`unexpected text between parameters of ${name}`);
  return { name, arguments: args };
}

function qwenValue(raw: string): unknown {
  const trimmed = raw.trim();
  // Strings are written raw, so a quoted value keeps its quotes: only numbers, objects, arrays and
  // the JSON literals are decoded.
  if (!/^(?:[-\d[{]|true$|false$|null$)/.test(trimmed)) return raw;
  try {
    return JSON.parse(trimmed);
  } catch {
    return raw;
  }
}

/** Gemma's string delimiter: strings are wrapped in it instead of quotes, so they need no escaping. */
const GEMMA_QUOTE = '<|"|>';

/** Recursive descent over `call:NAME{...}`; throws CallError naming what it expected and where. */
function parseGemmaCall(body: string): ParsedToolCall {
  let pos = 0;
  const fail: (what: string) => never = (what) => {
    const near = body.slice(pos, pos + 20);
    throw new CallError(`${what} at offset ${pos}${near ? ` (near ${JSON.stringify(near)})` : ' (end of call)'}`);
  };
  const skipSpace = () => {
    while (pos < body.length && /\s/.test(body[pos])) pos++;
  };
  const expect = (token: string) => {
    skipSpace();
    if (!body.startsWith(token, pos)) fail(`expected ${JSON.stringify(token)}`);
    pos += token.length;
  };

  const quoted = (): string => {
    pos += GEMMA_QUOTE.length;
    const end = body.indexOf(GEMMA_QUOTE, pos);
    if (end < 0) fail('unterminated <|"|> string');
    const text = body.slice(pos, end);
    pos = end + GEMMA_QUOTE.length;
    return text;
  };
  const key = (): string => {
    skipSpace();
    if (body.startsWith(GEMMA_QUOTE, pos)) return quoted();
    const m = /^"([^"]*)"|^[^\s:,{}[\]]+/.exec(body.slice(pos));
    if (!m) return fail('expected a key');
    pos += m[0].length;
    return m[1] ?? m[0];
  };
  const value = (): unknown => {
    skipSpace();
    if (body.startsWith(GEMMA_QUOTE, pos)) return quoted();
    if (body[pos] === '{') return object();
    if (body[pos] === '[') return array();
    // Bare scalar: number, boolean, null, or (tolerated) an unquoted word.
    const m = /^[^,{}[\]]+/.exec(body.slice(pos));
    if (!m) return fail('expected a value');
    pos += m[0].length;
    const word = m[0].trim();
    if (word === 'true' || word === 'false') return word === 'true';
    if (word === 'null') return null;
    return word !== '' && Number.isFinite(Number(word)) ? Number(word) : word;
  };
  const list = <T>(close: string, item: () => T): T[] => {
    const items: T[] = [];
    pos++;
    skipSpace();
    if (body[pos] === close) {
      pos++;
      return items;
    }
    for (;;) {
      items.push(item());
      skipSpace();
      if (body[pos] === ',') pos++;
      else if (body[pos] === close) {
        pos++;
        return items;
      } else fail(`expected "," or "${close}"`);
    }
  };
  const object = (): Record<string, unknown> =>
    Object.fromEntries(
      list('}', () => {
        const k = key();
        expect(':');
        return [k, value()] as const;
      }),
    );
  const array = (): unknown[] => list(']', value);

  expect('call:');
  const name = /^[\w.-]+/.exec(body.slice(pos))?.[0];
  if (!name) return fail('expected a tool name after "call:"');
  pos += name.length;
  skipSpace();
  if (body[pos] !== '{') fail(`expected "{" after tool name ${name}`);
  const args = object();
  skipSpace();
  if (pos < body.length) fail(`unexpected text after the arguments of ${name}`);
  return { name, arguments: args };
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function describe(value: unknown): string {
  return value === null ? 'null' : Array.isArray(value) ? 'an array' : typeof value;
}

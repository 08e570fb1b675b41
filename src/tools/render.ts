/**
 * The writing side of the tool-call formats that `parsers.ts` reads: how a system prompt tells the
 * model to call a tool, and a call written out exactly as that format's parser reads it back (for
 * format warm-up examples and prompts). Pure.
 */
import type { ParsedToolCall, ToolCallFormat } from './parsers';

const GEMMA_QUOTE = '<|"|>';

/** `call` written in `format`; `parsers[format]` returns it unchanged. */
export function formatToolCall(format: ToolCallFormat, call: ParsedToolCall): string {
  const args = (call.arguments ?? {}) as Record<string, unknown>;
  switch (format) {
    case 'hermes':
      return `<tool_call>${JSON.stringify({ name: call.name, arguments: args })}</tool_call>`;
    case 'json':
      return JSON.stringify({ name: call.name, arguments: args });
    case 'qwen3-coder': {
      const params = Object.entries(args).map(
        ([key, value]) => `<parameter=${key}>\n${typeof value === 'string' ? value : JSON.stringify(value)}\n</parameter>`,
      );
      return `<tool_call><function=${call.name}>${params.join('')}</function></tool_call>`;
    }
    case 'gemma4':
      return `<|tool_call>call:${call.name}${gemmaValue(args)}<tool_call|>`;
  }
}

function gemmaValue(value: unknown): string {
  if (typeof value === 'string') return `${GEMMA_QUOTE}${value}${GEMMA_QUOTE}`;
  if (Array.isArray(value)) return `[${value.map(gemmaValue).join(',')}]`;
  if (typeof value === 'object' && value !== null) {
    return `{${Object.entries(value)
      .map(([key, v]) => `${key}:${gemmaValue(v)}`)
      .join(',')}}`;
  }
  return JSON.stringify(value);
}

/** One line telling the model how to call a tool in `format`. */
export function callInstructions(format: ToolCallFormat): string {
  const example = formatToolCall(format, { name: 'NAME', arguments: { ARG: 'VALUE' } });
  return `To call a tool, write ${example}. When you know the answer, write it without a tool call.`;
}

/** `name(arg: type, arg?: type) - description` from a tool's JSON Schema: shorter than the schema, same facts. */
export function toolSignature(name: string, description: string | undefined, inputSchema: unknown): string {
  const schema = (inputSchema ?? {}) as { properties?: Record<string, { type?: unknown }>; required?: string[] };
  const required = new Set(schema.required ?? []);
  const args = Object.entries(schema.properties ?? {}).map(
    ([arg, prop]) => `${arg}${required.has(arg) ? '' : '?'}: ${typeof prop?.type === 'string' ? prop.type : 'any'}`,
  );
  return `${name}(${args.join(', ')})${description ? ` - ${description}` : ''}`;
}

/** The system prompt's tool section: one signature a line, then how to call them. */
export function toolSection(format: ToolCallFormat, signatures: readonly string[]): string {
  return ['Tools:', ...signatures, callInstructions(format)].join('\n');
}

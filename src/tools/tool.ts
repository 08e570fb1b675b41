/**
 * Tools an agent's model can call: a name, a description and a zod schema for the arguments (the
 * model reads the schema as JSON Schema), plus the code that runs the call.
 *
 * Everything here turns model mistakes and tool failures into result strings the model can read
 * (unknown tool, bad arguments, thrown error, timeout): an episode never crashes on a tool call.
 */
import { z } from 'zod';
import { describeIssuesInline } from '../core/issues';
import type { Rng } from '../core/random';
import type { ParsedToolCall } from './parsers';
import { tracer } from '../trace/recorder';

export interface ToolContext {
  /** Aborted when the call times out or its caller cancels it; long-running tools should stop. */
  signal: AbortSignal;
}

export interface Tool<S extends z.ZodType = z.ZodType> {
  name: string;
  description: string;
  input: S;
  // Method syntax on purpose: it keeps Tool<SpecificSchema> assignable to Tool, so tools with
  // different schemas fit in one list.
  run(args: z.output<S>, ctx: ToolContext): Promise<string> | string;
  /** Overrides the caller's default timeout for this tool. */
  timeoutMs?: number;
  /**
   * Plausible arguments drawn at random, for format warm-up examples: they show how a call looks,
   * never what a task needs.
   */
  example?(rng: Rng): z.input<S>;
}

/** Identity, there so `run` gets its argument type from the schema. */
export function defineTool<S extends z.ZodType>(tool: Tool<S>): Tool<S> {
  return tool;
}

/**
 * The function description models are prompted with (OpenAI-style `parameters` JSON Schema). The
 * schema's input side: arguments with defaults are optional to the model.
 */
export function toolJsonSchema(tool: Tool): { name: string; description: string; parameters: unknown } {
  return { name: tool.name, description: tool.description, parameters: z.toJSONSchema(tool.input, { io: 'input' }) };
}

export type ValidatedToolCall = { ok: true; tool: Tool; args: unknown } | { ok: false; error: string };

/** Finds the called tool and checks the arguments against its schema. */
export function validateToolCall(call: ParsedToolCall, tools: readonly Tool[]): ValidatedToolCall {
  const tool = tools.find((t) => t.name === call.name);
  if (!tool) {
    const known = tools.map((t) => t.name).join(', ') || '(none)';
    return { ok: false, error: `unknown tool ${JSON.stringify(call.name)}; known tools: ${known}` };
  }
  const parsed = tool.input.safeParse(call.arguments);
  if (!parsed.success) {
    return { ok: false, error: `invalid arguments for tool ${JSON.stringify(tool.name)}: ${describeIssuesInline(parsed.error.issues, '(arguments)')}` };
  }
  return { ok: true, tool, args: parsed.data };
}

/** Why the tool was abandoned (timeout or cancel), told apart from errors the tool threw. */
class ToolStopped extends Error {}

export type ToolResult = { ok: true; output: string } | { ok: false; error: string };

export interface RunToolOptions {
  /** Used for tools without their own `timeoutMs`. */
  defaultTimeoutMs: number;
  /** Cancels the call from outside (the episode ends); the tool's signal is aborted with it. */
  signal?: AbortSignal;
}

/**
 * Validates and runs one call. Resolves with the tool's output or an error message, never rejects:
 * a tool that hangs is abandoned after its timeout (its signal aborted, so a well-behaved tool
 * stops) and one that throws becomes an error result.
 */
export function runToolCall(call: ParsedToolCall, tools: readonly Tool[], options: RunToolOptions): Promise<ToolResult> {
  // A trace span per tool call (inside the env step that made it, when traced).
  return tracer.span('tool', { tool: call.name }, async (span) => {
    const result = await runToolCallUntraced(call, tools, options);
    if (!result.ok) span.set({ ok: false });
    return result;
  });
}

async function runToolCallUntraced(call: ParsedToolCall, tools: readonly Tool[], options: RunToolOptions): Promise<ToolResult> {
  const validated = validateToolCall(call, tools);
  if (!validated.ok) return validated;
  const { tool, args } = validated;
  const timeoutMs = tool.timeoutMs ?? options.defaultTimeoutMs;
  const name = JSON.stringify(tool.name);

  const controller = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  let onCancel: (() => void) | undefined;
  const stopped = new Promise<never>((_, reject) => {
    const stop = (message: string) => {
      controller.abort(new Error(message));
      reject(new ToolStopped(message));
    };
    timer = setTimeout(() => stop(`tool ${name} timed out after ${timeoutMs} ms`), timeoutMs);
    onCancel = () => stop(`tool ${name} was cancelled`);
    if (options.signal?.aborted) onCancel();
    else options.signal?.addEventListener('abort', onCancel, { once: true });
  });
  try {
    // Through a promise so a synchronous throw is caught like an async one.
    const output = await Promise.race([Promise.resolve().then(() => tool.run(args, { signal: controller.signal })), stopped]);
    if (typeof output !== 'string') return { ok: false, error: `tool ${name} returned ${typeof output}, not a string` };
    return { ok: true, output };
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    return { ok: false, error: err instanceof ToolStopped ? message : `tool ${name} failed: ${message}` };
  } finally {
    clearTimeout(timer);
    if (onCancel) options.signal?.removeEventListener('abort', onCancel);
  }
}

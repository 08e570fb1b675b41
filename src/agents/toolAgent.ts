/**
 * An agent that uses tools: its system prompt lists the tools (from their zod schemas) and how to
 * call them in the chosen format; it reads tool calls out of the model's raw text with that
 * format's parser; an answer without calls is the final answer. Tool results come back to the
 * model as `tool` messages. A call it cannot read becomes an error message to the model, and the
 * environment (ToolEnvironment) turns unknown tools, bad arguments and tool failures into results
 * the model reads, so no model output ends an episode by crashing it.
 */
import { z } from 'zod';
import type { Rng } from '../core/random';
import type { ChatMessage } from '../core/tokenizer';
import type { TaskObservation } from '../envs/taskEnvironment';
import type { ToolAction } from '../envs/toolEnvironment';
import { getToolCallParser, type ToolCallFormat, type ToolCallParser } from '../tools/parsers';
import { formatToolCall, toolSection, toolSignature } from '../tools/render';
import type { Tool } from '../tools/tool';
import { ConversationalAgent, type History, type ParsedAction } from './agent';

export interface ToolAgentOptions {
  tools: readonly Tool[];
  format: ToolCallFormat;
  /** What the agent is for; the tool list and calling instructions follow it. */
  instructions: string;
  history?: History;
}

export class ToolAgent extends ConversationalAgent<TaskObservation, ToolAction> {
  private readonly tools: readonly Tool[];
  private readonly format: ToolCallFormat;
  private readonly parse: ToolCallParser;
  private readonly instructions: string;

  constructor({ tools, format, instructions, history = 'full' }: ToolAgentOptions) {
    super(history);
    this.tools = tools;
    this.format = format;
    this.parse = getToolCallParser(format);
    this.instructions = instructions;
  }

  systemPrompt(): string {
    return [this.instructions, toolSection(this.format, this.tools.map(signature))].join('\n');
  }

  observationMessages(observation: TaskObservation): ChatMessage[] {
    switch (observation.kind) {
      case 'task':
        return [{ role: 'user', content: observation.prompt }];
      case 'tool_results':
        return observation.results.map((r) => ({ role: 'tool', content: r.ok ? r.content : `error: ${r.content}` }));
      case 'done':
        return [];
    }
  }

  parseResponse(text: string): ParsedAction<ToolAction> {
    const { calls, errors, content } = this.parse(text);
    if (errors.length > 0) return { ok: false, error: errors.join('; ') };
    if (calls.length > 0) return { ok: true, action: { toolCalls: calls } };
    return content === '' ? { ok: false, error: 'empty answer' } : { ok: true, action: { answer: content } };
  }

  override invalidResponseMessages(error: string): ChatMessage[] {
    return [{ role: 'user', content: `Could not read your tool call: ${error}` }];
  }

  /**
   * Warm-up examples: on the task, a call of a random tool with random example arguments; after
   * tool results, the last successful result as the answer. They teach the call format and the call-then-
   * answer rhythm; the arguments have nothing to do with the task, so they teach no solution.
   */
  formatExample(observation: TaskObservation, rng: Rng): string {
    if (observation.kind === 'tool_results') {
      const last = observation.results.filter((r) => r.ok).at(-1);
      return last?.content.split('\n')[0].trim() || 'done';
    }
    const withExamples = this.tools.filter((tool) => tool.example);
    if (withExamples.length === 0) throw new Error(`no tool has example arguments for format warm-up (tools: ${this.tools.map((t) => t.name).join(', ')})`);
    const tool = withExamples[Math.floor(rng() * withExamples.length)];
    return formatToolCall(this.format, { name: tool.name, arguments: tool.example!(rng) });
  }
}

function signature(tool: Tool): string {
  return toolSignature(tool.name, tool.description, z.toJSONSchema(tool.input, { io: 'input' }));
}

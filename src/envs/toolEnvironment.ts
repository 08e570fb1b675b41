/**
 * A multi-turn task with tools: the model calls tools (each call validated against the tool's zod
 * schema and run with a timeout) and reads their results, until it gives a final answer, which is
 * scored. Tool failures of every kind come back as results the model reads; none ends the episode.
 */
import { runToolCall, type Tool } from '../tools/tool';
import type { ParsedToolCall } from '../tools/parsers';
import type { StepResult } from './environment';
import { BaseEnvironment } from './environment';
import { finalStep, scoreAnswer, type AnswerScorer, type Task, type TaskObservation, type ToolResultRecord } from './taskEnvironment';

/** What a tool-using agent does in a turn: call tools, or answer (the finish action). */
export type ToolAction = { toolCalls: ParsedToolCall[] } | { answer: string };

export interface ToolEnvironmentOptions<T extends Task> {
  task: T;
  tools: readonly Tool[];
  scorer: AnswerScorer<T>;
  /** What the agent is asked to do in general (a tool agent puts it first in its system prompt). */
  instructions?: string;
  /** For tools without their own timeout (default 10 s). */
  toolTimeoutMs?: number;
  /** Calls run per turn; extra ones get an error result (default 4). */
  maxCallsPerTurn?: number;
}

export class ToolEnvironment<T extends Task = Task> extends BaseEnvironment<TaskObservation, ToolAction> {
  readonly task: T;
  readonly tools: readonly Tool[];
  readonly instructions?: string;
  private readonly scorer: AnswerScorer<T>;
  private readonly toolTimeoutMs: number;
  private readonly maxCallsPerTurn: number;

  constructor(options: ToolEnvironmentOptions<T>) {
    super();
    this.task = options.task;
    this.tools = options.tools;
    this.instructions = options.instructions;
    this.scorer = options.scorer;
    this.toolTimeoutMs = options.toolTimeoutMs ?? 10_000;
    this.maxCallsPerTurn = options.maxCallsPerTurn ?? 4;
  }

  reset(): TaskObservation | Promise<TaskObservation> {
    return { kind: 'task', prompt: this.task.prompt };
  }

  async step(action: ToolAction): Promise<StepResult<TaskObservation>> {
    if ('answer' in action) return finalStep(await this.score(action.answer));
    const results: ToolResultRecord[] = [];
    // One at a time, in the order written: later calls may depend on what earlier ones changed.
    for (const [i, call] of action.toolCalls.entries()) {
      if (i >= this.maxCallsPerTurn) {
        results.push({ name: call.name, ok: false, content: `not run: at most ${this.maxCallsPerTurn} tool calls per turn` });
        continue;
      }
      const result = await runToolCall(call, this.tools, { defaultTimeoutMs: this.toolTimeoutMs });
      results.push({ name: call.name, ok: result.ok, content: result.ok ? result.output : result.error });
    }
    const failed = results.filter((r) => !r.ok).length;
    return { observation: { kind: 'tool_results', results }, reward: 0, done: false, info: { toolCalls: results.length, toolErrors: failed } };
  }

  /** The final answer's reward; environments with more to check (files, state) override this. */
  protected score(answer: string): Promise<number> {
    return scoreAnswer(this.scorer, this.task, answer);
  }
}

/**
 * An agent written as a Temporal workflow of its own (with the AI SDK through `@temporalio/ai-sdk`),
 * trained as it is. Its trajectory (workflows/trajectory/agentWorkflow.ts) hands the task's prompt
 * to that workflow and the workflow's answer back to the environment; this class is the
 * environment's side of it: the task as the prompt, the answer as the final action.
 */
import { z } from 'zod';
import type { ChatMessage } from '../core/tokenizer';
import type { Environment } from '../envs/environment';
import type { TaskObservation } from '../envs/taskEnvironment';
import { ToolEnvironment, type ToolAction } from '../envs/toolEnvironment';
import { TOOL_CALL_FORMATS } from '../tools/parsers';
import { ConversationalAgent, type History, type ParsedAction } from './agent';

export const WorkflowAgentOptionsSchema = z.strictObject({
  /** The agent's workflow type: it takes the task's prompt (a string) and returns its answer (a string, or an object with `text`). */
  workflowType: z.string().min(1),
  /** The task queue its worker polls; default `<temporal.taskQueuePrefix>-agents`. */
  taskQueue: z.string().min(1).optional(),
  /**
   * The module of the agent's workflows (relative to the config file), for trajflow to run them in
   * a worker of its own; leave it out when the team's own worker polls `taskQueue` (with trajflow's
   * agent plugin).
   */
  workflows: z.string().min(1).optional(),
  /** With `workflows`: a module whose exports are the agent's activities (its tools), relative to the config file. */
  activities: z.string().min(1).optional(),
  /** How the model writes tool calls (and the parser that reads them); the tools' signatures join the system prompt. */
  toolCallFormat: z.enum(TOOL_CALL_FORMATS as [string, ...string[]]).default('hermes'),
});

export type WorkflowAgentOptions = z.output<typeof WorkflowAgentOptionsSchema>;

export class WorkflowAgent extends ConversationalAgent<TaskObservation, ToolAction | string> {
  constructor(
    private readonly environment: Environment,
    history: History,
  ) {
    super(history);
  }

  /** The agent's workflow writes its own system prompt. */
  systemPrompt(): string {
    return '';
  }

  observationMessages(observation: TaskObservation): ChatMessage[] {
    return observation.kind === 'task' ? [{ role: 'user', content: observation.prompt }] : [];
  }

  parseResponse(text: string): ParsedAction<ToolAction | string> {
    const answer = text.trim();
    if (answer === '') return { ok: false, error: 'the agent workflow answered nothing' };
    return { ok: true, action: this.environment instanceof ToolEnvironment ? { answer } : answer };
  }
}

/**
 * An agent that runs its own loop, trained as it is: a Temporal workflow of its own (with the AI
 * SDK through `@temporalio/ai-sdk`, workflows/trajectory/agentWorkflow.ts) or a program calling
 * trajflow's OpenAI-compatible endpoint (workflows/trajectory/agentProgram.ts). Its trajectory
 * hands it the task's prompt and its answer back to the environment; this class is the
 * environment's side of it: the task as the prompt, the answer as the final action.
 */
import type { ChatMessage } from '../core/tokenizer';
import type { Environment } from '../envs/environment';
import type { TaskObservation } from '../envs/taskEnvironment';
import { ToolEnvironment, type ToolAction } from '../envs/toolEnvironment';
import { ConversationalAgent, type History, type ParsedAction } from './agent';

export class ExternalAgent extends ConversationalAgent<TaskObservation, ToolAction | string> {
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

  /** Whatever the agent's workflow answered, an empty answer too, is its answer: the reward judges it. */
  parseResponse(text: string): ParsedAction<ToolAction | string> {
    const answer = text.trim();
    return { ok: true, action: this.environment instanceof ToolEnvironment ? { answer } : answer };
  }
}

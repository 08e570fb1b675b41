/** The simplest agent: one turn, and the model's whole answer is the action (for TaskEnvironment). */
import type { ChatMessage } from '../core/tokenizer';
import type { TaskObservation } from '../envs/taskEnvironment';
import { ConversationalAgent, type History, type ParsedAction } from './agent';

export class ModelAgent extends ConversationalAgent<TaskObservation, string> {
  constructor(
    private readonly instructions: string,
    history: History = 'full',
  ) {
    super(history);
  }

  systemPrompt(): string {
    return this.instructions;
  }

  observationMessages(observation: TaskObservation): ChatMessage[] {
    return observation.kind === 'task' ? [{ role: 'user', content: observation.prompt }] : [];
  }

  parseResponse(text: string): ParsedAction<string> {
    const answer = text.trim();
    return answer === '' ? { ok: false, error: 'empty answer' } : { ok: true, action: answer };
  }
}

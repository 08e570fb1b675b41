/**
 * What the model is shown next, for either history mode: shared by the trajectory workflow and the
 * in-process evaluation so both present exactly the same conversation. Pure.
 */
import type { ChatMessage } from '../core/tokenizer';
import type { AgentLogic } from './registry';

export type History = 'full' | 'none';

/** The messages of the next turn and whether they start a fresh context. */
export interface NextTurn {
  messages: ChatMessage[];
  freshContext: boolean;
}

/** System prompt and the current observation: the first turn, and every turn without history. */
export function openingMessages(agent: AgentLogic<unknown, unknown>, observation: unknown): ChatMessage[] {
  return [
    { role: 'system', content: agent.systemPrompt },
    { role: 'user', content: agent.renderObservation(observation) },
  ];
}

/** After a step: the new observation, appended (full) or in a fresh context (none). */
export function afterStep(agent: AgentLogic<unknown, unknown>, history: History, observation: unknown): NextTurn {
  return history === 'full'
    ? { messages: [{ role: 'user', content: agent.renderObservation(observation) }], freshContext: false }
    : { messages: openingMessages(agent, observation), freshContext: true };
}

/**
 * After an answer that did not parse: with history, the reason; without, the same state again,
 * since the model could not see the answer a message would be about.
 */
export function afterInvalidAnswer(agent: AgentLogic<unknown, unknown>, history: History, observation: unknown, error: string): NextTurn {
  return history === 'full'
    ? { messages: [{ role: 'user', content: agent.invalidActionMessage(error) }], freshContext: false }
    : { messages: openingMessages(agent, observation), freshContext: true };
}

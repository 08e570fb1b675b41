/**
 * Agents by name. An agent is pure conversation logic (what the model reads, how its answer
 * becomes an action), so it runs inside the workflow sandbox with no activity round trip.
 */
import * as frozenlake from './frozenlakeAgent';

export type ParsedAction<Act> = { ok: true; action: Act; name: string } | { ok: false; error: string };

export interface AgentLogic<Obs, Act> {
  systemPrompt: string;
  renderObservation(observation: Obs): string;
  parseAction(text: string): ParsedAction<Act>;
  /** What the model is told when its answer did not parse; the episode goes on. */
  invalidActionMessage(error: string): string;
}

const AGENTS = {
  frozenlake: {
    systemPrompt: frozenlake.FROZENLAKE_SYSTEM_PROMPT,
    renderObservation: frozenlake.renderObservation,
    parseAction: frozenlake.parseAction,
    invalidActionMessage: frozenlake.invalidActionMessage,
  },
} satisfies Record<string, AgentLogic<never, number>>;

export function getAgent(name: string): AgentLogic<unknown, unknown> {
  const agent = (AGENTS as Record<string, AgentLogic<never, unknown>>)[name];
  if (!agent) throw new Error(`unknown agent ${JSON.stringify(name)}; known agents: ${Object.keys(AGENTS).join(', ')}`);
  return agent as AgentLogic<unknown, unknown>;
}

/**
 * What a plugin provides and receives: the definitions of agents, and the API a plugin module's
 * `register(trajflow)` is called with. Types only, so the built-ins (./builtins) name them without
 * importing the registry, which registers the built-ins as it loads. The environment side of the
 * API lives below, in src/envs/definition, for environment modules to name.
 */
import type { z } from 'zod';
import type { ConversationalAgent, History } from '../agents/agent';
import type { EnvironmentRegistrar } from '../envs/definition';
import type { Environment } from '../envs/environment';
import type { registerReward } from '../rewards/registry';

export type { EnvironmentContext, EnvironmentDefinition, EnvironmentRegistrar, InstancePool } from '../envs/definition';

export interface AgentContext {
  history: History;
  /** The environment the agent will play (a tool agent takes its tools from it). */
  environment: Environment;
}

export interface AgentDefinition<S extends z.ZodType = z.ZodType> {
  /** Validates the agent section, less `name`, `maxTurns`, `history`, `episodeTimeoutS` and `maxTurnTextBytes`. */
  options: S;
  create(options: z.output<S>, context: AgentContext): ConversationalAgent;
}

/** What a plugin module's `register` function receives. */
export interface PluginApi extends EnvironmentRegistrar {
  registerAgent<S extends z.ZodType>(name: string, definition: AgentDefinition<S>): void;
  registerReward: typeof registerReward;
}

/**
 * What a plugin provides and receives: the definitions of environments and agents, and the API a
 * plugin module's `register(trajflow)` is called with. Types only, so environments and agents can
 * name them without importing the registry that creates them.
 */
import type { z } from 'zod';
import type { ConversationalAgent, History } from '../agents/agent';
import type { Environment } from '../envs/environment';
import type { registerReward } from '../rewards/registry';
import type { Tool } from '../tools/tool';

/** Which instances an environment draws: training ones, or only its held-out evaluation ones. */
export type InstancePool = 'train' | 'eval';

export interface EnvironmentContext {
  /** Seeds the instance (task, map, randomness): the same seed must give the same episode. */
  seed: number;
  pool: InstancePool;
  /** Registered tools by name; unknown names throw, listing the known ones. */
  tools(names: readonly string[]): Tool[];
}

export interface EnvironmentDefinition<S extends z.ZodType = z.ZodType> {
  /** Validates (and fills defaults of) the env section, less `name`, `turnTimeoutS`, `sessions` and `sessionLostAfterS`. */
  options: S;
  // Method syntax keeps definitions with different option types assignable to the base type.
  create(options: z.output<S>, context: EnvironmentContext): Environment;
  /** A short label for the Web UI and logs, e.g. `frozenlake-4x4-classic`; default: the name. */
  describe?(options: z.output<S>): string;
  /**
   * For environments that confine code (a sandbox): how strongly this machine does, one line,
   * logged at env worker start and shown in each trajectory's details; throws where the machine
   * cannot confine it as the options require.
   */
  isolation?(options: z.output<S>): string;
}

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
export interface PluginApi {
  registerEnvironment<S extends z.ZodType>(name: string, definition: EnvironmentDefinition<S>): void;
  registerAgent<S extends z.ZodType>(name: string, definition: AgentDefinition<S>): void;
  registerTool(tool: Tool): void;
  registerReward: typeof registerReward;
}

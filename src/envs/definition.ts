/**
 * What an environment plugin provides (its options schema and factory) and the part of the plugin
 * API an environment module registers itself with. They live here, below plugins/, so that an
 * environment module names them without importing the registry, which imports the built-in
 * environments to register them.
 */
import type { z } from 'zod';
import type { Tool } from '../tools/tool';
import type { Environment } from './environment';

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

/** The registration functions an environment module calls: its environments and the tools they offer. */
export interface EnvironmentRegistrar {
  registerEnvironment<S extends z.ZodType>(name: string, definition: EnvironmentDefinition<S>): void;
  registerTool(tool: Tool): void;
}

/**
 * Registries: configs pick environments, agents, tools and rewards by name. The registry starts
 * with the built-ins (registered once, below: the one place they are registered); users add their own from modules the config names (`modules:`), each
 * exporting `register(trajflow)` that calls the functions of `PluginApi`.
 *
 * An unknown name is an error that lists the known ones; options are validated with the
 * definition's zod schema, and errors name the config path (`env.digits: ...`).
 */
import { z } from 'zod';
import type { AgentConfig, EnvConfig } from '../../config/schema';
import { describeIssues, fieldPath } from '../core/issues';
import type { ConversationalAgent } from '../agents/agent';
import type { Environment } from '../envs/environment';
import { registerReward } from '../rewards/registry';
import type { Tool } from '../tools/tool';
import { registerBuiltins } from './builtins';
import type { AgentDefinition, EnvironmentDefinition, InstancePool, PluginApi } from './types';

export type { AgentContext, AgentDefinition, EnvironmentContext, EnvironmentDefinition, EnvironmentRegistrar, InstancePool, PluginApi } from './types';

/** Config keys every env section has, handled by trajflow rather than the environment. */
const ENV_KEYS = ['name', 'turnTimeoutS', 'sessions', 'sessionLostAfterS'] as const;
/** Config keys every agent section has, handled by trajflow rather than the agent. */
const AGENT_KEYS = ['name', 'maxTurns', 'history', 'episodeTimeoutS', 'maxTurnTextBytes'] as const;

const environments = new Map<string, EnvironmentDefinition>();
const agents = new Map<string, AgentDefinition>();
const tools = new Map<string, Tool>();

function add<T>(kind: string, map: Map<string, T>, name: string, value: T): void {
  if (!/^[A-Za-z0-9_.-]+$/.test(name)) throw new Error(`${kind} name ${JSON.stringify(name)}: letters, digits, _ . - only`);
  if (map.has(name)) throw new Error(`${kind} ${JSON.stringify(name)} is already registered`);
  map.set(name, value);
}

export const pluginApi: PluginApi = {
  registerEnvironment: (name, definition) => add('environment', environments, name, definition as EnvironmentDefinition),
  registerAgent: (name, definition) => add('agent', agents, name, definition as AgentDefinition),
  registerTool: (tool) => add('tool', tools, tool.name, tool),
  registerReward,
};

registerBuiltins(pluginApi);

function lookup<T>(kind: string, map: Map<string, T>, name: string): T {
  const value = map.get(name);
  if (value === undefined) throw new Error(`unknown ${kind} ${JSON.stringify(name)}; known ${kind}s: ${[...map.keys()].sort().join(', ') || '(none)'}`);
  return value;
}

export function getTool(name: string): Tool {
  return lookup('tool', tools, name);
}

export function getTools(names: readonly string[]): Tool[] {
  return names.map(getTool);
}

/** A config section's validation failure, with paths relative to the whole config. */
export class OptionsError extends Error {
  constructor(readonly problems: string[]) {
    super(problems.join('; '));
    this.name = 'OptionsError';
  }
}

function parseOptions<S extends z.ZodType>(section: string, schema: S, raw: Record<string, unknown>, generic: readonly string[]): z.output<S> {
  const own = Object.fromEntries(Object.entries(raw).filter(([key]) => !generic.includes(key)));
  const parsed = schema.safeParse(own);
  if (!parsed.success) {
    throw new OptionsError(describeIssues(parsed.error.issues, [section]));
  }
  return parsed.data;
}

/**
 * The env section with its options validated and defaults filled in (config loading). By
 * convention an option named `tools` lists registered tool names; each must exist.
 */
export function validateEnvConfig(config: EnvConfig): EnvConfig {
  const definition = lookup('environment', environments, config.name);
  const options = parseOptions('env', definition.options, config, ENV_KEYS) as Record<string, unknown>;
  if (Array.isArray(options.tools)) {
    const problems = options.tools.flatMap((name, i) =>
      typeof name === 'string' && tools.has(name)
        ? []
        : [`${fieldPath(['env', 'tools', i], '')}: unknown tool ${JSON.stringify(name)}; known tools: ${[...tools.keys()].sort().join(', ')}`],
    );
    if (problems.length > 0) throw new OptionsError(problems);
  }
  return { ...pick(config, ENV_KEYS), ...options } as EnvConfig;
}

/** The agent section with its options validated and defaults filled in (config loading). */
export function validateAgentConfig(config: AgentConfig): AgentConfig {
  const definition = lookup('agent', agents, config.name);
  return { ...pick(config, AGENT_KEYS), ...(parseOptions('agent', definition.options, config, AGENT_KEYS) as object) } as AgentConfig;
}

function pick<T extends object>(config: T, keys: readonly string[]): Partial<T> {
  return Object.fromEntries(Object.entries(config).filter(([key]) => keys.includes(key))) as Partial<T>;
}

export function createEnvironment(config: EnvConfig, seed: number, pool: InstancePool = 'train'): Environment {
  const definition = lookup('environment', environments, config.name);
  return definition.create(parseOptions('env', definition.options, config, ENV_KEYS), { seed, pool, tools: getTools });
}

export function createAgent(config: AgentConfig, environment: Environment): ConversationalAgent {
  const definition = lookup('agent', agents, config.name);
  return definition.create(parseOptions('agent', definition.options, config, AGENT_KEYS), { history: config.history, environment });
}

/** How this machine confines the environment's code (undefined: it does not); throws where it cannot as configured. */
export function environmentIsolation(config: EnvConfig): string | undefined {
  const definition = lookup('environment', environments, config.name);
  return definition.isolation?.(parseOptions('env', definition.options, config, ENV_KEYS));
}

/** The environment's label for the Web UI and logs. */
export function describeEnvironment(config: EnvConfig): string {
  const definition = lookup('environment', environments, config.name);
  return definition.describe?.(parseOptions('env', definition.options, config, ENV_KEYS)) ?? config.name;
}

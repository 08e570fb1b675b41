/**
 * trajflow's public API: what a plugin module (`modules:` in a config) or an embedding program
 * uses to bring its own environments, agents, tools and rewards. See docs/plugins.md.
 */
export type { AgentConfig, EnvConfig, RunConfig } from '../config/schema';
export { ConfigError, loadRunConfig, parseRunConfig } from '../src/runConfig';

export { BaseEnvironment, type Environment, type StepResult } from './envs/environment';
export { RewardError, scoreAnswer, TaskEnvironment, type AnswerScorer, type Task, type TaskObservation, type ToolResultRecord } from './envs/taskEnvironment';
export { ToolEnvironment, type ToolAction, type ToolEnvironmentOptions } from './envs/toolEnvironment';
export { GymnasiumAdapter, type GymnasiumLike } from './envs/gymnasium';

export { ConversationalAgent, type History, type NextTurn, type ParsedAction } from './agents/agent';
export { ModelAgent } from './agents/modelAgent';
export { ToolAgent, type ToolAgentOptions } from './agents/toolAgent';
export { Episode, EpisodeError, type TurnOutcome } from './episode/episode';

export { defineTool, runToolCall, toolJsonSchema, type Tool, type ToolContext, type ToolResult } from './tools/tool';
export { getToolCallParser, TOOL_CALL_FORMATS, type ParsedToolCall, type ToolCallFormat } from './tools/parsers';
export { callInstructions, formatToolCall } from './tools/render';

export { registerReward, scoreReward, type RewardDefinition, type RewardInput, type RewardSpec } from './rewards/registry';
export {
  createAgent,
  createEnvironment,
  pluginApi,
  type AgentContext,
  type AgentDefinition,
  type EnvironmentContext,
  type EnvironmentDefinition,
  type EnvironmentRegistrar,
  type InstancePool,
  type PluginApi,
} from './plugins/registry';
export { AGENT_MODEL_CALLS_INTERCEPTOR, TrajflowAgentPlugin } from './agentCalls/plugin';

/**
 * What a model call of an agent's own workflow needs from its trajflow run, and how it gets there
 * without the agent's code passing it: trajflow starts the workflow with this context in its memo
 * (key AGENT_CALL_MEMO); trajflow's workflow interceptor, in the worker that runs the agent
 * (workflows/agentModelCalls.ts), adds it to each AI SDK model activity and sends that activity to
 * the run's inference queue, where trajflow samples, records and answers it.
 */
import type { SamplingConfig } from '../../config/schema';
import type { Compatibility } from './compatibility';

/** The registered name (`agent.name`) of agents written as workflows of their own. */
export const WORKFLOW_AGENT = 'workflow';

/** The registered name of agents that are programs calling trajflow's OpenAI-compatible endpoint. */
export const PROGRAM_AGENT = 'program';

/** The failure type of a model call past `agent.maxTurns`: not retried, and its trajectory ends `max_turns`. */
export const MODEL_CALL_LIMIT = 'ModelCallLimit';

/** The memo key of an agent workflow that trajflow started. */
export const AGENT_CALL_MEMO = 'trajflow';

/** The AI SDK's model activities (`@temporalio/ai-sdk`), which trajflow serves for the agents it trains. */
export const AI_SDK_MODEL_ACTIVITIES: readonly string[] = ['invokeModel', 'invokeModelStreaming'];

export interface AgentCallContext {
  runId: string;
  runSeed: number;
  /** The trajectory the agent's model calls are turns of. */
  trajectoryId: string;
  /** The run's sampling: it wins over what the agent's code asks for. */
  sampling: SamplingConfig;
  /** In a training run: the weights every call samples with (as a trajflow trajectory's turns). */
  policy?: { runId: string; minVersion: number; followLatest: boolean };
  compatibility?: Compatibility;
  /** How the model writes tool calls, and the parser that reads them (src/tools/parsers). */
  toolCallFormat: string;
  /** Most model calls of one trajectory (`agent.maxTurns`). */
  maxCalls: number;
  /** Where the model calls run: the run's inference queue. */
  inferenceQueue: string;
}

/** The task queue an agent's workflows run on: the one its config names, else one beside the run's workflow queue. */
export function agentTaskQueue(configured: string | undefined, workflowsQueue: string): string {
  return configured ?? `${workflowsQueue}-agents`;
}

/**
 * Agent worker: polls the agent task queue (`agent.taskQueue`, by default beside the run's
 * workflow queue) and runs the agent's own workflows (`agent.workflows`) and activities
 * (`agent.activities`), for runs whose agent is a workflow that trajflow hosts (`agent.name:
 * workflow`). `AiSdkPlugin` bundles the AI SDK into the workflow sandbox; trajflow's plugin sends
 * the workflows' model calls to the run's inference queue. A team whose own worker polls the
 * queue adds the same two plugins there instead, and leaves `agent.workflows` out.
 */
import type { LanguageModelV4, ProviderV4 } from '@ai-sdk/provider';
import { ApplicationFailure } from '@temporalio/common';
import { Worker } from '@temporalio/worker';
import type { RunConfig } from '../config/schema';
import type { WorkflowAgentOptions } from '../src/plugins/builtins';
import { TrajflowAgentPlugin } from '../src/agentCalls/plugin';
import { agentTaskQueue, WORKFLOW_AGENT } from '../src/core/agentCallContext';
import type { WorkerConnection } from '../src/temporal/connection';
import { taskQueuesOf, type QueueScopedConfig } from './taskQueues';

/** The agent worker of a config whose agent is a workflow trajflow hosts, else undefined. */
export async function createAgentWorker(config: QueueScopedConfig & Pick<RunConfig, 'agent'>, temporal: WorkerConnection): Promise<Worker | undefined> {
  if (config.agent.name !== WORKFLOW_AGENT) return undefined;
  const agent = config.agent as RunConfig['agent'] & WorkflowAgentOptions;
  if (agent.workflows === undefined) return undefined;
  // Loaded here: the AI SDK is large, and only runs of such agents need it.
  const { AiSdkPlugin } = await import('@temporalio/ai-sdk');
  return Worker.create({
    ...temporal,
    taskQueue: agentTaskQueue(agent.taskQueue, taskQueuesOf(config).workflows),
    workflowsPath: agent.workflows,
    // The team's module, named by the config as plugin modules are: CommonJS, loaded as they are.
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    activities: agent.activities === undefined ? {} : (require(agent.activities) as object),
    plugins: [new AiSdkPlugin({ modelProvider: NO_OTHER_MODEL }), new TrajflowAgentPlugin()],
  });
}

/**
 * This worker runs only workflows that trajflow starts, whose model calls trajflow's plugin sends
 * to the inference queue; a call that reaches this provider came from a workflow started elsewhere.
 */
const NO_OTHER_MODEL: ProviderV4 = {
  specificationVersion: 'v4',
  languageModel(modelId: string): LanguageModelV4 {
    return {
      specificationVersion: 'v4',
      provider: 'trajflow',
      modelId,
      supportedUrls: {},
      doGenerate: refuse,
      doStream: refuse,
    };
  },
  embeddingModel: refuse,
  imageModel: refuse,
};

function refuse(): never {
  throw ApplicationFailure.nonRetryable(
    "trajflow's agent worker serves model calls only for workflows a trajflow run starts (their memo holds the run's context)",
  );
}

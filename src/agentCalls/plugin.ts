/**
 * trajflow's Temporal plugin for a worker that runs agents written with the AI SDK: add it beside
 * `@temporalio/ai-sdk`'s `AiSdkPlugin` and the workflows that a trajflow run starts send their model
 * calls to the run's inference workers, which sample, record and answer them as turns of their
 * trajectory; every other workflow's model calls go to the worker's own provider as before. The
 * agent's code does not change: the run's context travels in the workflow's memo
 * (src/core/agentCallContext.ts).
 */
import { SimplePlugin } from '@temporalio/plugin';

/** The workflow interceptor module that routes the model calls (bundled into the agent's workflows). */
export const AGENT_MODEL_CALLS_INTERCEPTOR = require.resolve('../../workflows/agentModelCalls');

export class TrajflowAgentPlugin extends SimplePlugin {
  constructor() {
    super({ name: 'trajflow-agents', workerInterceptors: { workflowModules: [AGENT_MODEL_CALLS_INTERCEPTOR] } });
  }
}

/**
 * Workflow interceptor module for the worker that runs an agent's own workflows (trajflow's agent
 * worker, or the team's worker with trajflow's plugin): in a workflow that a trajflow run started
 * (its memo holds the run's context, src/core/agentCallContext.ts), each AI SDK model activity is
 * sent to the run's inference queue with that context added to its argument. trajflow samples,
 * records and answers it there (activities/agentModel.ts). Workflows trajflow did not start are
 * left alone: their model calls go wherever the agent's code sends them.
 */
import { workflowInfo, type ActivityInput, type Next, type WorkflowInterceptorsFactory, type WorkflowOutboundCallsInterceptor } from '@temporalio/workflow';
import { AGENT_CALL_MEMO, AI_SDK_MODEL_ACTIVITIES, type AgentCallContext } from '../src/core/agentCallContext';
import { ACTIVITY_HEARTBEAT_TIMEOUT } from '../src/core/liveness';

class ModelCallsToTrajflow implements WorkflowOutboundCallsInterceptor {
  scheduleActivity(input: ActivityInput, next: Next<WorkflowOutboundCallsInterceptor, 'scheduleActivity'>): Promise<unknown> {
    const context = workflowInfo().memo?.[AGENT_CALL_MEMO] as AgentCallContext | undefined;
    if (!context || !AI_SDK_MODEL_ACTIVITIES.includes(input.activityType)) return next(input);
    const [call, ...rest] = input.args;
    return next({
      ...input,
      args: [{ ...(call as object), trajflow: context }, ...rest],
      // The inference activity heartbeats while it samples, so a dead inference worker is noticed in seconds.
      options: { ...input.options, taskQueue: context.inferenceQueue, heartbeatTimeout: ACTIVITY_HEARTBEAT_TIMEOUT },
    });
  }
}

export const interceptors: WorkflowInterceptorsFactory = () => ({ outbound: [new ModelCallsToTrajflow()] });

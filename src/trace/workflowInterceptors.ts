/**
 * Workflow interceptor module (registered by workers/workflowWorker.ts, bundled into the workflow
 * sandbox): one span per workflow run, from the run's start (server time) to its end as seen by
 * the worker that ran its last task: the trajectory, group, rollout controller and training spans.
 * A group's span ending is the group's completion.
 */
import {
  ContinueAsNew,
  isCancellation,
  workflowInfo,
  type Next,
  type WorkflowExecuteInput,
  type WorkflowInboundCallsInterceptor,
  type WorkflowInterceptorsFactory,
} from '@temporalio/workflow';
import { runIdOfWorkflowId } from '../core/ids';
import { runIdOfInput, WORKFLOW_KINDS } from './names';
import { traceWorkflowEnded, type TraceAttrs } from './workflowSinks';

/** A few numbers from a trajectory or group summary, duck-typed (no activity code in the sandbox). */
function resultAttrs(result: unknown): TraceAttrs {
  if (typeof result !== 'object' || result === null) return {};
  const r = result as Record<string, unknown>;
  const attrs: TraceAttrs = {};
  if (typeof r.status === 'string') attrs.status = r.status;
  if (typeof r.reward === 'number') attrs.reward = r.reward;
  if (typeof r.turns === 'number') attrs.turns = r.turns;
  if (Array.isArray(r.trajectoryIds)) attrs.trajectories = r.trajectoryIds.length;
  if (Array.isArray(r.failed)) attrs.failed = r.failed.length;
  if (typeof r.rewardMean === 'number') attrs.rewardMean = r.rewardMean;
  return attrs;
}

class TraceWorkflowInbound implements WorkflowInboundCallsInterceptor {
  async execute(input: WorkflowExecuteInput, next: Next<WorkflowInboundCallsInterceptor, 'execute'>): Promise<unknown> {
    const info = workflowInfo();
    const kind = WORKFLOW_KINDS[info.workflowType] ?? info.workflowType;
    const run = runIdOfInput(input.args[0]) ?? runIdOfWorkflowId(info.workflowId);
    const startMs = info.runStartTime.getTime();
    try {
      const result = await next(input);
      traceWorkflowEnded(run, kind, startMs, 'completed', resultAttrs(result));
      return result;
    } catch (err) {
      const outcome = err instanceof ContinueAsNew ? 'continued' : isCancellation(err) ? 'cancelled' : 'failed';
      traceWorkflowEnded(run, kind, startMs, outcome);
      throw err;
    }
  }
}

export const interceptors: WorkflowInterceptorsFactory = () => ({ inbound: [new TraceWorkflowInbound()] });

/**
 * (a) trajflow's streaming pipeline, unchanged: the training workflow on the dev server starts its
 * rollout controller, which streams groups of trajectory workflows to it within the staleness
 * bound, and trains each batch on the trainer queue as soon as it is in.
 */
import { trainingInputOf } from '../../client/launch';
import { rolloutIdOf } from '../../src/core/ids';
import { trainingWorkflow } from '../../workflows/training';
import type { RunContext } from './runContext';

export async function runStreamingOnTemporal({ stack, config, runId }: RunContext): Promise<number> {
  const input = trainingInputOf(config, runId);
  const startedAt = performance.now();
  const handle = await stack.client.workflow.start(trainingWorkflow, { workflowId: runId, taskQueue: input.taskQueues.workflows, args: [input] });
  await handle.result();
  // The controller closes just after handing over its last group: let it, so runs never overlap.
  await stack.client.workflow.getHandle(rolloutIdOf(runId)).result();
  return startedAt;
}

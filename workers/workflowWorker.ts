/**
 * Workflow worker: polls `<prefix>-workflows` and runs the trajectory, group and rollout
 * controller workflows. Deterministic orchestration only; all I/O happens in activities.
 */
import { NativeConnection, Worker } from '@temporalio/worker';
import type { RunConfig } from '../config/schema';
import { taskQueuesFor } from './taskQueues';

export async function createWorkflowWorker(config: RunConfig, connection: NativeConnection): Promise<Worker> {
  const bundlePath = process.env.TRAJFLOW_WORKFLOW_BUNDLE;
  return Worker.create({
    connection,
    namespace: config.temporal.namespace,
    taskQueue: taskQueuesFor(config.temporal.taskQueuePrefix).workflows,
    ...(bundlePath ? { workflowBundle: { codePath: bundlePath } } : { workflowsPath: require.resolve('../workflows') }),
    // Many small trajectories at once; the default cache is plenty, but keep tasks flowing.
    maxConcurrentWorkflowTaskExecutions: 40,
  });
}

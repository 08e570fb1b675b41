/**
 * Workflow worker: polls `<prefix>-workflows` and runs the trajectory, group and rollout
 * controller workflows. Deterministic orchestration only; all I/O happens in activities. The
 * episode sessions of `env.sessions: local` runs live here, served as local activities.
 */
import { Worker } from '@temporalio/worker';
import type { RunConfig } from '../config/schema';
import type { WorkerConnection } from '../src/temporal/connection';
import { traceSinks } from '../src/trace/sinks';
import { versioningOptions } from './deployment';
import type { SessionHost } from './sessionHost';
import { taskQueuesFor } from './taskQueues';

/**
 * Workflow interceptor modules bundled with the workflows: one trace span per workflow run. A
 * prebuilt bundle (TRAJFLOW_WORKFLOW_BUNDLE) has them only if it was built with them.
 */
export const WORKFLOW_INTERCEPTOR_MODULES = [require.resolve('../src/trace/workflowInterceptors')];

export async function createWorkflowWorker(config: RunConfig, temporal: WorkerConnection, sessionHost: SessionHost): Promise<Worker> {
  const bundlePath = process.env.TRAJFLOW_WORKFLOW_BUNDLE;
  return Worker.create({
    ...temporal,
    taskQueue: taskQueuesFor(config.temporal.taskQueuePrefix).workflows,
    // With TRAJFLOW_BUILD_ID: a version of the deployment, every workflow pinned to it.
    ...versioningOptions(config.temporal),
    ...(bundlePath ? { workflowBundle: { codePath: bundlePath } } : { workflowsPath: require.resolve('../workflows') }),
    interceptors: { ...(bundlePath ? {} : { workflowModules: WORKFLOW_INTERCEPTOR_MODULES }), activity: sessionHost.activityInterceptors },
    // Local activities only: sessions of `env.sessions: local` trajectories.
    activities: { ...sessionHost.envActivities, ...sessionHost.sessionActivities },
    // Trace events workflows report (always registered: workflow code calls the sink either way).
    sinks: traceSinks(config.dataDir),
    // Many small trajectories at once; the default cache is plenty, but keep tasks flowing.
    maxConcurrentWorkflowTaskExecutions: 40,
  });
}

/**
 * Workflow worker: polls `<prefix>-workflows` and runs the trajectory, group and rollout
 * controller workflows. Deterministic orchestration only; all I/O happens in activities. The
 * episode sessions of `env.sessions: local` runs live here, served as local activities, and so do
 * the model calls of `inference.calls: local` runs, over this process's inference provider.
 */
import { Worker, type ActivityInterceptorsFactory } from '@temporalio/worker';
import type { RunConfig } from '../config/schema';
import type { WorkerConnection } from '../src/temporal/connection';
import { traceSinks } from '../src/trace/sinks';
import { versioningOptions } from './deployment';
import type { InferenceHost } from './inferenceHost';
import type { SessionHost } from './sessionHost';
import { taskQueuesOf, type QueueScopedConfig } from './taskQueues';

/**
 * Workflow interceptor modules bundled with the workflows: one trace span per workflow run. A
 * prebuilt bundle (TRAJFLOW_WORKFLOW_BUNDLE) has them only if it was built with them.
 */
export const WORKFLOW_INTERCEPTOR_MODULES = [require.resolve('../src/trace/workflowInterceptors')];

/** Default of the SDK's local activity slots; every trajectory in flight holds at most one. */
const LOCAL_ACTIVITY_SLOTS = 100;

/**
 * Threads that run workflow code (the SDK's default is one). Each call into the workflow sandbox
 * starts and joins a watchdog thread (the deadlock timeout), which on a busy machine blocks the
 * calling thread while that thread waits for a core, tens of times per trajectory; a second thread
 * keeps other workflows' tasks moving meanwhile. It helped measurably only when other work shared
 * the CPUs (docs/benchmarks.md, "Streaming against synchronous").
 */
const WORKFLOW_THREADS = 2;

export async function createWorkflowWorker(
  config: QueueScopedConfig & Pick<RunConfig, 'rollout'>,
  temporal: WorkerConnection,
  sessionHost: SessionHost,
  inferenceHost?: InferenceHost,
): Promise<Worker> {
  const bundlePath = process.env.TRAJFLOW_WORKFLOW_BUNDLE;
  const modelCalls = inferenceHost ? { generate: inferenceHost.activities.generate } : {};
  // Each local activity is traced and metered as its own role's.
  const interceptorsOf = (activityType: string) =>
    inferenceHost && activityType in modelCalls ? inferenceHost.activityInterceptors : sessionHost.activityInterceptors;
  return Worker.create({
    ...temporal,
    taskQueue: taskQueuesOf(config).workflows,
    // With TRAJFLOW_BUILD_ID: a version of the deployment, every workflow pinned to it.
    ...versioningOptions(config),
    ...(bundlePath ? { workflowBundle: { codePath: bundlePath } } : { workflowsPath: require.resolve('../workflows') }),
    interceptors: {
      ...(bundlePath ? {} : { workflowModules: WORKFLOW_INTERCEPTOR_MODULES }),
      activity: [byActivityType(interceptorsOf)],
    },
    // Local activities only: sessions of `env.sessions: local` runs, model calls of `inference.calls: local` ones.
    activities: { ...sessionHost.envActivities, ...sessionHost.sessionActivities, ...modelCalls },
    maxConcurrentLocalActivityExecutions: Math.max(LOCAL_ACTIVITY_SLOTS, config.rollout.maxConcurrency),
    // Trace events workflows report (always registered: workflow code calls the sink either way).
    sinks: traceSinks(config.dataDir),
    // Many small trajectories at once; the default cache is plenty, but keep tasks flowing.
    maxConcurrentWorkflowTaskExecutions: 40,
    workflowThreadPoolSize: WORKFLOW_THREADS,
  });
}

/** One interceptor factory that runs, for each activity, the chain `route` picks by its type (first outermost). */
export function byActivityType(route: (activityType: string) => readonly ActivityInterceptorsFactory[]): ActivityInterceptorsFactory {
  return (ctx) => {
    const chain = route(ctx.info.activityType).flatMap((factory) => factory(ctx).inbound ?? []);
    return {
      inbound: {
        execute: (input, next) =>
          chain.reduceRight<typeof next>((inner, interceptor) => (i) => (interceptor.execute ? interceptor.execute(i, inner) : inner(i)), next)(input),
      },
    };
  };
}

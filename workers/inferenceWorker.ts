/**
 * Inference worker: polls `<prefix>-inference` for `generate` (and a real model's `evaluate`). The
 * embedded engine decodes in a worker thread, and vLLM / SGLang servers on their own hosts, each
 * batching every concurrent request into one forward pass per step, so this worker takes many
 * activities at once (at least two batches' worth, so the engine never waits for the next request
 * to arrive). A real model's prompts are built with its own tokenizer and chat template
 * (`model.path`).
 */
import { Worker } from '@temporalio/worker';
import type { RunConfig } from '../config/schema';
import type { WorkerConnection } from '../src/temporal/connection';
import { versioningOptions } from './deployment';
import type { InferenceHost } from './inferenceHost';
import { taskQueuesOf, type QueueScopedConfig } from './taskQueues';

export async function createInferenceWorker(
  config: QueueScopedConfig & Pick<RunConfig, 'inference'>,
  temporal: WorkerConnection,
  host: InferenceHost,
): Promise<Worker> {
  return Worker.create({
    ...temporal,
    taskQueue: taskQueuesOf(config).inference,
    ...versioningOptions(config),
    activities: host.activities,
    maxConcurrentActivityTaskExecutions: config.inference.maxBatch * 2,
    interceptors: { activity: host.activityInterceptors },
  });
}

/**
 * Inference worker: polls `<prefix>-inference` for `generate` (and a real model's `evaluate`). The embedded engine decodes in a
 * worker thread, and vLLM / SGLang servers on their own hosts, each batching every concurrent
 * request into one forward pass per step, so this worker takes many activities at once (at least
 * two batches' worth, so the engine never waits for the next request to arrive). A real model's
 * prompts are built with its own tokenizer and chat template (`model.path`).
 */
import { Worker } from '@temporalio/worker';
import type { RunConfig } from '../config/schema';
import { createServerEvaluationActivities } from '../activities/evaluation';
import { createInferenceActivities } from '../activities/inference';
import { chatFormatFor } from '../src/chat/load';
import type { InferenceProvider } from '../src/inference/provider';
import { compatibilityOf } from '../src/core/compatibility';
import type { Logger } from '../src/log';
import { buildId } from '../src/paths';
import { engineStatsReporter } from '../src/inference/statsReporter';
import type { SnapshotReporter } from '../src/metrics/snapshots';
import type { EngineStats } from '../src/inference/provider';
import { CheckpointStore } from '../src/store/checkpointStore';
import { traceActivities } from '../src/trace/activityInterceptor';
import type { TrajectoryStorage } from '../src/store/trajectoryStore';
import type { WorkerConnection } from '../src/temporal/connection';
import { meterActivities } from '../src/metrics/activityMetrics';
import { versioningOptions } from './deployment';
import { taskQueuesFor } from './taskQueues';
import { enginesDir } from '../src/store/runLayout';

export interface InferenceWorker {
  worker: Worker;
  provider: InferenceProvider;
  stats: SnapshotReporter<EngineStats>;
}

export async function createInferenceWorker(
  config: RunConfig,
  temporal: WorkerConnection,
  store: TrajectoryStorage,
  provider: InferenceProvider,
  logger: Logger,
): Promise<InferenceWorker> {
  const checkpoints = new CheckpointStore(config.dataDir, config.model.path ? 'huggingface' : 'embedded');
  const chat = await chatFormatFor(config.model);
  const compatibility = compatibilityOf(config, buildId());
  const activities = {
    ...createInferenceActivities({ provider, store, checkpoints, chat, maxContext: config.model.maxContext, compatibility, logger }),
    // A real model's held-out evaluation plays through the same servers.
    ...(config.model.path
      ? createServerEvaluationActivities({ provider, chat, checkpoints, maxContext: config.model.maxContext, compatibility, dataDir: config.dataDir, logger })
      : {}),
  };
  const worker = await Worker.create({
    ...temporal,
    taskQueue: taskQueuesFor(config.temporal.taskQueuePrefix).inference,
    ...versioningOptions(config.temporal),
    activities,
    maxConcurrentActivityTaskExecutions: config.inference.maxBatch * 2,
    interceptors: { activity: [traceActivities(config.dataDir, 'inference'), meterActivities('inference')] },
  });
  const stats = engineStatsReporter(provider, enginesDir(config.dataDir));
  return { worker, provider, stats };
}

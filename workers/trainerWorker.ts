/**
 * Trainer worker: polls `<prefix>-trainer` for policy preparation and train steps, one at a time
 * (a step saturates the CPU and owns the optimizer state). Run it as its own process: a train
 * step blocks this process's event loop for its duration.
 */
import { Worker } from '@temporalio/worker';
import { createTrainerActivities } from '../activities/trainer';
import { compatibilityOf } from '../src/core/compatibility';
import type { Logger } from '../src/log';
import { buildId } from '../src/paths';
import { CheckpointStore } from '../src/store/checkpointStore';
import type { TrajectoryStorage } from '../src/store/trajectoryStore';
import type { WorkerConnection } from '../src/temporal/connection';
import { traceActivities } from '../src/trace/activityInterceptor';
import { meterActivities } from '../src/metrics/activityMetrics';
import { versioningOptions } from './deployment';
import { taskQueuesOf, type QueueScopedConfig } from './taskQueues';

export async function createTrainerWorker(config: QueueScopedConfig, temporal: WorkerConnection, store: TrajectoryStorage, logger: Logger): Promise<Worker> {
  return Worker.create({
    ...temporal,
    taskQueue: taskQueuesOf(config).trainer,
    ...versioningOptions(config),
    activities: createTrainerActivities({
      model: config.model,
      compatibility: compatibilityOf(config, buildId()),
      store,
      checkpoints: new CheckpointStore(config.dataDir),
      dataDir: config.dataDir,
      logger,
    }),
    maxConcurrentActivityTaskExecutions: 1,
    interceptors: { activity: [traceActivities(config.dataDir, 'trainer'), meterActivities('trainer')] },
  });
}

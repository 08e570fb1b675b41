/**
 * The Temporal side of the bench, started once for all runs: a dev server (unless the caller
 * passes a running one), trajflow's own rollout workers (workflows, inference, env) serving the
 * switchable model stand-in, and a worker on the trainer queue serving the stand-in trainer.
 */
import { Client, Connection } from '@temporalio/client';
import { NativeConnection, Worker } from '@temporalio/worker';
import type { RunConfig } from '../../config/schema';
import type { Logger } from '../../src/log';
import { freePort } from '../../src/ports';
import { CheckpointStore } from '../../src/store/checkpointStore';
import { TrajectoryStore } from '../../src/store/trajectoryStore';
import { resolveTemporal } from '../../src/temporal/connection';
import { startDevServer, stopDevServer } from '../../src/temporal/devServer';
import { ROLLOUT_ROLES, startWorkers } from '../../workers/start';
import { taskQueuesOf } from '../../workers/taskQueues';
import { STREAM_ETA1 } from './configurations';
import type { PipelineBenchOptions } from './options';
import { StandInTrainer } from './standInTrainer';
import { SwitchableModel } from './switchableModel';
import { runConfigFor, type BenchPlace } from './workload';

export interface TemporalStack {
  place: BenchPlace;
  /** The dev server's process, when the bench started it. */
  serverPid?: number;
  client: Client;
  model: SwitchableModel;
  trainer: StandInTrainer;
  store: TrajectoryStore;
  checkpoints: CheckpointStore;
  /** The config the workers were started with (every run shares its queues, model and data dir). */
  workerConfig: RunConfig;
  close(): Promise<void>;
}

export async function startTemporalStack(options: PipelineBenchOptions, dataDir: string, logger: Logger): Promise<TemporalStack> {
  const server = options.temporalAddress === undefined ? await startDevServer({ dataDir, port: await freePort(), headless: true }) : undefined;
  const temporalAddress = options.temporalAddress ?? server!.address;
  const place: BenchPlace = { dataDir, temporalAddress, taskQueuePrefix: `bench-pipeline-${process.pid}-${Date.now().toString(36)}` };
  const closers: (() => Promise<unknown>)[] = [];
  const close = async () => {
    for (const closer of closers.reverse()) await closer().catch((err) => logger.warn({ err: String(err) }, 'closing the bench stack'));
    if (server) await stopDevServer(dataDir);
  };
  try {
    const workerConfig = runConfigFor(options, place, STREAM_ETA1);
    // The namespace the workers poll, resolved as they resolve it.
    const { namespace } = resolveTemporal(workerConfig.temporal);
    const model = new SwitchableModel();
    const workers = await startWorkers(workerConfig, ROLLOUT_ROLES, logger, { provider: model });
    closers.push(() => workers.shutdown());

    const store = new TrajectoryStore(dataDir);
    const checkpoints = new CheckpointStore(dataDir);
    const trainer = new StandInTrainer({ store, checkpoints, dataDir });
    const trainerConnection = await NativeConnection.connect({ address: temporalAddress });
    closers.push(() => trainerConnection.close());
    // One step at a time, as the real trainer worker runs them.
    const trainerWorker = await Worker.create({
      connection: trainerConnection,
      namespace,
      taskQueue: taskQueuesOf(workerConfig).trainer,
      activities: trainer.activities,
      maxConcurrentActivityTaskExecutions: 1,
    });
    const trainerRunning = trainerWorker.run();
    closers.push(async () => {
      trainerWorker.shutdown();
      await trainerRunning;
    });

    const connection = await Connection.connect({ address: temporalAddress });
    closers.push(() => connection.close());
    const client = new Client({ connection, namespace });
    return { place, serverPid: server?.pid, client, model, trainer, store, checkpoints, workerConfig, close };
  } catch (err) {
    await close();
    throw err;
  }
}

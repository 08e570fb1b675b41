/**
 * Runs the real workflow code (the suite's prebuilt bundle) on the suite's dev server with a
 * Worker whose activities are the test's own small functions: every queue the workflows address
 * (workflows, inference, env, trainer, and the env worker's session queue) is one test queue.
 */
import { NativeConnection, Worker } from '@temporalio/worker';
import { testAddress, testConfig } from './harness';
import { episodeSpecOf } from '../../client/launch';
import { createLogger, installTemporalLogging } from '../../src/log';
import { traceSinks } from '../../src/trace/sinks';
import type { RunConfig } from '../../config/schema';
import type { EpisodeSpec } from '../../workflows/types';

let queues = 0;

/** A test config and its run's episode spec, whose task queues all name one fresh queue. */
export function mockRun(name: string, overrides: Record<string, Record<string, unknown>> = {}): { config: RunConfig; spec: EpisodeSpec } {
  const config = testConfig(name, overrides);
  const queue = `mock-${name}-${process.pid}-${++queues}`;
  return { config, spec: { ...episodeSpecOf(config, `${name}-run`), taskQueues: { workflows: queue, inference: queue, env: queue, trainer: queue } } };
}

/** Runs `fn` while a worker with `activities` polls `taskQueue` (trace sinks write under `dataDir`, when tracing is on). */
export async function withMockWorker<T>(
  taskQueue: string,
  activities: object,
  fn: () => Promise<T>,
  dataDir = process.env.TRAJFLOW_TEST_DATA_DIR ?? '/tmp',
): Promise<T> {
  const logger = createLogger('test');
  logger.level = 'error';
  installTemporalLogging(logger);
  const connection = await NativeConnection.connect({ address: testAddress() });
  try {
    const worker = await Worker.create({
      connection,
      taskQueue,
      activities,
      workflowBundle: { codePath: process.env.TRAJFLOW_TEST_WORKFLOW_BUNDLE! },
      sinks: traceSinks(dataDir),
    });
    return await worker.runUntil(fn());
  } finally {
    await connection.close();
  }
}

/**
 * What `trajflow run` and `trajflow train` share: the run id, the local stack (dev server and
 * in-process workers) when --local is given, and a client connection.
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import type { RunConfig } from '../config/schema';
import type { Logger } from '../src/log';
import { compatibilityOf } from '../src/core/compatibility';
import { buildId } from '../src/paths';
import { describeEnvironment } from '../src/plugins/registry';
import { startDevServer } from '../src/temporal/devServer';
import { ROLLOUT_ROLES, RunningWorkers, startWorkers } from '../workers/start';
import { taskQueuesFor } from '../workers/taskQueues';
import type { EpisodeSpec } from '../workflows/types';

export function defaultRunId(config: RunConfig, now = new Date()): string {
  return `${config.run.name}-${now.toISOString().replace(/[-:]/g, '').replace(/\.\d+Z$/, 'Z')}`;
}

export function episodeSpecOf(config: RunConfig, runId: string): EpisodeSpec {
  return {
    runId,
    runSeed: config.run.seed,
    env: config.env,
    envLabel: describeEnvironment(config.env),
    agent: config.agent,
    sampling: config.sampling,
    reward: config.reward,
    taskQueues: taskQueuesFor(config.temporal.taskQueuePrefix),
    compatibility: compatibilityOf(config, buildId()),
  };
}

function portOf(address: string): number {
  const port = Number(address.split(':').pop());
  if (!Number.isInteger(port)) throw new Error(`temporal.address ${JSON.stringify(address)} has no port`);
  return port;
}

/**
 * Ctrl-C / SIGTERM end the CLI (after `cleanup`) instead of leaving it waiting on a run whose
 * local workers just shut down; the run itself stays in Temporal and goes on when workers return.
 */
export function exitOnInterrupt(logger: Logger, cleanup: () => void = () => undefined): void {
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      cleanup();
      logger.warn({ signal }, 'interrupted; the run stays in Temporal and resumes when workers poll again');
      process.exit(130);
    });
  }
}

export interface Session {
  runId: string;
  runDir: string;
  client: Client;
  /** The in-process rollout workers of a --local session. */
  workers?: RunningWorkers;
  close(): Promise<void>;
}

export async function openSession(config: RunConfig, options: { runId?: string; local: boolean; logger: Logger }): Promise<Session> {
  const { logger } = options;
  const runId = options.runId ?? defaultRunId(config);
  if (options.local) {
    const server = await startDevServer({ dataDir: config.dataDir, port: portOf(config.temporal.address), log: (line) => logger.info(line) });
    logger.info({ address: server.address, webUi: server.uiUrl }, 'Temporal dev server ready');
  }
  const workers = options.local ? await startWorkers(config, ROLLOUT_ROLES, logger) : undefined;
  const connection = await Connection.connect({ address: config.temporal.address });
  const runDir = path.join(config.dataDir, 'runs', runId);
  await fs.mkdir(runDir, { recursive: true });
  await fs.writeFile(path.join(runDir, 'config.json'), JSON.stringify(config, null, 2));
  return {
    runId,
    runDir,
    client: new Client({ connection, namespace: config.temporal.namespace }),
    workers,
    async close() {
      await connection.close();
      await workers?.shutdown();
    },
  };
}

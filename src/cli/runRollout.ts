/**
 * `trajflow run`: starts a rollout controller for a config, shows its progress, and prints and
 * stores the run summary. With `local`, it also starts the dev server (if needed) and all worker
 * roles in this process: the one-command path on a fresh machine.
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import type { RunConfig } from '../../config/schema';
import { describeEnv } from '../envs/label';
import { engineBusyFraction, readEngineSnapshots } from '../inference/statsReporter';
import type { Logger } from '../log';
import { SEARCH_ATTRIBUTES } from '../temporal/searchAttributes';
import { startDevServer } from '../temporal/devServer';
import { rolloutWorkflow } from '../../workflows/rollout';
import { rolloutStatusQuery } from '../../workflows/signals';
import type { RolloutInput } from '../../workflows/types';
import { startWorkers } from '../../workers/start';
import { taskQueuesFor } from '../../workers/taskQueues';
import { createProgress } from './progress';

export interface RunSummary {
  runId: string;
  groups: number;
  trajectories: number;
  failedTrajectories: number;
  meanReward: number;
  successRate: number;
  meanTurns: number;
  wallSeconds: number;
  trajectoriesPerSecond: number;
  engineBusyFraction: number;
}

export function defaultRunId(config: RunConfig, now = new Date()): string {
  return `${config.run.name}-${now.toISOString().replace(/[-:]/g, '').replace(/\.\d+Z$/, 'Z')}`;
}

export function rolloutInputOf(config: RunConfig, runId: string): RolloutInput {
  return {
    runId,
    runSeed: config.run.seed,
    env: config.env,
    agent: config.agent,
    sampling: config.sampling,
    taskQueues: taskQueuesFor(config.temporal.taskQueuePrefix),
    groups: config.rollout.groups,
    groupSize: config.rollout.groupSize,
    maxConcurrency: config.rollout.maxConcurrency,
  };
}

function portOf(address: string): number {
  const port = Number(address.split(':').pop());
  if (!Number.isInteger(port)) throw new Error(`temporal.address ${JSON.stringify(address)} has no port`);
  return port;
}

export async function runRollout(config: RunConfig, options: { runId?: string; local: boolean; logger: Logger }): Promise<RunSummary> {
  const { logger } = options;
  const runId = options.runId ?? defaultRunId(config);
  if (options.local) {
    const server = await startDevServer({ dataDir: config.dataDir, port: portOf(config.temporal.address), log: (line) => logger.info(line) });
    logger.info({ address: server.address, webUi: server.uiUrl }, 'Temporal dev server ready');
  }
  const workers = options.local ? await startWorkers(config, 'all', logger) : undefined;
  const connection = await Connection.connect({ address: config.temporal.address });
  try {
    const client = new Client({ connection, namespace: config.temporal.namespace });
    const runDir = path.join(config.dataDir, 'runs', runId);
    await fs.mkdir(runDir, { recursive: true });
    await fs.writeFile(path.join(runDir, 'config.json'), JSON.stringify(config, null, 2));

    const enginesDir = path.join(config.dataDir, 'engines');
    await workers?.flushEngineStats();
    const enginesBefore = await readEngineSnapshots(enginesDir);
    const startedAt = Date.now();
    const handle = await client.workflow.start(rolloutWorkflow, {
      workflowId: runId,
      taskQueue: taskQueuesFor(config.temporal.taskQueuePrefix).workflows,
      args: [rolloutInputOf(config, runId)],
      typedSearchAttributes: [
        { key: SEARCH_ATTRIBUTES.run, value: runId },
        { key: SEARCH_ATTRIBUTES.kind, value: 'rollout' },
        { key: SEARCH_ATTRIBUTES.env, value: describeEnv(config.env) },
      ],
      staticSummary: `rollout ${runId}: ${config.rollout.groups} groups x ${config.rollout.groupSize} on ${describeEnv(config.env)}`,
    });
    logger.info({ runId }, 'rollout started');

    const total = config.rollout.groups * config.rollout.groupSize;
    const progress = createProgress('trajectories', total);
    const poll = setInterval(() => {
      handle.query(rolloutStatusQuery).then((s) => {
        const done = s.trajectoriesFinished + s.trajectoriesFailed;
        progress.update(done, `in flight ${s.trajectoriesInFlight}, mean reward ${(s.rewardSum / Math.max(1, s.trajectoriesFinished)).toFixed(3)}`);
      }, () => undefined);
    }, 1_000);
    const result = await handle.result().finally(() => {
      clearInterval(poll);
      progress.finish();
    });
    const wallMs = Date.now() - startedAt;
    await workers?.flushEngineStats();
    const enginesAfter = await readEngineSnapshots(enginesDir);

    const summary: RunSummary = {
      runId,
      groups: result.groupsFinished,
      trajectories: result.trajectoriesFinished,
      failedTrajectories: result.trajectoriesFailed,
      meanReward: result.rewardSum / Math.max(1, result.trajectoriesFinished),
      successRate: result.successes / Math.max(1, result.trajectoriesFinished),
      meanTurns: result.turnsSum / Math.max(1, result.trajectoriesFinished),
      wallSeconds: wallMs / 1000,
      trajectoriesPerSecond: result.trajectoriesFinished / (wallMs / 1000),
      engineBusyFraction: engineBusyFraction(enginesBefore, enginesAfter, wallMs),
    };
    await fs.writeFile(path.join(runDir, 'summary.json'), JSON.stringify(summary, null, 2));
    return summary;
  } finally {
    await connection.close();
    await workers?.shutdown();
  }
}

export function formatSummary(s: RunSummary): string {
  return [
    `run ${s.runId}`,
    `  groups              ${s.groups}`,
    `  trajectories        ${s.trajectories} (${s.failedTrajectories} failed)`,
    `  mean reward         ${s.meanReward.toFixed(3)} (success rate ${(100 * s.successRate).toFixed(1)}%)`,
    `  mean turns          ${s.meanTurns.toFixed(2)}`,
    `  wall time           ${s.wallSeconds.toFixed(1)} s`,
    `  trajectories/s      ${s.trajectoriesPerSecond.toFixed(2)}`,
    `  engine busy         ${(100 * s.engineBusyFraction).toFixed(1)}% of wall time`,
  ].join('\n');
}

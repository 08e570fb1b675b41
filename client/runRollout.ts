/**
 * `trajflow run`: starts a rollout controller for a config, shows its progress, and prints and
 * stores the run summary. With `local`, it also starts the dev server (if needed) and all worker
 * roles in this process: the one-command path on a fresh machine.
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import type { RunConfig } from '../config/schema';
import { describeEnvironment } from '../src/plugins/registry';
import { engineBusyFraction, readEngineSnapshots } from '../src/inference/statsReporter';
import type { Logger } from '../src/log';
import { SEARCH_ATTRIBUTES } from '../src/temporal/searchAttributes';
import { rolloutWorkflow } from '../workflows/rollout';
import { rolloutStatusQuery } from '../workflows/signals';
import type { RolloutInput } from '../workflows/types';
import { taskQueuesFor } from '../workers/taskQueues';
import { createProgress, pollEvery } from '../cli/progress';
import { episodeSpecOf, exitOnInterrupt, openSession } from './session';

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

export function rolloutInputOf(config: RunConfig, runId: string): RolloutInput {
  return {
    ...episodeSpecOf(config, runId),
    groups: config.rollout.groups,
    groupSize: config.rollout.groupSize,
    maxConcurrency: config.rollout.maxConcurrency,
  };
}

export async function runRollout(config: RunConfig, options: { runId?: string; local: boolean; logger: Logger }): Promise<RunSummary> {
  const { logger } = options;
  const session = await openSession(config, options);
  const { runId, runDir, client, workers } = session;
  exitOnInterrupt(logger);
  try {
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
        { key: SEARCH_ATTRIBUTES.env, value: describeEnvironment(config.env) },
      ],
      staticSummary: `rollout ${runId}: ${config.rollout.groups} groups x ${config.rollout.groupSize} on ${describeEnvironment(config.env)}`,
    });
    logger.info({ runId }, 'rollout started');

    const total = config.rollout.groups * config.rollout.groupSize;
    const progress = createProgress('trajectories', total);
    const poll = pollEvery(1_000, async () => {
      const s = await handle.query(rolloutStatusQuery);
      const done = s.trajectoriesFinished + s.trajectoriesFailed;
      progress.update(done, `in flight ${s.trajectoriesInFlight}, mean reward ${(s.rewardSum / Math.max(1, s.trajectoriesFinished)).toFixed(3)}`);
    });
    const result = await handle.result().finally(async () => {
      await poll.stop();
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
    await session.close();
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

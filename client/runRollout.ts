/**
 * `trajflow run`: starts a rollout controller for a config, follows its progress, and stores and
 * returns the run summary. With `local`, it also starts the dev server (if needed) and all worker
 * roles in this process: the one-command path on a fresh machine.
 */
import { promises as fs } from 'node:fs';
import { enginesDir } from '../src/store/runLayout';
import type { RunConfig } from '../config/schema';
import { describeEnvironment } from '../src/plugins/registry';
import { engineBusyFraction, readEngineSnapshots } from '../src/inference/statsReporter';
import { SEARCH_ATTRIBUTES } from '../src/temporal/searchAttributes';
import { runDetails } from '../workflows/details';
import { rolloutWorkflow } from '../workflows/rollout';
import { rolloutStatusQuery, type RolloutStatus } from '../workflows/signals';
import type { RolloutInput } from '../workflows/types';
import { ROLLOUT_ROLES } from '../workers/start';
import { useLocalBuild } from './deployment';
import { pollProgress } from './poll';
import { awaitRunClosed } from './runWorkflows';
import { configFileMemo } from './openRuns';
import { episodeSpecOf, openLaunch, reportFinalProgress, RunInterrupted, unlessInterrupted, type RunOptions } from './launch';
import { WORKER_STOP_GRACE_MS } from './workerProcess';

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
  /** Of the engines' time during the run, the fraction in forward passes; absent if no engine published counters. */
  engineBusyFraction?: number;
}

export function rolloutInputOf(config: RunConfig, runId: string): RolloutInput {
  return {
    ...episodeSpecOf(config, runId),
    groups: config.rollout.groups,
    groupSize: config.rollout.groupSize,
    maxConcurrency: config.rollout.maxConcurrency,
  };
}

/** How `trajflow run` starts a rollout's workflow (the options a test that starts one needs too). */
export function rolloutStartOptions(config: RunConfig, runId: string) {
  const input = rolloutInputOf(config, runId);
  return {
    workflowId: runId,
    taskQueue: input.taskQueues.workflows,
    args: [input] as [RolloutInput],
    typedSearchAttributes: [
      { key: SEARCH_ATTRIBUTES.run, value: runId },
      { key: SEARCH_ATTRIBUTES.kind, value: 'rollout' },
      { key: SEARCH_ATTRIBUTES.env, value: describeEnvironment(config.env) },
    ],
    staticSummary: `rollout ${runId}: ${config.rollout.groups} groups x ${config.rollout.groupSize} on ${describeEnvironment(config.env)}`,
    staticDetails: runDetails(input, input),
  };
}

export async function runRollout(config: RunConfig, options: RunOptions<RolloutStatus>): Promise<RunSummary> {
  const { logger, onStatus, signal } = options;
  const launch = await openLaunch(config, options);
  const { runId, layout, client, workers } = launch;
  try {
    if (options.local) await useLocalBuild(client, config, ROLLOUT_ROLES);
    const engines = enginesDir(config.dataDir);
    await workers?.flushEngineStats();
    const enginesBefore = await readEngineSnapshots(engines);
    const startedAt = Date.now();
    if (signal?.aborted) throw new RunInterrupted(runId);
    const handle = launch.resuming
      ? client.workflow.getHandle<typeof rolloutWorkflow>(runId)
      : await client.workflow.start(rolloutWorkflow, { ...rolloutStartOptions(config, runId), memo: configFileMemo(options.configFile) });
    logger.info({ runId }, launch.resuming ? 'following the open run: it resumes on these workers' : 'rollout started');

    const poll = onStatus && pollProgress(client, () => handle.query(rolloutStatusQuery), onStatus);
    const result = await unlessInterrupted(runId, signal, (calls) => client.withAbortSignal(calls, () => handle.result())).finally(() => poll?.stop());
    const wallMs = Date.now() - startedAt;
    if (onStatus) await reportFinalProgress(client, runId, signal, () => handle.query(rolloutStatusQuery), onStatus);
    await awaitRunClosed(client, runId, { logger, signal });
    await workers?.flushEngineStats();
    const enginesAfter = await readEngineSnapshots(engines);

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
      engineBusyFraction: engineBusyFraction(enginesBefore, enginesAfter),
    };
    await fs.writeFile(layout.rolloutSummaryFile, JSON.stringify(summary, null, 2));
    return summary;
  } finally {
    await launch.close(signal?.aborted ? WORKER_STOP_GRACE_MS : undefined);
  }
}

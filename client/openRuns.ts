/**
 * Runs left open on the Temporal server: a run whose command was stopped (SIGTERM, Ctrl-C) or
 * killed stays there to resume. `trajflow train --local` and `run --local` name them at start with
 * the command that resumes each and the one that ends it, and `trajflow control RUN terminate`
 * ends one whose workers are gone (its `stop` needs a workflow worker to answer it).
 */
import path from 'node:path';
import type { Client } from '@temporalio/client';
import { runIdOfWorkflowId } from '../src/core/ids';
import { OPEN_RUN_WORKFLOWS_QUERY, openWorkflowsQuery } from './runQueries';

/** The memo key of a run's top workflow that names the config file it was started from. */
const CONFIG_FILE_MEMO = 'configFile';

export interface OpenRun {
  runId: string;
  /**
   * `training` while its training workflow is open, `rollout` for an open `trajflow run`, and
   * `rollout-rest` for a training run whose training workflow has closed while its rollout
   * controller still finishes the groups it had started.
   */
  kind: 'training' | 'rollout' | 'rollout-rest';
  /** The workflows queue its workflows are on: only workers polling it serve the run. */
  taskQueue: string;
  startTime: Date;
  /** The config file it was started from, where its starter recorded it. */
  configFile?: string;
}

/** A run's memo, naming the config file it is started from (for the command that resumes it). */
export function configFileMemo(configFile: string | undefined): Record<string, unknown> | undefined {
  return configFile ? { [CONFIG_FILE_MEMO]: path.resolve(configFile) } : undefined;
}

/** The config file a run's memo names, if any. */
export function configFileOf(memo: Record<string, unknown> | undefined): string | undefined {
  const file = memo?.[CONFIG_FILE_MEMO];
  return typeof file === 'string' ? file : undefined;
}

/** The runs with an open training workflow or rollout controller, oldest first. */
export async function listOpenRuns(client: Client): Promise<OpenRun[]> {
  const runs = new Map<string, OpenRun>();
  for await (const workflow of client.workflow.list({ query: OPEN_RUN_WORKFLOWS_QUERY })) {
    const runId = runIdOfWorkflowId(workflow.workflowId);
    const isTop = workflow.workflowId === runId;
    const kind = workflow.type === 'trainingWorkflow' ? 'training' : isTop ? 'rollout' : 'rollout-rest';
    const known = runs.get(runId);
    // The run's own workflow (training, or a `trajflow run` rollout) says what the run is.
    if (known && !isTop) continue;
    runs.set(runId, {
      runId,
      kind,
      taskQueue: workflow.taskQueue,
      startTime: workflow.startTime,
      configFile: configFileOf(workflow.memo) ?? known?.configFile,
    });
  }
  for (const run of runs.values()) {
    if (run.configFile) continue;
    // A controller left open: its training workflow, closed, still has the memo.
    const description = await client.workflow
      .getHandle(run.runId)
      .describe()
      .catch(() => undefined);
    run.configFile = configFileOf(description?.memo);
  }
  return [...runs.values()].sort((a, b) => a.startTime.getTime() - b.startTime.getTime());
}

/** What this command's own workers are, for saying whether they serve an open run. */
export interface OwnWorkers {
  /** The workflows queue they poll. */
  workflowsQueue: string;
  /** The config file they were started with, for the commands the notice gives. */
  configFile?: string;
}

/** The command that ends `runId` now, whether or not workers run. */
function terminateCommand(runId: string, configFile: string | undefined): string {
  return `trajflow control ${runId} terminate${configFile ? ` -c ${configFile}` : ''}`;
}

/** The command that brings `run` back with everything a `--local` run starts, or its workers alone. */
function resumeCommand(run: OpenRun): string {
  const config = run.configFile ?? 'CONFIG';
  if (run.kind === 'training') return `trajflow train ${config} --local --run-id ${run.runId}`;
  if (run.kind === 'rollout') return `trajflow run ${config} --local --run-id ${run.runId}`;
  return `trajflow worker --role all -c ${config}`;
}

/** One line for an open run: whose workers serve it, and how to resume or end it. */
export function openRunNotice(run: OpenRun, own: OwnWorkers): string {
  const what = `${run.kind === 'rollout' ? 'rollout' : 'training'} run ${run.runId} (started ${run.startTime.toISOString()})`;
  const config = run.configFile ? `config ${run.configFile}` : 'the config it was started with';
  if (run.taskQueue === own.workflowsQueue) {
    const stop = run.kind === 'training' ? `\`trajflow control ${run.runId} stop\` (at its next step) or ` : '';
    return `${what} is still open and shares this config's task queues: the workers started now resume it beside this run; end it with ${stop}\`${terminateCommand(run.runId, own.configFile)}\``;
  }
  return (
    `${what} is still open on task queue ${run.taskQueue}, which no worker of this config polls: ` +
    `resume it with \`${resumeCommand(run)}\` (${config}), or end it with \`${terminateCommand(run.runId, own.configFile)}\``
  );
}

/**
 * Terminates every open workflow of `runId`; returns how many. Rounds a second apart repeat while
 * one terminates something: a group may have started a trajectory that visibility did not list yet.
 */
export async function terminateRun(client: Client, runId: string, reason: string): Promise<number> {
  let terminated = 0;
  for (let round = -1; round !== 0; await new Promise((resolve) => setTimeout(resolve, 1_000))) {
    round = 0;
    for await (const { workflowId, runId: execution } of client.workflow.list({ query: openWorkflowsQuery(runId) })) {
      // One that closed since it was listed (visibility lags) is not counted.
      round += await client.workflow
        .getHandle(workflowId, execution)
        .terminate(reason)
        .then(
          () => 1,
          () => 0,
        );
    }
    terminated += round;
  }
  return terminated;
}

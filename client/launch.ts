/**
 * A run's launch, what `trajflow run` and `trajflow train` share: the run id, the local stack (dev
 * server, model servers and in-process workers) when --local is given, and a client connection.
 */
import { setMaxListeners } from 'node:events';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { Client } from '@temporalio/client';
import { runLayout, type RunLayout } from '../src/store/runLayout';
import type { RunConfig } from '../config/schema';
import type { Logger } from '../src/log';
import { compatibilityOf } from '../src/core/compatibility';
import { buildId } from '../src/paths';
import { describeEnvironment } from '../src/plugins/registry';
import { markDataDir } from '../src/store/dataMarker';
import { connectClient, resolveTemporal, type TemporalTarget } from '../src/temporal/connection';
import { startDevServer } from '../src/temporal/devServer';
import { ROLLOUT_ROLES, RunningWorkers, startWorkers } from '../workers/start';
import { startLocalModelServers } from './modelServers';
import { WORKER_STOP_GRACE_MS } from './workerProcess';
import { configFileOf, listOpenRuns, openRunNotice } from './openRuns';
import { taskQueuesOf, type QueueScopedConfig } from '../workers/taskQueues';
import type { EpisodeSpec, TrainingInput } from '../workflows/types';

export function defaultRunId(runName: string, now = new Date()): string {
  return `${runName}-${now
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d+Z$/, 'Z')}`;
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
    taskQueues: taskQueuesOf(config),
    inferenceCalls: config.inference.calls,
    compatibility: compatibilityOf(config, buildId()),
  };
}

/** A training workflow's input: the episode spec, the rollout sizes, the trainer and evaluation. */
export function trainingInputOf(config: RunConfig, runId: string): TrainingInput {
  const spec = episodeSpecOf(config, runId);
  return {
    ...spec,
    groupSize: config.rollout.groupSize,
    maxConcurrency: config.rollout.maxConcurrency,
    trainer: config.trainer,
    eval: config.eval,
    // A real model is evaluated through its inference servers, the embedded one by the trainer.
    evaluationQueue: config.model.path ? spec.taskQueues.inference : spec.taskQueues.trainer,
  };
}

/** Starts the dev server of `config.dataDir` where a `--local` run needs it, or finds it running with trajflow's settings. */
export async function startLocalDevServer(config: Pick<RunConfig, 'temporal' | 'dataDir'>, logger: Logger): Promise<void> {
  const target = resolveTemporal(config.temporal);
  const server = await startDevServer({ dataDir: config.dataDir, port: portOf(target), namespace: target.namespace, log: (line) => logger.info(line) });
  logger.info({ address: server.address, namespace: target.namespace, webUi: server.uiUrl }, 'Temporal dev server ready');
}

/** The port a `--local` dev server listens on: the resolved address's. */
function portOf(target: TemporalTarget): number {
  const port = Number(target.address.split(':').pop());
  if (!Number.isInteger(port)) throw new Error(`the Temporal address ${JSON.stringify(target.address)} (${target.origin.address}) has no port`);
  return port;
}

/** Exit status of a command stopped by SIGINT or SIGTERM. */
export const INTERRUPTED_EXIT_CODE = 130;

/**
 * How long an interrupted command takes at most to exit: the workers' grace period, then time to
 * close connections and write the last log lines.
 */
export const INTERRUPT_EXIT_LIMIT_MS = WORKER_STOP_GRACE_MS + 5_000;

/** What an interrupted command logs when it exits at INTERRUPT_EXIT_LIMIT_MS, its stopping not done. */
export const INTERRUPT_BACKSTOP_LINE = 'the workers did not stop in time; exiting';

/**
 * Why `runRollout` or `runTraining` returned early: its `signal` aborted. The run itself stays in
 * Temporal and goes on when workers poll again.
 */
export class RunInterrupted extends Error {
  constructor(readonly runId: string) {
    super(`stopped following run ${runId}; it stays in Temporal and resumes when workers poll again`);
    this.name = 'RunInterrupted';
  }
}

/**
 * `fn`'s result, or RunInterrupted as soon as `signal` aborts. `fn` gets a signal of its own to run
 * its gRPC calls under (`client.withAbortSignal`), aborted when this returns: an interrupted wait's
 * call is cancelled before the caller closes the connection. A call left running past the close
 * can get a retry scheduled by the client (it retries UNAVAILABLE and a few other codes), which then
 * fails on the closed channel in a timer that no caller can catch: a benchmark once died so
 * ("Channel has been shut down"), before it could end its run's workflows.
 *
 * One listener on `signal` for the whole wait: the client's withAbortSignal adds one to its signal
 * per gRPC call and never removes it, and a long `result()` long-polls many times, so those go on
 * the call signal, which lives only as long as the wait and is exempt from Node's leak warning.
 */
export async function unlessInterrupted<T>(runId: string, signal: AbortSignal | undefined, fn: (callSignal: AbortSignal) => Promise<T>): Promise<T> {
  if (signal?.aborted) throw new RunInterrupted(runId);
  const calls = new AbortController();
  setMaxListeners(0, calls.signal);
  let onAbort: (() => void) | undefined;
  const interrupted = new Promise<never>((_, reject) => {
    onAbort = () => reject(new RunInterrupted(runId));
    signal?.addEventListener('abort', onAbort, { once: true });
  });
  try {
    return await Promise.race([fn(calls.signal), interrupted]);
  } finally {
    signal?.removeEventListener('abort', onAbort!);
    calls.abort();
  }
}

/**
 * Hands `onStatus` the run's progress once more after it finished: its final state, not the last
 * poll before it. Under the interrupt's signal, since a SIGTERM now stops the workers that would
 * answer; an error leaves progress as it was (progress is best effort).
 */
export async function reportFinalProgress<S>(
  client: Client,
  runId: string,
  signal: AbortSignal | undefined,
  query: () => Promise<S>,
  onStatus: (status: S) => void,
): Promise<void> {
  await unlessInterrupted(runId, signal, (calls) => client.withAbortSignal(calls, query)).then(onStatus, () => undefined);
}

/** How `runRollout` and `runTraining` start and follow a run. */
export interface RunOptions<Status> {
  /**
   * Workflow id of the run; by default `<run.name>-<UTC timestamp>`. The id of a run still open
   * resumes it: this call follows it instead of starting one (with `local`, after starting what
   * a `--local` run starts).
   */
  runId?: string;
  /** Also start the dev server (if needed) and the workers, so the run needs nothing else. */
  local: boolean;
  /** The config's file: recorded with the run, for the commands that resume it (and a `local` training run's trainer process). */
  configFile?: string;
  logger: Logger;
  /** Called with the workflow's progress about once a second (best effort: a missed query skips a call). */
  onStatus?: (status: Status) => void;
  /**
   * Aborting it stops following the run: the workers this call started stop (in-flight activities
   * finish or hand back within a bounded grace period) and the call rejects with RunInterrupted.
   */
  signal?: AbortSignal;
}

/** What `openLaunch` readies for a run: the run's workflow is then started or followed over `client`. */
export interface Launch {
  runId: string;
  /** The run is open already (an earlier command left it so): follow it, do not start it. */
  resuming: boolean;
  layout: RunLayout;
  client: Client;
  /** The in-process rollout workers of a --local launch. */
  workers?: RunningWorkers;
  /**
   * Closes the connection and shuts the in-process workers down (in-flight activities finish or
   * hand back); with `graceMs`, waits at most that long for them (the caller is about to exit).
   */
  close(graceMs?: number): Promise<void>;
}

export async function openLaunch(config: RunConfig, options: Pick<RunOptions<unknown>, 'runId' | 'local' | 'configFile' | 'logger'>): Promise<Launch> {
  const { logger } = options;
  const runId = options.runId ?? defaultRunId(config.run.name);
  const target = resolveTemporal(config.temporal);
  if (options.local) await startLocalDevServer(config, logger);
  const connection = await connectClient(target);
  const client = new Client({ connection, namespace: target.namespace });
  if (options.local) await warnOfOpenRuns(client, config, runId, options);
  // Before anything starts: a run id of a run open on other queues is refused.
  const resuming = await isOpenHere(client, runId, config).catch(async (err: unknown) => {
    await connection.close();
    throw err;
  });
  // Before any worker starts, here or on another host (src/store/dataMarker.ts).
  await markDataDir(config.dataDir);
  const layout = runLayout(config.dataDir, runId);
  await fs.mkdir(layout.dir, { recursive: true });
  await fs.writeFile(layout.configFile, JSON.stringify(config, null, 2));
  // Model servers before the inference workers, which send them requests as soon as they poll.
  const modelServers = options.local ? await startLocalModelServers(config, (port) => layout.modelServerLog(port)) : undefined;
  const workers = options.local ? await startWorkers(config, ROLLOUT_ROLES, logger) : undefined;
  return {
    runId,
    resuming,
    layout,
    client,
    workers,
    async close(graceMs) {
      await connection.close();
      const shutdown = workers?.shutdown().then(() => modelServers?.stop());
      if (graceMs === undefined) return shutdown;
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([shutdown, new Promise((resolve) => (timer = setTimeout(resolve, graceMs)))]);
      clearTimeout(timer);
    },
  };
}

/**
 * Says, one line each, which earlier runs are still open on the server a `--local` run uses:
 * whether this config's workers serve them, and how to resume or end each (client/openRuns.ts).
 * Best effort: a server whose visibility cannot list them does not hold the run up.
 */
async function warnOfOpenRuns(client: Client, config: QueueScopedConfig, runId: string, options: { configFile?: string; logger: Logger }): Promise<void> {
  const own = { workflowsQueue: taskQueuesOf(config).workflows, configFile: options.configFile && path.resolve(options.configFile) };
  try {
    for (const run of await listOpenRuns(client)) if (run.runId !== runId) options.logger.warn(openRunNotice(run, own));
  } catch (err) {
    options.logger.warn({ err: (err as Error).message }, 'could not list the runs still open on the Temporal server');
  }
}

/** A run id given to resume names an open run that this config's workers cannot serve. */
export class OpenRunElsewhereError extends Error {
  override name = 'OpenRunElsewhereError';
}

/**
 * Whether `runId` is open on the server, so that the call resumes it rather than starting it. An
 * open run is served only by workers polling its queues: one started with another config (another
 * model, plugin modules or data directory: workers/taskQueues.ts) is refused with the config to
 * resume it with.
 */
async function isOpenHere(client: Client, runId: string, config: QueueScopedConfig): Promise<boolean> {
  const description = await client.workflow
    .getHandle(runId)
    .describe()
    .catch(() => undefined);
  if (description?.status.name !== 'RUNNING') return false;
  const own = taskQueuesOf(config).workflows;
  if (description.taskQueue === own) return true;
  const started = configFileOf(description.memo);
  throw new OpenRunElsewhereError(
    `run ${runId} is open on task queue ${description.taskQueue}, not on this config's (${own}): it was started with another model, ` +
      `plugin modules or data directory; resume it with the config it was started with${started ? ` (${started})` : ''}, or pick another --run-id`,
  );
}

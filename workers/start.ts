/**
 * Starts the workers of the chosen roles in this process and runs them until shutdown. One role
 * per process scales each alone (`trajflow worker --role inference` on every GPU host); several
 * roles in one process is the single-machine setup (the trainer is best kept in its own process,
 * since a train step holds the event loop).
 */
import { Worker } from '@temporalio/worker';
import type { RunConfig } from '../config/schema';
import { createProvider } from '../src/model/createProvider';
import type { InferenceProvider } from '../src/inference/provider';
import { installTemporalLogging, Logger } from '../src/log';
import { loadPluginModules } from '../src/plugins/modules';
import { TrajectoryStore } from '../src/store/trajectoryStore';
import { connectWorker, resolveTemporal } from '../src/temporal/connection';
import { tracer } from '../src/trace/recorder';
import { GAUGE_SAMPLE_MS, prometheusExporter, sampleEvery, trajflowMetrics } from '../src/metrics/meter';
import { createAgentWorker } from './agentWorker';
import { startOpenAiEndpoint } from './openAiEndpoint';
import { createEnvWorkers } from './envWorker';
import { createInferenceHost, type InferenceHost } from './inferenceHost';
import { createInferenceWorker } from './inferenceWorker';
import { createTrainerWorker } from './trainerWorker';
import { startPythonTrainer, type PythonTrainer } from './pythonTrainer';
import { createWorkflowWorker } from './workflowWorker';
import { createSessionHost } from './sessionHost';

export const ROLES = ['workflows', 'inference', 'env', 'trainer'] as const;
export type Role = (typeof ROLES)[number];

/** The roles a rollout needs; a training run adds the trainer. */
export const ROLLOUT_ROLES: readonly Role[] = ['workflows', 'inference', 'env'];

/** Worker roles that cannot run as asked: an unknown one, or a set one process cannot serve under its config. */
export class WorkerRolesError extends Error {
  override name = 'WorkerRolesError';
}

/** Parses `--role`: one role, a comma-separated list, or `all`. */
export function parseRoles(text: string): Role[] {
  if (text === 'all') return [...ROLES];
  const roles = text.split(',').map((r) => r.trim());
  for (const role of roles) {
    if (!(ROLES as readonly string[]).includes(role))
      throw new WorkerRolesError(`unknown worker role ${JSON.stringify(role)}; roles: ${ROLES.join(', ')}, all`);
  }
  return roles as Role[];
}

export interface RunningWorkers {
  /** Resolves when every worker has stopped. */
  done: Promise<void>;
  /** Stops polling, lets in-flight tasks finish, releases the engine and env sessions. */
  shutdown(): Promise<void>;
  /** Writes the engine counters now (the run summary reads them). */
  flushEngineStats(): Promise<void>;
  /** The Prometheus endpoint, when config `metrics.prometheusPort` is set. */
  metricsUrl?: string;
}

export interface StartOptions {
  /** Inference backend to serve; by default the one the config names (the embedded engine). */
  provider?: InferenceProvider;
}

export async function startWorkers(config: RunConfig, roles: readonly Role[], logger: Logger, options: StartOptions = {}): Promise<RunningWorkers> {
  const has = (r: Role) => roles.includes(r);
  const generatesLocally = config.inference.calls === 'local' && has('workflows');
  if (generatesLocally && !has('inference')) {
    throw new WorkerRolesError(
      "inference.calls is local: the workflow worker runs generate over its own process's model, so it needs the inference role beside it (--role workflows,inference), or set inference.calls to inference-worker",
    );
  }
  const { prometheusPort, host } = config.metrics;
  const metricsAddress = prometheusPort === undefined ? undefined : `${host}:${prometheusPort}`;
  const exported = installTemporalLogging(logger, { metrics: metricsAddress ? prometheusExporter(metricsAddress) : undefined });
  if (metricsAddress && !exported) logger.warn('the Temporal runtime was set up earlier in this process: its metrics are not exported');
  // Before the engine starts: its thread records only if tracing is on (config `trace`).
  tracer.configure(config.trace ?? {});
  // Sessions and the trainer's warm-up and evaluation create the config's environments and agents.
  loadPluginModules(config.modules);
  const target = resolveTemporal(config.temporal);
  const temporal = await connectWorker(target);
  const store = new TrajectoryStore(config.dataDir);

  const workers: Worker[] = [];
  const cleanups: (() => Promise<void> | void)[] = [];
  let flushEngineStats = async () => undefined as void;

  let inference: InferenceHost | undefined;
  if (has('inference')) {
    const provider = options.provider ?? (await createProvider(config, logger.child({ role: 'inference' })));
    inference = await createInferenceHost(config, store, provider, logger.child({ role: 'inference' }));
    const { stats } = inference;
    workers.push(await createInferenceWorker(config, temporal, inference));
    stats.start();
    flushEngineStats = () => stats.flush();
    const stopSampling = sampleEvery(GAUGE_SAMPLE_MS, async () => {
      const s = await provider.stats();
      trajflowMetrics().recordEngine({
        busySeconds: s.busyMs / 1000,
        uptimeSeconds: s.uptimeMs / 1000,
        generatedTokens: s.generatedTokens,
        decodeSteps: s.decodeSteps,
        meanBatchSize: s.decodeSteps > 0 ? s.batchSizeSum / s.decodeSteps : 0,
        runningSequences: s.running,
        waitingSequences: s.waiting,
        policyVersion: s.policyVersion,
      });
    });
    cleanups.push(
      stopSampling,
      () => stats.stop(),
      () => provider.close(),
    );
    const endpoint = await startOpenAiEndpoint(config, logger.child({ role: 'inference' }));
    if (endpoint) cleanups.unshift(() => endpoint.close());
  }
  // Env workers hold episode sessions; workflow workers hold those of `env.sessions: local` runs.
  if (has('env') || has('workflows')) {
    const sessionHost = createSessionHost(config, store, logger.child({ role: 'env' }));
    if (has('env')) workers.push(...(await createEnvWorkers(config, temporal, sessionHost, logger.child({ role: 'env' }))));
    if (has('workflows')) {
      workers.push(await createWorkflowWorker(config, temporal, sessionHost, generatesLocally ? inference : undefined));
      // An agent written as a workflow, hosted by trajflow: its workflows run beside trajflow's.
      const agentWorker = await createAgentWorker(config, temporal);
      if (agentWorker) workers.push(agentWorker);
    }
    sessionHost.busy.start();
    cleanups.push(
      sampleEvery(GAUGE_SAMPLE_MS, () => trajflowMetrics().recordBusy('env', sessionHost.busyTracker.stats())),
      () => sessionHost.sessions.closeAll(),
      () => sessionHost.busy.stop(),
    );
  }
  // A real model (`model.path`) is trained by the Python trainer, in a child process.
  let pythonTrainer: PythonTrainer | undefined;
  let shuttingDown = false;
  if (has('trainer')) {
    if (config.model.path) pythonTrainer = await startPythonTrainer(config, target, logger.child({ role: 'trainer' }));
    else workers.push(await createTrainerWorker(config, temporal, store, logger.child({ role: 'trainer' })));
  }
  const trainerExited = pythonTrainer?.done.then(() => {
    if (!shuttingDown) throw new Error('the Python trainer exited unexpectedly; restart this worker (completed train steps are kept)');
  });

  const metricsUrl = exported ? `http://${metricsAddress}/metrics` : undefined;
  if (metricsUrl) logger.info({ metrics: metricsUrl }, 'Prometheus metrics endpoint');

  const done = Promise.all([...workers.map((w) => w.run()), trainerExited]).then(async () => {
    for (const cleanup of cleanups) await cleanup();
    await temporal.connection.close();
    await tracer.flush();
  });
  logger.info({ roles, address: target.address, namespace: target.namespace, taskQueues: workers.map((w) => w.options.taskQueue) }, 'workers polling');
  return {
    done,
    flushEngineStats,
    metricsUrl,
    async shutdown() {
      shuttingDown = true;
      for (const worker of workers) if (worker.getState() === 'RUNNING') worker.shutdown();
      await pythonTrainer?.shutdown();
      await done;
    },
  };
}

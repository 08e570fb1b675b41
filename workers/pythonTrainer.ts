/**
 * Trainer worker of a real model (`model.path`): the Python trainer (python/trajflow_py/trainer,
 * PyTorch + transformers) polls `<prefix>-trainer` for the same activities as the embedded trainer
 * (`preparePolicy`, `trainStep`, same names and JSON); with `trainer.distributed`, torchrun starts
 * it once per rank and rank 0 alone polls. This module starts it as a child process
 * with this worker's connection settings as resolved here (address, namespace, API key, TLS: the
 * same cluster whatever its own environment says), data directory and fingerprint, and stops it
 * with this worker:
 * a Python trainer never outlives the `trajflow worker` that started it, even one SIGKILLed.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { WorkerDeploymentVersion } from '@temporalio/common';
import type { ConfigDataSource } from '@temporalio/envconfig';
import type { RunConfig, TrainerConfig } from '../config/schema';
import { compatibilityOf } from '../src/core/compatibility';
import type { Logger } from '../src/log';
import { buildId, PYTHON_BIN, PYTHON_SOURCES } from '../src/paths';
import type { TemporalTarget } from '../src/temporal/connection';
import { deploymentVersionOf } from './deployment';
import { taskQueuesOf } from './taskQueues';

/** The line the Python trainer prints once it polls (rank 0 of a distributed one). */
const READY_LINE = 'workers polling';
/** The line each other rank of a distributed trainer prints once it joined (python/trajflow_py/trainer/lockstep.py). */
const FOLLOWING_LINE = 'trainer rank following the leader';
/** The Python trainer loads torch and transformers before it polls. */
const START_TIMEOUT_MS = 180_000;
/** How long an in-flight step may take to finish or hand back after SIGTERM. */
const STOP_GRACE_MS = 30_000;

/** A certificate or key as a path or as its PEM text. */
type PythonDataSource = { path: string } | { data: string };

/** The resolved client profile, which the Python side turns into a temporalio.envconfig profile. */
export interface PythonTemporalSettings {
  address: string;
  namespace: string;
  apiKey?: string;
  tls?: { disabled?: boolean; serverName?: string; serverCaCert?: PythonDataSource; clientCert?: PythonDataSource; clientKey?: PythonDataSource };
  grpcMeta?: Record<string, string>;
}

/** What the Python trainer reads at start (python/trajflow_py/trainer/settings.py). */
export interface PythonTrainerSettings {
  temporal: PythonTemporalSettings;
  taskQueue: string;
  dataDir: string;
  modelPath: string;
  compatibility: ReturnType<typeof compatibilityOf>;
  identity: string;
  /** The version of the worker deployment it polls as (workers/deployment.ts); absent: unversioned. */
  deployment?: WorkerDeploymentVersion;
}

export interface PythonTrainer {
  /** Resolves when the Python process has exited. */
  done: Promise<void>;
  shutdown(): Promise<void>;
}

function pythonSource(source: ConfigDataSource | undefined): PythonDataSource | undefined {
  if (!source) return undefined;
  if ('path' in source) return { path: source.path };
  return { data: typeof source.data === 'string' ? source.data : Buffer.from(source.data).toString('utf8') };
}

function pythonTemporalSettings(target: TemporalTarget): PythonTemporalSettings {
  const { apiKey, tls, grpcMeta } = target.profile;
  return {
    address: target.address,
    namespace: target.namespace,
    ...(apiKey ? { apiKey } : {}),
    ...(tls
      ? {
          tls: {
            disabled: tls.disabled,
            serverName: tls.serverName,
            serverCaCert: pythonSource(tls.serverCACert),
            clientCert: pythonSource(tls.clientCert),
            clientKey: pythonSource(tls.clientKey),
          },
        }
      : {}),
    ...(grpcMeta ? { grpcMeta } : {}),
  };
}

export function pythonTrainerSettings(config: RunConfig, target: TemporalTarget): PythonTrainerSettings {
  if (!config.model.path) throw new Error('the Python trainer trains a real model: set model.path');
  return {
    temporal: pythonTemporalSettings(target),
    taskQueue: taskQueuesOf(config).trainer,
    dataDir: path.resolve(config.dataDir),
    modelPath: config.model.path,
    compatibility: compatibilityOf(config, buildId()),
    identity: `python-trainer@${os.hostname()}/${process.pid}`,
    deployment: deploymentVersionOf(config),
  };
}

type DistributedTrainer = TrainerConfig['distributed'];

function isDistributed({ processes, hosts }: DistributedTrainer): boolean {
  return processes > 1 || hosts > 1;
}

/**
 * The Python arguments that start the trainer: the worker module itself, or torchrun starting it
 * once per rank of this host (and restarting every rank when one fails). `rendezvousId` names the
 * trainer the hosts of a multi-host one meet as.
 */
export function pythonTrainerArgs(distributed: DistributedTrainer, settingsFile: string, rendezvousId: string): string[] {
  const worker = ['-m', 'trajflow_py.trainer', '--settings', settingsFile];
  if (!isDistributed(distributed)) return worker;
  const { processes, hosts, rendezvous, maxRestarts } = distributed;
  const meeting = hosts > 1 ? ['--rdzv-backend=c10d', `--rdzv-endpoint=${rendezvous}`, `--rdzv-id=${rendezvousId}`] : ['--standalone'];
  return ['-m', 'torch.distributed.run', `--nnodes=${hosts}`, `--nproc-per-node=${processes}`, `--max-restarts=${maxRestarts}`, ...meeting, ...worker];
}

/** CPU threads per rank: the host's cores shared among its ranks (unless the user set OMP_NUM_THREADS). */
function threadsPerRank({ processes }: DistributedTrainer): Record<string, string> {
  if (process.env.OMP_NUM_THREADS !== undefined || processes === 1) return {};
  return { OMP_NUM_THREADS: String(Math.max(1, Math.floor(os.availableParallelism() / processes))) };
}

export async function startPythonTrainer(config: RunConfig, target: TemporalTarget, logger: Logger): Promise<PythonTrainer> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'trajflow-trainer-'));
  const settingsFile = path.join(dir, 'settings.json');
  // Only this user may read it: it may hold an API key (the folder is mkdtemp's, 0700, too).
  writeFileSync(settingsFile, JSON.stringify(pythonTrainerSettings(config, target)), { mode: 0o600 });
  const { distributed } = config.trainer;
  const child = spawn(PYTHON_BIN, pythonTrainerArgs(distributed, settingsFile, taskQueuesOf(config).trainer), {
    cwd: PYTHON_SOURCES,
    stdio: ['ignore', 'pipe', 'inherit'],
    env: {
      ...process.env,
      ...threadsPerRank(distributed),
      HF_HUB_OFFLINE: '1',
      TRANSFORMERS_OFFLINE: '1',
      TRAJFLOW_PARENT_PID: String(process.pid),
      PYTHONUNBUFFERED: '1',
    },
  });
  // On a host of a multi-host trainer, rank 0 (the one that polls) may be another host's.
  const readyLines = distributed.hosts > 1 ? [READY_LINE, FOLLOWING_LINE] : [READY_LINE];
  const exited = new Promise<number | string>((resolve) => child.once('exit', (code, signal) => resolve(code ?? signal ?? 'unknown')));
  const done = exited.then((how) => {
    rmSync(dir, { recursive: true, force: true });
    logger.info({ exit: how }, 'Python trainer exited');
  });
  await new Promise<void>((resolve, reject) => {
    // Its output goes on to this process's; the ready line may arrive split across chunks.
    let recent = '';
    let ready = false;
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`the Python trainer did not poll within ${START_TIMEOUT_MS / 1000} s`));
    }, START_TIMEOUT_MS);
    child.stdout!.on('data', (chunk: Buffer) => {
      process.stdout.write(chunk);
      if (ready) return;
      recent = (recent + chunk.toString()).slice(-8192);
      if (readyLines.some((line) => recent.includes(line))) {
        ready = true;
        clearTimeout(timer);
        resolve();
      }
    });
    void exited.then((how) => {
      clearTimeout(timer);
      if (!ready) reject(new Error(`the Python trainer exited (${how}) before it polled; is the Python environment set up (bash scripts/setup.sh)?`));
    });
  });
  logger.info({ pid: child.pid, taskQueue: taskQueuesOf(config).trainer }, 'Python trainer polling');
  return {
    done,
    async shutdown() {
      if (child.exitCode !== null || child.signalCode !== null) return done;
      child.kill('SIGTERM');
      const killer = setTimeout(() => child.kill('SIGKILL'), STOP_GRACE_MS);
      await done;
      clearTimeout(killer);
    },
  };
}

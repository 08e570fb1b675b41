/**
 * Worker and server processes as children writing straight into a log file, started and stopped
 * like a real deployment's: `trajflow worker --role ...` (the trainer of `trajflow train --local`,
 * the workers of fault tests and the soak script), and the Python trainer worker and model servers
 * of a real-model run.
 */
import { ChildProcess, spawn } from 'node:child_process';
import { appendFileSync, closeSync, openSync, readSync, statSync } from 'node:fs';
import path from 'node:path';
import { PROJECT_ROOT } from '../src/paths';

const CLI = path.join(PROJECT_ROOT, 'bin', 'trajflow.js');

/**
 * Set in a worker child's environment to its parent's pid: the child shuts down once that parent is
 * gone (even SIGKILLed, when it could not stop its children). Only children that must not outlive
 * the command that started them get it; a `trajflow worker` started by a user or a process manager
 * runs on its own.
 */
export const PARENT_PID_ENV = 'TRAJFLOW_PARENT_PID';

/**
 * How long a worker child may take to stop after SIGTERM (finish or hand back its in-flight
 * activities, release its sessions) before it is SIGKILLed.
 */
export const WORKER_STOP_GRACE_MS = 10_000;

/** A worker child process and the file its stdout and stderr go to. */
export interface LoggedWorker {
  child: ChildProcess;
  logFile: string;
}

export interface SpawnOptions {
  /** How long the worker may take to start polling. */
  timeoutMs?: number;
  /** Shut the worker down when this process dies (see {@link PARENT_PID_ENV}). */
  exitWithParent?: boolean;
}

/** The text appended to `file` after byte `offset`. */
function readFrom(file: string, offset: number): string {
  const fd = openSync(file, 'r');
  try {
    const chunks: Buffer[] = [];
    const buffer = Buffer.alloc(64 * 1024);
    for (let at = offset, n; (n = readSync(fd, buffer, 0, buffer.length, at)) > 0; at += n) chunks.push(Buffer.from(buffer.subarray(0, n)));
    return Buffer.concat(chunks).toString();
  } finally {
    closeSync(fd);
  }
}

/** A process to start with its output kept in a log file, and the line it prints once ready. */
export interface ProcessSpec {
  /** Names the process in the log and in errors. */
  name: string;
  command: string;
  args: string[];
  cwd?: string;
  env?: NodeJS.ProcessEnv;
  /** Printed by the process once it serves (polls its queues, listens on its port). */
  readyLine: string;
}

/**
 * Starts a process with its output appended to `logFile`; resolves once it prints its ready line.
 * The child writes the file itself, so its log outlives this process and never blocks on it.
 */
export function spawnLoggedProcess(spec: ProcessSpec, logFile: string, options: SpawnOptions = {}): Promise<LoggedWorker> {
  const { timeoutMs = 120_000, exitWithParent = false } = options;
  appendFileSync(logFile, `--- ${new Date().toISOString()} pid ${process.pid} starts: ${spec.name}\n`);
  const offset = statSync(logFile).size;
  const out = openSync(logFile, 'a');
  const child = spawn(spec.command, spec.args, {
    cwd: spec.cwd,
    stdio: ['ignore', out, out],
    env: { ...process.env, ...spec.env, ...(exitWithParent ? { [PARENT_PID_ENV]: String(process.pid) } : {}) },
  });
  closeSync(out);
  return new Promise((resolve, reject) => {
    const output = () => readFrom(logFile, offset);
    const settle = (error?: Error) => {
      clearInterval(watch);
      clearTimeout(timer);
      child.off('exit', onExit);
      if (error) reject(error);
      else resolve({ child, logFile });
    };
    const watch = setInterval(() => {
      if (output().includes(spec.readyLine)) settle();
    }, 100);
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      settle(new Error(`${spec.name} was not ready within ${timeoutMs} ms:\n${output().slice(-3000)}`));
    }, timeoutMs);
    const onExit = (code: number | null, signal: NodeJS.Signals | null) =>
      settle(new Error(`${spec.name} exited (${code ?? signal}) before it was ready:\n${output().slice(-3000)}`));
    child.once('exit', onExit);
  });
}

/**
 * Starts `trajflow worker --role <roles>` (the compiled CLI, so SIGKILL kills a real worker);
 * resolves once it polls.
 */
export function spawnLoggedWorker(roles: string, configFile: string, logFile: string, options: SpawnOptions = {}): Promise<LoggedWorker> {
  return spawnLoggedProcess(
    {
      name: `trajflow worker --role ${roles}`,
      command: process.execPath,
      args: [CLI, 'worker', '--role', roles, '-c', configFile],
      // The child inherits TRAJFLOW_WORKFLOW_BUNDLE, if set: a prebuilt bundle starts much faster.
      env: { TRAJFLOW_LOG_LEVEL: 'info' },
      readyLine: 'workers polling',
    },
    logFile,
    options,
  );
}

export function isRunning(worker: LoggedWorker): boolean {
  return worker.child.exitCode === null && worker.child.signalCode === null;
}

/** Resolves once the worker has exited. */
function exited(worker: LoggedWorker): Promise<void> {
  return new Promise((resolve) => {
    if (!isRunning(worker)) return resolve();
    worker.child.once('exit', () => resolve());
  });
}

/** SIGKILLs a worker (no shutdown hook runs) and resolves once it is gone. */
export async function killWorker(worker: LoggedWorker | undefined): Promise<void> {
  if (!worker || !isRunning(worker)) return;
  const gone = exited(worker);
  worker.child.kill('SIGKILL');
  await gone;
}

/**
 * Stops a worker as a process manager would: SIGTERM (it stops polling and lets its in-flight
 * activities finish or hand back), then SIGKILL if it is still there after `graceMs`. Resolves
 * once it is gone.
 */
export async function stopWorker(worker: LoggedWorker | undefined, graceMs = WORKER_STOP_GRACE_MS): Promise<void> {
  if (!worker || !isRunning(worker)) return;
  const gone = exited(worker);
  worker.child.kill('SIGTERM');
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'late'>((resolve) => {
    timer = setTimeout(() => resolve('late'), graceMs);
  });
  const outcome = await Promise.race([gone, late]);
  clearTimeout(timer);
  if (outcome === 'late') await killWorker(worker);
}

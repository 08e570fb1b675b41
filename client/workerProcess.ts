/**
 * Worker processes for fault tests and the soak script: `trajflow worker --role ...` as a child
 * process with its output kept in a log file, started and SIGKILLed like a real deployment's.
 */
import { ChildProcess, spawn } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import path from 'node:path';
import { PROJECT_ROOT } from '../src/paths';

const CLI = path.join(PROJECT_ROOT, 'bin', 'trajflow.js');

/** A worker child process and the file its stdout and stderr go to. */
export interface LoggedWorker {
  child: ChildProcess;
  logFile: string;
}

/**
 * Starts `trajflow worker --role <roles>` (the compiled CLI, so SIGKILL kills a real worker) with
 * its output appended to `logFile`; resolves once it polls.
 */
export function spawnLoggedWorker(roles: string, configFile: string, logFile: string, timeoutMs = 120_000): Promise<LoggedWorker> {
  const child = spawn(process.execPath, [CLI, 'worker', '--role', roles, '-c', configFile], {
    stdio: ['ignore', 'pipe', 'pipe'],
    // The child inherits TRAJFLOW_WORKFLOW_BUNDLE, if set: a prebuilt bundle starts much faster.
    env: { ...process.env, TRAJFLOW_LOG_LEVEL: 'info' },
  });
  const log = createWriteStream(logFile, { flags: 'a' });
  log.write(`--- ${new Date().toISOString()} pid ${child.pid}: trajflow worker --role ${roles}\n`);
  child.stdout!.pipe(log, { end: false });
  child.stderr!.pipe(log, { end: false });
  return new Promise((resolve, reject) => {
    let output = '';
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`worker ${roles} did not poll within ${timeoutMs} ms:\n${output.slice(-3000)}`));
    }, timeoutMs);
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes('workers polling')) {
        clearTimeout(timer);
        child.stdout!.off('data', onData);
        child.stderr!.off('data', onData);
        resolve({ child, logFile });
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`worker ${roles} exited (${code ?? signal}) before polling:\n${output.slice(-3000)}`));
    });
  });
}

/** SIGKILLs a worker (no shutdown hook runs) and resolves once it is gone. */
export function killWorker(worker: LoggedWorker | undefined): Promise<void> {
  const child = worker?.child;
  return new Promise((resolve) => {
    if (!child || child.exitCode !== null || child.signalCode !== null) return resolve();
    child.once('exit', () => resolve());
    child.kill('SIGKILL');
  });
}

export function isRunning(worker: LoggedWorker): boolean {
  return worker.child.exitCode === null && worker.child.signalCode === null;
}


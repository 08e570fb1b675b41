/**
 * Shared pieces of the "crash anything, lose nothing" fault tests: worker processes whose output
 * is kept in a log file (the evidence when a test fails), bounded waits that say what hung, and
 * an audit of a run's trajectory store.
 */
import { ChildProcess, spawn } from 'node:child_process';
import { createWriteStream, existsSync, promises as fs, readFileSync } from 'node:fs';
import path from 'node:path';
import type { WorkflowHandle } from '@temporalio/client';
import type { TrajectoryStore } from '../../src/store/trajectoryStore';

const CLI = path.join(__dirname, '..', '..', 'bin', 'trajflow.js');

/** A worker child process and the file its stdout and stderr go to. */
export interface LoggedWorker {
  child: ChildProcess;
  logFile: string;
}

/**
 * Starts `trajflow worker --role <roles>` (the compiled CLI, so SIGKILL kills a real worker) with
 * its output appended to `logFile`; resolves once it polls. Workflow workers load the suite's
 * prebuilt workflow bundle instead of bundling again (same code, much faster start on 2 cores).
 */
export function spawnLoggedWorker(roles: string, configFile: string, logFile: string, timeoutMs = 120_000): Promise<LoggedWorker> {
  const child = spawn(process.execPath, [CLI, 'worker', '--role', roles, '-c', configFile], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: {
      ...process.env,
      TRAJFLOW_LOG_LEVEL: 'info',
      ...(process.env.TRAJFLOW_TEST_WORKFLOW_BUNDLE ? { TRAJFLOW_WORKFLOW_BUNDLE: process.env.TRAJFLOW_TEST_WORKFLOW_BUNDLE } : {}),
    },
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

export function tail(file: string, chars = 4000): string {
  return existsSync(file) ? readFileSync(file, 'utf8').slice(-chars) : `(no ${file})`;
}

/**
 * Awaits `promise`, or fails after `ms` with `what` and whatever `evidence` returns (log tails,
 * workflow status), so a hang is a clear failure instead of a jest timeout.
 */
export async function within<T>(promise: Promise<T>, ms: number, what: string, evidence: () => string | Promise<string> = () => ''): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      Promise.resolve()
        .then(evidence)
        .catch((err) => `(evidence unavailable: ${String(err)})`)
        .then((text) => reject(new Error(`${what}: not done within ${ms / 1000} s\n${text}`)));
    }, ms);
  });
  try {
    return await Promise.race([promise, deadline]);
  } finally {
    clearTimeout(timer);
  }
}

/** Polls `check` every `everyMs` until it returns a value; fails after `timeoutMs` naming `what`. */
export async function waitFor<T>(what: string, check: () => Promise<T | undefined>, timeoutMs: number, everyMs = 200): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs / 1000} s`);
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}

/** Trajectories of a run with a stored summary (finished), and those with turns but none yet. */
export async function trajectoryProgress(store: TrajectoryStore, runId: string): Promise<{ finished: number; inFlight: number }> {
  let finished = 0;
  let inFlight = 0;
  for (const id of await store.listTrajectories(runId)) {
    if (await store.getTrajectory(runId, id)) finished++;
    else inFlight++;
  }
  return { finished, inFlight };
}

/**
 * Everything wrong with a finished rollout's store, as sentences (empty = exactly once): every
 * expected trajectory stored once with a summary, its turn files exactly 0..turns-1 (contiguous,
 * none missing, none extra), every group record listing exactly its own trajectories.
 */
export async function auditRun(store: TrajectoryStore, runId: string, groupIds: string[], groupSize: number): Promise<string[]> {
  const problems: string[] = [];
  const expected = groupIds.flatMap((g) => Array.from({ length: groupSize }, (_, i) => `${g}.t${String(i).padStart(3, '0')}`)).sort();
  const stored = await store.listTrajectories(runId);
  if (JSON.stringify(stored) !== JSON.stringify(expected)) problems.push(`stored trajectories ${JSON.stringify(stored)} != expected ${JSON.stringify(expected)}`);
  for (const id of stored) {
    const summary = await store.getTrajectory(runId, id);
    if (!summary) {
      problems.push(`${id}: no summary`);
      continue;
    }
    if (summary.status === 'failed') problems.push(`${id}: failed (${summary.reason})`);
    const dir = path.join(store.runDir(runId), 'trajectories', id);
    const turnFiles = (await fs.readdir(dir)).filter((name) => /^turn-\d+\.json$/.test(name)).sort();
    const contiguous = Array.from({ length: summary.turns }, (_, t) => `turn-${String(t).padStart(6, '0')}.json`);
    if (JSON.stringify(turnFiles) !== JSON.stringify(contiguous)) problems.push(`${id}: turn files ${turnFiles.join(',')} != 0..${summary.turns - 1}`);
    for (const [t, name] of turnFiles.entries()) {
      const turn = JSON.parse(await fs.readFile(path.join(dir, name), 'utf8'));
      if (turn.trajectoryId !== id || turn.turn !== t) problems.push(`${id}/${name}: holds trajectory ${turn.trajectoryId} turn ${turn.turn}`);
    }
  }
  for (const groupId of groupIds) {
    const group = await store.getGroup(runId, groupId);
    if (!group) {
      problems.push(`${groupId}: no group record`);
      continue;
    }
    const members = [...group.trajectoryIds, ...group.failed.map((f) => f.trajectoryId)].sort();
    const own = expected.filter((id) => id.startsWith(`${groupId}.`));
    if (JSON.stringify(members) !== JSON.stringify(own)) problems.push(`${groupId}: lists ${members.join(',')}, expected ${own.join(',')}`);
    if (group.failed.length) problems.push(`${groupId}: failed trajectories ${JSON.stringify(group.failed)}`);
  }
  return problems;
}

/** Activity attempts in a workflow's history, by activity type: scheduled count and retried ones. */
export async function activityAttempts(handle: WorkflowHandle): Promise<Record<string, { scheduled: number; attempts: number[] }>> {
  const history = await handle.fetchHistory();
  const typeOf = new Map<string, string>();
  const byType: Record<string, { scheduled: number; attempts: number[] }> = {};
  for (const event of history.events ?? []) {
    const scheduled = event.activityTaskScheduledEventAttributes;
    if (scheduled) {
      const type = scheduled.activityType?.name ?? '?';
      typeOf.set(String(event.eventId), type);
      (byType[type] ??= { scheduled: 0, attempts: [] }).scheduled++;
    }
    const started = event.activityTaskStartedEventAttributes;
    if (started) {
      const type = typeOf.get(String(started.scheduledEventId)) ?? '?';
      (byType[type] ??= { scheduled: 0, attempts: [] }).attempts.push(started.attempt ?? 1);
    }
  }
  return byType;
}

/**
 * Shared pieces of the "crash anything, lose nothing" fault tests: worker processes whose output
 * is kept in a log file (the evidence when a test fails), bounded waits that say what hung, and
 * an audit of a run's trajectory store.
 */
import { existsSync, promises as fs, readFileSync } from 'node:fs';
import path from 'node:path';
import type { Client } from '@temporalio/client';
import { openWorkflowsQuery } from '../../client/runWorkflows';
import { trajectoryIdOf } from '../../src/core/ids';
import type { TurnRecord } from '../../src/core/records';
import { readJson } from '../../src/store/files';
import type { TrajectoryStore } from '../../src/store/trajectoryStore';
import { isTurnFileName, runLayout } from '../../src/store/runLayout';

export { isRunning, killWorker, spawnLoggedWorker, type LoggedWorker } from '../../client/workerProcess';

// Worker processes load the suite's prebuilt workflow bundle instead of bundling again (same code,
// a much faster start on 2 cores).
if (process.env.TRAJFLOW_TEST_WORKFLOW_BUNDLE) process.env.TRAJFLOW_WORKFLOW_BUNDLE ??= process.env.TRAJFLOW_TEST_WORKFLOW_BUNDLE;
export { activityAttempts, localActivityResults } from '../../src/temporal/history';

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
      void Promise.resolve()
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

/** Names of Temporal's PendingActivityState values, by number. */
const PENDING_ACTIVITY_STATES = ['unspecified', 'scheduled', 'started', 'cancel requested', 'paused', 'pause requested'];
/** PENDING_ACTIVITY_STATE_STARTED: a worker has taken the attempt and not yet answered. */
export const PENDING_ACTIVITY_STARTED = PENDING_ACTIVITY_STATES.indexOf('started');

/**
 * What `runId`'s open workflows wait on, one line each with its pending activities (type, state,
 * attempt, last failure): the evidence when a run does not finish, naming the activity it hangs on.
 */
export async function pendingWork(client: Client, runId: string): Promise<string> {
  const lines: string[] = [];
  for await (const execution of client.workflow.list({ query: openWorkflowsQuery(runId) })) {
    const { raw } = await client.workflow.getHandle(execution.workflowId).describe();
    const activities = (raw.pendingActivities ?? []).map((a) => {
      const state = PENDING_ACTIVITY_STATES[a.state ?? 0] ?? `state ${a.state}`;
      const failure = a.lastFailure?.message ? ` (last failure: ${a.lastFailure.message})` : '';
      return `${a.activityType?.name} ${state} attempt ${a.attempt ?? 1}${failure}`;
    });
    lines.push(`${execution.workflowId} (${execution.type}): ${activities.join('; ') || 'no pending activity'}`);
  }
  return lines.length ? lines.join('\n') : `no open workflow of ${runId}`;
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
  const turns = await storedTurns(store, runId);
  return { finished: turns.finished.length, inFlight: turns.inFlight.size };
}

/**
 * The run's trajectories as the store holds them now: those with a summary, and the turn files
 * stored so far by each of the others (a trajectory is listed once its first turn is stored).
 */
export async function storedTurns(store: TrajectoryStore, runId: string): Promise<{ finished: string[]; inFlight: Map<string, number> }> {
  const finished: string[] = [];
  const inFlight = new Map<string, number>();
  const run = runLayout(store.root, runId);
  for (const id of await store.listTrajectories(runId)) {
    if (await store.getTrajectory(runId, id)) finished.push(id);
    else inFlight.set(id, (await fs.readdir(run.trajectoryDir(id)).catch(() => [] as string[])).filter(isTurnFileName).length);
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
  const expected = groupIds.flatMap((g) => Array.from({ length: groupSize }, (_, i) => trajectoryIdOf(g, i))).sort();
  const stored = await store.listTrajectories(runId);
  if (JSON.stringify(stored) !== JSON.stringify(expected))
    problems.push(`stored trajectories ${JSON.stringify(stored)} != expected ${JSON.stringify(expected)}`);
  for (const id of stored) {
    const summary = await store.getTrajectory(runId, id);
    if (!summary) {
      problems.push(`${id}: no summary`);
      continue;
    }
    if (summary.status === 'failed') problems.push(`${id}: failed (${summary.reason})`);
    const run = runLayout(store.root, runId);
    const dir = run.trajectoryDir(id);
    const turnFiles = (await fs.readdir(dir)).filter(isTurnFileName).sort();
    const contiguous = Array.from({ length: summary.turns }, (_, t) => path.basename(run.turnFile(id, t)));
    if (JSON.stringify(turnFiles) !== JSON.stringify(contiguous)) problems.push(`${id}: turn files ${turnFiles.join(',')} != 0..${summary.turns - 1}`);
    for (const [t, name] of turnFiles.entries()) {
      const turn = (await readJson<TurnRecord>(path.join(dir, name)))!;
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

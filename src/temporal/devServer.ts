/**
 * Starts, stops and checks the local Temporal dev server: SQLite in WAL mode under the data
 * directory, trajflow's search attributes registered, its task processors tuned for low latency,
 * running detached so it outlives the CLI.
 */
import { spawn } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { Connection } from '@temporalio/client';
import { ensureTemporalBinary } from './binary';
import { prepareNamespace } from './cluster';
import { DEFAULT_NAMESPACE, LOCAL_PORT } from './defaults';
import { portIsFree } from '../ports';
import { searchAttributeCliArgs } from './searchAttributes';

export interface DevServerOptions {
  dataDir: string;
  ip?: string;
  port?: number;
  uiPort?: number;
  headless?: boolean;
  /**
   * A namespace to have ready besides `default` (which the server's flags prepare): created if
   * missing and trajflow's search attributes registered, on a new server or one already running.
   */
  namespace?: string;
  log?: (line: string) => void;
}

export interface DevServerInfo {
  pid: number;
  address: string;
  uiUrl?: string;
  dbFile: string;
  logFile: string;
  /** `TUNING_ARGS` the server was started with. */
  tuning?: readonly string[];
}

const PID_FILE = 'temporal-server.json';

/**
 * Settings that change how the server performs, recorded beside its pid so that a server started
 * with other ones is restarted rather than silently reused.
 *
 * The dev server runs one history shard, and each of its queue processors loads at most
 * `...MaxPollRPS` batches a second (default 20). Every activity dispatch and every workflow-task
 * dispatch is one load of the transfer queue, so at the default they are spaced ~50 ms apart: an
 * activity costs ~47 ms of orchestration however fast the worker is. The timer queue (timeouts,
 * retries' backoff, the episode deadline) and the visibility queue (search attributes the Web UI
 * and `trajflow status` filter by) wait the same way. One shard has little else to do, so the
 * limits are raised far above what a run can ask for.
 *
 * Each task queue is served by one matching partition instead of four: a task then always lands
 * where the workers' polls wait, rather than on a partition without a poll that must forward it,
 * which costs each activity a hop (docs/performance.md has the measurement).
 *
 * Long-lived workflows are told to continue as new after 1,024 history events rather than 4,096.
 * The rollout controller and the training workflow take signals all the time, so the workflow task
 * that continues as new nearly always races one: the server then fails that task, and the worker
 * replays the run's whole history before it can try again, holding the controller, and with it
 * every admission, for as long as the replay takes. A shorter history replays about as much in
 * all, but in pauses no longer than a trajectory (docs/how-it-runs.md has the timings).
 */
export const TUNING_ARGS: readonly string[] = [
  // WAL lets readers (the UI, visibility queries) run beside the single writer; NORMAL sync is
  // durable across process crashes, which is the failure the dev server must survive.
  '--sqlite-pragma',
  'journal_mode=wal',
  '--sqlite-pragma',
  'synchronous=normal',
  ...['transfer', 'timer', 'visibility'].flatMap((queue) => ['--dynamic-config-value', `history.${queue}ProcessorMaxPollRPS=1000`]),
  ...['Read', 'Write'].flatMap((side) => ['--dynamic-config-value', `matching.numTaskqueue${side}Partitions=1`]),
  '--dynamic-config-value',
  'limit.historyCount.suggestContinueAsNew=1024',
];

function serverDir(dataDir: string): string {
  return path.join(path.resolve(dataDir), 'temporal');
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** The server this data directory started, if it is still running. */
export function runningDevServer(dataDir: string): DevServerInfo | undefined {
  const file = path.join(serverDir(dataDir), PID_FILE);
  if (!existsSync(file)) return undefined;
  const info = JSON.parse(readFileSync(file, 'utf8')) as DevServerInfo;
  return isAlive(info.pid) ? info : undefined;
}

/** Resolves once the frontend answers; rejects after `timeoutMs`. */
export async function waitForServer(address: string, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      const connection = await Connection.connect({ address, connectTimeout: 1_000 });
      try {
        await connection.workflowService.getSystemInfo({});
        return;
      } finally {
        await connection.close();
      }
    } catch (err) {
      if (Date.now() > deadline) throw new Error(`Temporal server at ${address} did not answer within ${timeoutMs} ms: ${String(err)}`, { cause: err });
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  }
}

function sameTuning(info: DevServerInfo): boolean {
  return JSON.stringify(info.tuning ?? []) === JSON.stringify(TUNING_ARGS);
}

/**
 * Starts the dev server for `dataDir` unless it already runs with trajflow's current settings;
 * returns how to reach it. One started with other settings is restarted: its history is in the
 * SQLite file, and workers and clients reconnect, so nothing running is lost.
 */
export async function startDevServer(options: DevServerOptions): Promise<DevServerInfo> {
  const info = await startOrReuse(options);
  if (options.namespace && options.namespace !== DEFAULT_NAMESPACE) await readyNamespace(info.address, options.namespace);
  return info;
}

/** `trajflow cluster prepare --create-namespace`, done for the dev server's own namespace. */
async function readyNamespace(address: string, namespace: string): Promise<void> {
  const connection = await Connection.connect({ address });
  try {
    const origin = { address: 'the dev server', namespace: 'the run' };
    await prepareNamespace(connection, { address, namespace, profile: { address, namespace }, origin }, { createNamespace: true });
  } finally {
    await connection.close();
  }
}

async function startOrReuse(options: DevServerOptions): Promise<DevServerInfo> {
  const existing = runningDevServer(options.dataDir);
  if (existing && sameTuning(existing)) {
    await waitForServer(existing.address);
    return existing;
  }
  if (existing) {
    options.log?.(`the dev server at ${existing.address} (pid ${existing.pid}) was started with other settings: restarting it (its history is kept)`);
    await stopDevServer(options.dataDir);
  }
  const dir = serverDir(options.dataDir);
  mkdirSync(dir, { recursive: true });
  const ip = options.ip ?? '127.0.0.1';
  const port = options.port ?? LOCAL_PORT;
  // Otherwise the new server fails to bind, and the readiness check below finds whatever listens
  // there instead: this data directory's workflows would live in another server's history.
  if (!(await portIsFree(port, ip)))
    throw new Error(
      `cannot start the dev server of ${options.dataDir} on ${ip}:${port}: another process listens there. A --local run elsewhere leaves its dev server running: stop it (\`trajflow server stop --data-dir DIR\`), or give temporal.address another port`,
    );
  const uiPort = options.uiPort ?? port + 1000;
  const dbFile = path.join(dir, 'temporal.sqlite');
  const logFile = path.join(dir, 'server.log');
  const binary = ensureTemporalBinary(options.log);
  const args = [
    'server',
    'start-dev',
    '--ip',
    ip,
    '--port',
    String(port),
    '--db-filename',
    dbFile,
    ...TUNING_ARGS,
    '--log-level',
    'warn',
    ...(options.headless ? ['--headless'] : ['--ui-port', String(uiPort), '--ui-ip', ip, '--ui-disable-news-fetch']),
    ...searchAttributeCliArgs(),
  ];
  const out = openSync(logFile, 'a');
  const child = spawn(binary, args, { detached: true, stdio: ['ignore', out, out] });
  closeSync(out);
  child.unref();
  if (child.pid === undefined) throw new Error(`could not start ${binary}`);
  const info: DevServerInfo = {
    pid: child.pid,
    address: `${ip}:${port}`,
    uiUrl: options.headless ? undefined : `http://${ip}:${uiPort}`,
    dbFile,
    logFile,
    tuning: TUNING_ARGS,
  };
  writeFileSync(path.join(dir, PID_FILE), JSON.stringify(info, null, 2));
  try {
    await waitForServer(info.address);
  } catch (err) {
    const tail = existsSync(logFile) ? readFileSync(logFile, 'utf8').slice(-2000) : '';
    throw new Error(`${(err as Error).message}\nserver log (${logFile}):\n${tail}`, { cause: err });
  }
  return info;
}

/** Stops the dev server of `dataDir` (SIGTERM, then SIGKILL); the SQLite file stays. */
export async function stopDevServer(dataDir: string, timeoutMs = 15_000): Promise<boolean> {
  const info = runningDevServer(dataDir);
  if (!info) return false;
  process.kill(info.pid, 'SIGTERM');
  const deadline = Date.now() + timeoutMs;
  while (isAlive(info.pid) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 100));
  if (isAlive(info.pid)) process.kill(info.pid, 'SIGKILL');
  rmSync(path.join(serverDir(dataDir), PID_FILE), { force: true });
  return true;
}

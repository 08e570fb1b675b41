/**
 * How a trajflow command ends when it is told to (SIGINT, SIGTERM: Ctrl-C, `timeout`, `docker
 * stop`, systemd, a cancelled CI job) or when the process that started it dies: every process the
 * command started stops too, in-flight work finishing or handed back within a bounded time. The
 * dev server is left running: it is meant to outlive the command.
 */
import { Worker } from 'node:worker_threads';
import type { Logger } from '../src/log';
import { INTERRUPT_BACKSTOP_LINE, INTERRUPT_EXIT_LIMIT_MS, INTERRUPTED_EXIT_CODE } from '../client/launch';
import { PARENT_PID_ENV, WORKER_STOP_GRACE_MS } from '../client/workerProcess';

/**
 * An AbortSignal that aborts on the first SIGINT or SIGTERM, for the command to stop what it started
 * and exit. Should stopping take longer than the workers' grace period, or a second signal come,
 * the process exits at once (a child started with `exitWithParent` then stops by itself).
 */
export function interruptSignal(logger: Logger): AbortSignal {
  const controller = new AbortController();
  const onSignal = (signal: NodeJS.Signals) => {
    if (controller.signal.aborted) {
      logger.warn({ signal }, 'interrupted again; exiting now');
      process.exit(INTERRUPTED_EXIT_CODE);
    }
    logger.warn({ signal }, `interrupted; stopping the workers this command started (at most ${INTERRUPT_EXIT_LIMIT_MS / 1000} s)`);
    controller.abort(signal);
    setTimeout(() => {
      logger.warn(INTERRUPT_BACKSTOP_LINE);
      process.exit(INTERRUPTED_EXIT_CODE);
    }, INTERRUPT_EXIT_LIMIT_MS).unref();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  return controller.signal;
}

/** How often a child started with `exitWithParent` checks that its parent is still there. */
const PARENT_CHECK_MS = 1_000;

/**
 * The watch runs in a thread of its own: a train step holds the main thread's event loop for
 * seconds to minutes, and the watch must still end the process within the grace period.
 */
const PARENT_WATCH_THREAD = `
const { parentPort, workerData } = require('node:worker_threads');
const { parentPid, checkMs, graceMs } = workerData;
const check = setInterval(() => {
  if (process.ppid === parentPid) return;
  clearInterval(check);
  parentPort.postMessage('parent gone');
  setTimeout(() => process.kill(process.pid, 'SIGKILL'), graceMs);
}, checkMs);
`;

/**
 * In a worker started with `exitWithParent` (see PARENT_PID_ENV), calls `stop` once the parent is
 * gone (this process then has another parent pid), and SIGKILLs this process if it is still there
 * after the grace period. Does nothing in a worker started any other way.
 */
export function stopWithParent(logger: Logger, stop: () => void): void {
  const parentPid = Number(process.env[PARENT_PID_ENV]);
  if (!parentPid) return;
  // Not for this worker's own children.
  delete process.env[PARENT_PID_ENV];
  const watch = new Worker(PARENT_WATCH_THREAD, { eval: true, workerData: { parentPid, checkMs: PARENT_CHECK_MS, graceMs: WORKER_STOP_GRACE_MS } });
  watch.on('message', () => {
    logger.warn({ parentPid }, 'the process that started this worker is gone; shutting down');
    stop();
  });
  // The watch alone does not keep this process running.
  watch.unref();
}

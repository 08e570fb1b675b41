/**
 * Logging: pino JSON lines (pretty on a TTY). Temporal's own logs, and the `log` calls of
 * workflows and activities, go through the same logger, carrying workflow/run/activity ids;
 * trajflow's activity logs add runId, trajectoryId and turn.
 */
import { DefaultLogger, LogLevel, LogMetadata, Runtime } from '@temporalio/worker';
import pino, { Logger } from 'pino';
import pretty from 'pino-pretty';

export type { Logger } from 'pino';

export function createLogger(name: string): Logger {
  const level = process.env.TRAJFLOW_LOG_LEVEL ?? 'info';
  const stream = process.stdout.isTTY ? pretty({ sync: true, colorize: true, translateTime: 'HH:MM:ss.l', ignore: 'pid,hostname' }) : undefined;
  return pino({ name, level }, stream);
}

const PINO_LEVELS: Record<LogLevel, 'trace' | 'debug' | 'info' | 'warn' | 'error'> = {
  TRACE: 'trace',
  DEBUG: 'debug',
  INFO: 'info',
  WARN: 'warn',
  ERROR: 'error',
};

let installed = false;

/**
 * Routes the Temporal runtime's logs into `logger`; once per process. With
 * `prometheusBindAddress` the runtime also serves the SDK's metrics there (only if this is the
 * process's first call: the runtime cannot be reconfigured; returns whether they are served).
 */
export function installTemporalLogging(logger: Logger, options: { prometheusBindAddress?: string } = {}): boolean {
  if (installed) return false;
  installed = true;
  const temporal = logger.child({ component: 'temporal' });
  // Temporal's INFO lines (worker state changes, the bundler's report) drown trajflow's own; they
  // show with TRAJFLOW_LOG_LEVEL=debug.
  const level: LogLevel = logger.isLevelEnabled('debug') ? 'DEBUG' : 'WARN';
  Runtime.install({
    logger: new DefaultLogger(level, ({ level, message, meta }) => {
      // Expected for role-specific workers, which register only workflows or only activities.
      if (/^No (workflows|activities) registered/.test(message)) return;
      temporal[PINO_LEVELS[level]]((meta ?? {}) as LogMetadata, message);
    }),
    ...(options.prometheusBindAddress ? { telemetryOptions: { metrics: { prometheus: { bindAddress: options.prometheusBindAddress } } } } : {}),
  });
  return options.prometheusBindAddress !== undefined;
}

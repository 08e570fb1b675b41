/**
 * Logging: pino JSON lines, or pino-pretty's text for a person at a terminal. Temporal's own logs,
 * and the `log` calls of workflows and activities, go through the same logger, carrying
 * workflow/run/activity ids; trajflow's activity logs add runId, trajectoryId and turn.
 */
import { DefaultLogger, LogLevel, LogMetadata, Runtime, type MetricsExporterConfig } from '@temporalio/worker';
import pino, { Logger } from 'pino';
import { prettyFactory } from 'pino-pretty';

export type { Logger } from 'pino';

export const LOG_FORMATS = ['pretty', 'json'] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];

/** Where finished log lines go: a stream, or a terminal's status line that keeps its bar below them. */
export interface LineSink {
  write(text: string): unknown;
  isTTY?: boolean;
}

export interface LoggerOptions {
  /** Default: `TRAJFLOW_LOG_FORMAT`, else pretty when the sink is a terminal and JSON otherwise. */
  format?: LogFormat;
  /** Default: standard output. */
  sink?: LineSink;
}

/** Parses a log format named by a flag or `TRAJFLOW_LOG_FORMAT`; `where` names the source in the error. */
export function parseLogFormat(text: string, where: string): LogFormat {
  if ((LOG_FORMATS as readonly string[]).includes(text)) return text as LogFormat;
  throw new Error(`${where}: unknown log format ${JSON.stringify(text)}; formats: ${LOG_FORMATS.join(', ')}`);
}

export function defaultLogFormat(sink: LineSink): LogFormat {
  const fromEnv = process.env.TRAJFLOW_LOG_FORMAT;
  if (fromEnv) return parseLogFormat(fromEnv, 'TRAJFLOW_LOG_FORMAT');
  return sink.isTTY ? 'pretty' : 'json';
}

export function createLogger(name: string, options: LoggerOptions = {}): Logger {
  const sink = options.sink ?? process.stdout;
  const format = options.format ?? defaultLogFormat(sink);
  const level = process.env.TRAJFLOW_LOG_LEVEL ?? 'info';
  if (format === 'json') return pino({ name, level }, { write: (line: string) => sink.write(line) });
  // Formatted here, in the writing call, so a line reaches the sink whole and in order (a status line
  // redraws its bar after each one).
  const prettify = prettyFactory({ colorize: Boolean(sink.isTTY), translateTime: 'HH:MM:ss.l', ignore: 'pid,hostname' });
  return pino({ name, level }, { write: (line: string) => sink.write(prettify(JSON.parse(line))) });
}

type PinoLevel = 'trace' | 'debug' | 'info' | 'warn' | 'error';

const PINO_LEVELS: Record<LogLevel, PinoLevel> = {
  TRACE: 'trace',
  DEBUG: 'debug',
  INFO: 'info',
  WARN: 'warn',
  ERROR: 'error',
};

/** The SDK core's warning code for a workflow task that took longer than 5 s. */
const SLOW_WORKFLOW_TASK = '[TMPRL1104]';

/** The level a line of the Temporal runtime is logged at here; undefined drops it. */
export function levelOfTemporalLine(level: LogLevel, message: string, meta?: Record<string, unknown>): PinoLevel | undefined {
  // Expected for role-specific workers, which register only workflows or only activities.
  if (/^No (workflows|activities) registered/.test(message)) return undefined;
  // A trajectory's workflow task stays open while its local activities (sessions, local model
  // calls) run, for seconds by design; a slow task of any other workflow still warns.
  if (message.startsWith(SLOW_WORKFLOW_TASK) && meta?.workflowType === 'trajectoryWorkflow') return 'debug';
  return PINO_LEVELS[level];
}

let installed = false;

/**
 * Routes the Temporal runtime's logs into `logger`; once per process. With `metrics` the runtime
 * also exports metrics (only if this is the process's first call: the runtime cannot be
 * reconfigured; returns whether they are exported).
 */
export function installTemporalLogging(logger: Logger, options: { metrics?: MetricsExporterConfig } = {}): boolean {
  if (installed) return false;
  installed = true;
  const temporal = logger.child({ component: 'temporal' });
  // Temporal's INFO lines (worker state changes, the bundler's report) drown trajflow's own; they
  // show with TRAJFLOW_LOG_LEVEL=debug.
  const level: LogLevel = logger.isLevelEnabled('debug') ? 'DEBUG' : 'WARN';
  Runtime.install({
    logger: new DefaultLogger(level, ({ level, message, meta }) => {
      const pinoLevel = levelOfTemporalLine(level, message, meta);
      if (pinoLevel) temporal[pinoLevel]((meta ?? {}) as LogMetadata, message);
    }),
    telemetryOptions: {
      // The SDK core's own warnings (a slow workflow task, a failed poll) through `logger` too, not
      // printed to the console beside it, where they would break a progress bar and JSON output.
      logging: { filter: { core: level, other: 'ERROR' }, forward: {} },
      ...(options.metrics ? { metrics: options.metrics } : {}),
    },
  });
  return options.metrics !== undefined;
}

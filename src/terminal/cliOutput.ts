/**
 * Where the CLI's logs and progress go: standard error, so that standard output carries only a
 * command's results (`trajflow train x.yaml > curve.txt`). A person at a terminal gets pretty lines
 * with the progress bar kept below them; anything else (or `--log-format json`) gets JSON lines,
 * progress included.
 */
import { createLogger, defaultLogFormat, type LogFormat, type Logger } from '../log';
import { StatusLine } from './statusLine';

export interface CliOutput {
  logger: Logger;
  /** Set when progress is drawn as a bar. */
  statusLine?: StatusLine;
}

export function createCliOutput(format?: LogFormat, stream: NodeJS.WriteStream = process.stderr): CliOutput {
  const chosen = format ?? defaultLogFormat(stream);
  const statusLine = chosen === 'pretty' && stream.isTTY ? new StatusLine(stream) : undefined;
  return { logger: createLogger('trajflow', { format: chosen, sink: statusLine ?? stream }), statusLine };
}

/**
 * The last line of a terminal, kept for a progress bar: log lines are written above it, so neither
 * breaks the other. Both must go through here, on the one stream the bar is drawn on.
 */
import type { LineSink } from '../log';

const CLEAR_LINE = '\r\x1b[K';

export class StatusLine implements LineSink {
  private bar = '';

  constructor(private readonly stream: NodeJS.WriteStream) {}

  get isTTY(): boolean {
    return Boolean(this.stream.isTTY);
  }

  /** Replaces the bar, cut to the terminal's width: a wrapped bar could not be cleared in one go. */
  draw(bar: string): void {
    const columns = this.stream.columns;
    this.bar = columns ? bar.slice(0, columns - 1) : bar;
    this.stream.write(`${CLEAR_LINE}${this.bar}`);
  }

  /** Writes whole lines above the bar, then the bar again below them. */
  write(lines: string): boolean {
    return this.stream.write(`${CLEAR_LINE}${lines}${lines.endsWith('\n') ? '' : '\n'}${this.bar}`);
  }

  /** Leaves the bar where it is, as an ordinary line; later output starts below it. */
  finish(): void {
    if (this.bar) this.stream.write('\n');
    this.bar = '';
  }
}

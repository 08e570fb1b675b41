/**
 * The CLI's terminal output: log lines go above the progress bar and never break it, on a real
 * terminal (tmux) as on a replayed stream; off a terminal, or with --log-format json, every line
 * on standard error is JSON, progress included, and standard output has only the result.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { Writable } from 'node:stream';
import { createCliOutput } from '../src/terminal/cliOutput';
import { createProgress } from '../src/terminal/progress';
import { StatusLine } from '../src/terminal/statusLine';
import { createLogger } from '../src/log';
import { PROJECT_ROOT } from '../src/paths';
import { runningDevServer } from '../src/temporal/devServer';
import { testConfig } from './support/harness';

const CLI = path.join(PROJECT_ROOT, 'bin', 'trajflow.js');

/** A stream that records what is written, claiming to be a terminal `columns` wide. */
function fakeTerminal(columns = 100): NodeJS.WriteStream & { written: string } {
  const stream = new Writable({
    write(chunk, _encoding, done) {
      stream.written += chunk.toString();
      done();
    },
  }) as unknown as NodeJS.WriteStream & { written: string };
  stream.written = '';
  Object.assign(stream, { isTTY: true, columns });
  return stream;
}

/** An escape sequence: ESC [ parameters letter (colours, erase to end of line). */
const ESCAPE = new RegExp(`^${String.fromCharCode(27)}\\[([0-9;]*)([A-Za-z])`);

/** The lines a terminal shows after `output`: carriage returns, erase-to-end-of-line, colours. */
function screen(output: string): string[] {
  const lines: string[] = [''];
  let column = 0;
  for (let i = 0; i < output.length; i++) {
    const escape = ESCAPE.exec(output.slice(i));
    if (escape) {
      if (escape[2] === 'K') lines[lines.length - 1] = lines[lines.length - 1].slice(0, column);
      i += escape[0].length - 1;
    } else if (output[i] === '\r') column = 0;
    else if (output[i] === '\n') {
      lines.push('');
      column = 0;
    } else {
      const line = lines[lines.length - 1];
      lines[lines.length - 1] = line.slice(0, column) + output[i] + line.slice(column + 1);
      column++;
    }
  }
  return lines;
}

describe('terminal output', () => {
  test('a log line written while the bar is drawn appears above it, and the bar is drawn again below', () => {
    const terminal = fakeTerminal();
    const statusLine = new StatusLine(terminal);
    const logger = createLogger('t', { format: 'pretty', sink: statusLine });
    const progress = createProgress('train steps', 4, { statusLine, logger });
    progress.update(1, 'success 20%');
    logger.info('version 1 published');
    progress.update(2, 'success 40%');
    logger.warn({ group: 'g1' }, 'group skipped');
    progress.finish();
    const shown = screen(terminal.written);
    expect(shown[0]).toMatch(/^\[\d\d:\d\d:\d\d\.\d{3}\] INFO \(t\): version 1 published$/);
    expect(shown[1]).toMatch(/^\[\d\d:\d\d:\d\d\.\d{3}\] WARN \(t\): group skipped$/);
    expect(shown[2]).toBe('    group: "g1"');
    expect(shown[3]).toBe(`train steps [###############---------------] 2/4 0s success 40%`);
    expect(shown.slice(4)).toEqual(['']);
  });

  test('the bar is cut to the terminal width, so clearing it clears all of it', () => {
    const terminal = fakeTerminal(40);
    const statusLine = new StatusLine(terminal);
    statusLine.draw('x'.repeat(100));
    statusLine.write('a log line\n');
    expect(screen(terminal.written)).toEqual(['a log line', 'x'.repeat(39)]);
  });

  test('JSON output: every line parses, progress included; no bar', () => {
    const terminal = fakeTerminal();
    const { logger, statusLine } = createCliOutput('json', terminal);
    expect(statusLine).toBeUndefined();
    const progress = createProgress('trajectories', 2, { statusLine, logger, intervalMs: 0 });
    progress.update(1, 'in flight 1');
    logger.info({ runId: 'r' }, 'started');
    progress.update(2, 'in flight 0');
    const records = terminal.written
      .trimEnd()
      .split('\n')
      .map((line) => JSON.parse(line));
    expect(records.map((r) => [r.msg, r.done])).toEqual([
      ['trajectories: 1/2 after 0s in flight 1', 1],
      ['started', undefined],
      ['trajectories: 2/2 after 0s in flight 0', 2],
    ]);
    expect(records[0]).toMatchObject({ name: 'trajflow', progress: 'trajectories', total: 2 });
  });

  test('an unknown --log-format is one line naming the flag and the formats', () => {
    const run = spawnSync(process.execPath, [CLI, '--log-format', 'xml', 'server', 'status', '--data-dir', '/nonexistent'], { encoding: 'utf8' });
    expect(run.status).not.toBe(0);
    expect(run.stderr).toContain('--log-format: unknown log format "xml"; formats: pretty, json');
  });

  test('`trajflow run --local` in a real terminal (tmux): the bar is the last line, log lines above it are whole', () => {
    const config = testConfig('cli-terminal', { rollout: { groups: 2, groupSize: 2, maxConcurrency: 4 }, agent: { maxTurns: 3 } });
    // --local starts a dev server unless its data directory has one running: adopt the suite's.
    mkdirSync(path.join(config.dataDir, 'temporal'));
    writeFileSync(path.join(config.dataDir, 'temporal', 'temporal-server.json'), JSON.stringify(runningDevServer(process.env.TRAJFLOW_TEST_DATA_DIR!)));
    const configFile = path.join(config.dataDir, 'config.json');
    writeFileSync(configFile, JSON.stringify(config));
    const session = `trajflow-${process.pid}`;
    const done = path.join(config.dataDir, 'done');
    const command = `${process.execPath} ${CLI} run ${configFile} --local; echo exit $? > ${done}; sleep 300`;
    execFileSync('tmux', ['new-session', '-d', '-s', session, '-x', '80', '-y', '50', command]);
    try {
      const deadline = Date.now() + 90_000;
      while (spawnSync('test', ['-e', done]).status !== 0) {
        if (Date.now() > deadline) throw new Error(`no exit after 90 s; the screen:\n${capture(session)}`);
        execFileSync('sleep', ['0.5']);
      }
      const shown = capture(session).split('\n');
      const bars = shown.filter((line) => line.includes('trajectories ['));
      // One bar line, left as the last line before the summary; every log line starts a line of its own.
      expect(bars).toHaveLength(1);
      expect(bars[0]).toMatch(/^trajectories \[#{30}\] 4\/4 \d+s in flight 0, mean reward/);
      const logLines = shown.filter((line) => /\] (INFO|WARN|ERROR) \(/.test(line));
      expect(logLines.length).toBeGreaterThan(0);
      for (const line of logLines) expect(line).toMatch(/^\[\d\d:\d\d:\d\d\.\d{3}\] (INFO|WARN|ERROR) \(trajflow\)/);
      expect(shown.indexOf(bars[0])).toBeGreaterThan(shown.lastIndexOf(logLines[logLines.length - 1]));
    } finally {
      spawnSync('tmux', ['kill-session', '-t', session]);
    }
  }, 120_000);
});

/** The tmux pane's text, scrollback included. */
function capture(session: string): string {
  return execFileSync('tmux', ['capture-pane', '-p', '-J', '-S', '-1000', '-t', session], { encoding: 'utf8' });
}

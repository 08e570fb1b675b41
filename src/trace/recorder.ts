/**
 * The trace recorder: continuous spans and counters of every RL stage, always on, cheap enough to
 * leave on (see bench/tracing.ts).
 *
 * Each process (and each engine worker thread, which forwards to its process) has one recorder,
 * `tracer`. Recording a span or counter builds one small object and pushes it on a buffer; every
 * `flushIntervalMs` (and at shutdown and process exit) the buffer is serialized to compact JSON
 * lines appended to rolling files under `<dataDir>/runs/<runId>/trace/`, one series per run, role
 * and process: `<role>-<host>-<pid>-<stamp>-<nnnn>.jsonl`. A file is closed before it passes
 * `maxFileBytes` and only the newest `maxFiles` of a series are kept, so a long run never grows
 * one file (or, with maxFiles, one series) without limit.
 *
 * Timestamps are wall-clock epoch microseconds (`performance.timeOrigin + performance.now()`), so
 * files of different processes merge on one clock (src/trace/perfetto.ts does the merge).
 *
 * Which run an event belongs to: events recorded inside a traced activity inherit the activity
 * span's run and role (the activity interceptor registers a context resolver); events with no run
 * of their own (an engine decode step serves every run at once) go to every run that has a span
 * open in this process, or had one in the last ACTIVE_GRACE_MS; with no such run they are dropped.
 *
 * Disabled (the default until `configure`), every call returns at its first line.
 */
import { appendFileSync, mkdirSync, promises as fs, unlinkSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { threadId } from 'node:worker_threads';
import { runLayout } from '../store/runLayout';

export type AttrValue = string | number | boolean | undefined;
export type Attrs = Record<string, AttrValue>;

/** Who recorded an event: the worker role, and the run and data directory it belongs to. */
export interface TraceScope {
  role: string;
  run?: string;
  dataDir?: string;
}

/** One recorded event, in Chrome trace-event shape minus pid/tid (the exporter assigns those). */
export type TraceEvent =
  | { ph: 'X'; name: string; cat: string; ts: number; dur: number; id?: number; p?: number; args?: Attrs }
  | { ph: 'C'; name: string; ts: number; args: Record<string, number> }
  | { ph: 'i'; name: string; cat: string; ts: number; p?: number; args?: Attrs };

export interface TraceEntry {
  scope: TraceScope;
  event: TraceEvent;
}

export interface RecorderOptions {
  enabled: boolean;
  maxFileBytes: number;
  /** Files kept per run, role and process; 0 = no limit. */
  maxFiles: number;
  flushIntervalMs: number;
  /** Events held between flushes at most; more are counted as dropped (`trace dropped` counter). */
  maxBufferedEvents: number;
}

export const DEFAULT_RECORDER_OPTIONS: RecorderOptions = {
  enabled: false,
  maxFileBytes: 16 * 1024 * 1024,
  maxFiles: 64,
  flushIntervalMs: 1000,
  maxBufferedEvents: 200_000,
};

/** A run counts as active in a process this long after its last span ended there. */
export const ACTIVE_GRACE_MS = 10_000;

/** Trace file format version, in every file's header line. */
export const TRACE_FORMAT = 1;

/** This thread's performance clock origin (epoch ms); read once, the getter is not free. */
const TIME_ORIGIN = performance.timeOrigin;

/** Wall-clock epoch microseconds, monotonic within a thread. */
export function nowUs(): number {
  return (TIME_ORIGIN + performance.now()) * 1000;
}

/** A `performance.now()` reading of this thread as epoch microseconds. */
export function perfToUs(perfMs: number): number {
  return (TIME_ORIGIN + perfMs) * 1000;
}

export interface Span {
  /** False for the no-op span handed out while tracing is off. */
  readonly live: boolean;
  /** Adds attributes (recorded with the span when it ends). */
  set(attrs: Attrs): void;
  /** Records the span; later calls do nothing. */
  end(attrs?: Attrs): void;
}

const NOOP_SPAN: Span = { live: false, set: () => undefined, end: () => undefined };

export interface SpanOptions {
  /** Lane group in the exported trace (`activity`, `engine`, ...); children default to the parent's. */
  cat?: string;
  attrs?: Attrs;
  /** Run and role; default: the parent's, else the context's, else `{ role }` (no run). */
  scope?: TraceScope;
  /** Role when neither a scope nor a parent says (events with no run: the process's own work). */
  role?: string;
  /** Parent span; default: the current context's (the running activity's); null: none. */
  parent?: LiveSpan | null;
}

export class LiveSpan implements Span {
  readonly live = true;
  /** Set once a child names this span as its parent; only then is the id written. */
  hasChildren = false;
  private ended = false;

  constructor(
    private readonly recorder: Recorder,
    readonly id: number,
    readonly scope: TraceScope,
    readonly name: string,
    readonly cat: string,
    readonly startUs: number,
    readonly parentId: number | undefined,
    private attrs: Attrs | undefined,
  ) {}

  set(attrs: Attrs): void {
    // A copy: the attributes passed to begin() may be the caller's object.
    this.attrs = { ...this.attrs, ...attrs };
  }

  end(attrs?: Attrs): void {
    if (this.ended) return;
    this.ended = true;
    if (attrs) this.set(attrs);
    this.recorder.recordEnded(this, nowUs(), this.attrs);
  }
}

interface ActiveRun {
  dataDir: string;
  run: string;
  open: number;
  lastMs: number;
  /** Scopes of this run by role, for events routed here from no run of their own. */
  scopes: Map<string, Required<TraceScope>>;
}

/** A buffered event and its scope (run and data directory set). */
type Buffered = [Required<TraceScope>, TraceEvent];

function isPromiseLike(value: unknown): value is PromiseLike<unknown> {
  return typeof value === 'object' && value !== null && typeof (value as { then?: unknown }).then === 'function';
}

/** A short failure label for a span's `error` attribute. */
export function errorLabel(err: unknown): string {
  if (err && typeof err === 'object') {
    const e = err as { type?: unknown; name?: unknown; cause?: { type?: unknown; name?: unknown } };
    const type = typeof e.cause?.type === 'string' ? e.cause.type : typeof e.type === 'string' ? e.type : undefined;
    return type ?? (typeof e.name === 'string' ? e.name : 'Error');
  }
  return typeof err;
}

function safeName(text: string): string {
  return text.replace(/[^A-Za-z0-9_.-]/g, '_');
}

/** What one RollingFile write does: maybe delete the oldest file, then append text to a file. */
interface WriteOp {
  file: string;
  text: string;
  remove?: string;
}

/**
 * A numbered series of JSONL files: `<prefix>-0000.jsonl`, `-0001`, ...; each starts with a header
 * line, none passes maxFileBytes (unless one line alone does), and at most maxFiles are kept.
 */
export class RollingFile {
  private index = -1;
  private bytes = 0;
  private headerLength = 0;
  private file = '';
  private dirReady = false;

  constructor(
    readonly dir: string,
    readonly prefix: string,
    private readonly header: Record<string, unknown>,
    private readonly limits: () => Pick<RecorderOptions, 'maxFileBytes' | 'maxFiles'>,
  ) {}

  fileAt(index: number): string {
    return path.join(this.dir, `${this.prefix}-${String(index).padStart(4, '0')}.jsonl`);
  }

  /** Splits lines over files by size; the caller performs the returned writes in order. */
  plan(lines: readonly string[]): WriteOp[] {
    const { maxFileBytes, maxFiles } = this.limits();
    const ops: WriteOp[] = [];
    let chunk: string[] = [];
    let remove: string | undefined;
    const cut = () => {
      if (chunk.length > 0) ops.push({ file: this.file, text: chunk.join(''), ...(remove ? { remove } : {}) });
      chunk = [];
      remove = undefined;
    };
    const startFile = () => {
      cut();
      this.index++;
      this.file = this.fileAt(this.index);
      if (maxFiles > 0 && this.index >= maxFiles) remove = this.fileAt(this.index - maxFiles);
      const header = `${JSON.stringify({ ...this.header, file: this.index })}\n`;
      chunk.push(header);
      this.bytes = this.headerLength = Buffer.byteLength(header);
    };
    if (this.index < 0) startFile();
    for (const line of lines) {
      const size = Buffer.byteLength(line) + 1;
      // A line that alone passes the limit still goes into a file (a fresh one) of its own.
      if (this.bytes + size > maxFileBytes && this.bytes > this.headerLength) startFile();
      chunk.push(`${line}\n`);
      this.bytes += size;
    }
    cut();
    return ops;
  }

  async append(lines: readonly string[]): Promise<void> {
    if (!this.dirReady) {
      await fs.mkdir(this.dir, { recursive: true });
      this.dirReady = true;
    }
    for (const op of this.plan(lines)) {
      if (op.remove) await fs.unlink(op.remove).catch(() => undefined);
      await fs.appendFile(op.file, op.text);
    }
  }

  appendSync(lines: readonly string[]): void {
    if (!this.dirReady) {
      mkdirSync(this.dir, { recursive: true });
      this.dirReady = true;
    }
    for (const op of this.plan(lines)) {
      if (op.remove) {
        try {
          unlinkSync(op.remove);
        } catch {
          // already gone
        }
      }
      appendFileSync(op.file, op.text);
    }
  }
}

/** One process-wide exit hook flushes every recorder (module registries may hold several). */
const EXIT_HOOKS = Symbol.for('trajflow.trace.exitHooks');
function registerExitFlush(recorder: Recorder): void {
  const holder = globalThis as unknown as Record<symbol, Set<Recorder> | undefined>;
  if (!holder[EXIT_HOOKS]) {
    const recorders = new Set<Recorder>();
    holder[EXIT_HOOKS] = recorders;
    process.once('exit', () => {
      for (const r of recorders) r.flushSync();
    });
  }
  holder[EXIT_HOOKS]!.add(recorder);
}

export class Recorder {
  private opts: RecorderOptions = { ...DEFAULT_RECORDER_OPTIONS };
  private isEnabled = false;
  private buffer: Buffered[] = [];
  /** Worker-thread mode: entries go to the parent thread instead of files. */
  private forwarder: ((entries: TraceEntry[]) => void) | undefined;
  private forwardBuffer: TraceEntry[] = [];
  private resolver: (() => LiveSpan | undefined) | undefined;
  // Span ids are unique per process: each thread numbers from its own offset.
  private nextId = threadId * 2 ** 32 + 1;
  private timer: NodeJS.Timeout | undefined;
  private readonly writers = new Map<string, RollingFile>();
  private readonly runs = new Map<string, ActiveRun>();
  private readonly listeners = new Set<(enabled: boolean) => void>();
  private dropped = 0;
  private flushChain: Promise<void> = Promise.resolve();
  private writeErrorReported = false;
  /** Names this process's files: host, pid and start time (a restarted pid gets new files). */
  readonly process = {
    host: os.hostname(),
    pid: process.pid,
    stamp: Math.round(performance.timeOrigin).toString(36),
  };

  get enabled(): boolean {
    return this.isEnabled;
  }

  get options(): Readonly<RecorderOptions> {
    return this.opts;
  }

  /** Sets options (e.g. a run config's `trace` section) and turns recording on or off. */
  configure(options: Partial<RecorderOptions>): void {
    const { enabled, ...rest } = options;
    const intervalChanged = rest.flushIntervalMs !== undefined && rest.flushIntervalMs !== this.opts.flushIntervalMs;
    this.opts = { ...this.opts, ...rest };
    if (intervalChanged && this.timer) {
      this.stopTimer();
      this.startTimer();
    }
    if (enabled !== undefined) this.setEnabled(enabled);
  }

  setEnabled(enabled: boolean): void {
    if (enabled === this.isEnabled) return;
    this.isEnabled = enabled;
    if (enabled) {
      this.startTimer();
      if (!this.forwarder) registerExitFlush(this);
    } else {
      this.stopTimer();
      void this.flush();
    }
    for (const listener of this.listeners) listener(enabled);
  }

  /** Called with the new state whenever recording turns on or off (engine threads follow it). */
  onEnabledChange(listener: (enabled: boolean) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** How child spans find their parent (and run) without passing it: the running activity's span. */
  setContextResolver(resolver: (() => LiveSpan | undefined) | undefined): void {
    this.resolver = resolver;
  }

  /** The current context's span, if any. */
  current(): LiveSpan | undefined {
    return this.resolver?.();
  }

  /** Worker-thread mode: buffered entries are handed to `post` on every flush instead of written. */
  forwardTo(post: (entries: TraceEntry[]) => void): void {
    this.forwarder = post;
  }

  /** Entries forwarded by a worker thread of this process. */
  ingest(entries: readonly TraceEntry[]): void {
    if (!this.isEnabled) return;
    for (const { scope, event } of entries) this.route(scope, event);
  }

  // ---------------------------------------------------------------------------------- recording

  begin(name: string, options: SpanOptions = {}): Span {
    if (!this.isEnabled) return NOOP_SPAN;
    const parent = options.parent === null ? undefined : (options.parent ?? (options.scope ? undefined : this.resolver?.()));
    const scope = options.scope ?? parent?.scope ?? { role: options.role ?? 'process' };
    if (parent) parent.hasChildren = true;
    const startUs = nowUs();
    // Top-level spans keep their run active here (process-level events such as decode steps go to it).
    if (!parent && scope.run !== undefined && scope.dataDir !== undefined) this.runOpened(scope.dataDir, scope.run, startUs / 1000);
    return new LiveSpan(this, this.nextId++, scope, name, options.cat ?? parent?.cat ?? 'span', startUs, parent?.id, options.attrs);
  }

  /** Runs `fn` (sync or async) inside a span that ends when it returns or settles. */
  span<T>(name: string, attrs: Attrs | undefined, fn: (span: Span) => T, options: SpanOptions = {}): T {
    if (!this.isEnabled) return fn(NOOP_SPAN);
    const span = this.begin(name, attrs ? { ...options, attrs } : options);
    let result: T;
    try {
      result = fn(span);
    } catch (err) {
      span.end({ error: errorLabel(err) });
      throw err;
    }
    if (isPromiseLike(result)) {
      return Promise.resolve(result).then(
        (value) => {
          span.end();
          return value;
        },
        (err) => {
          span.end({ error: errorLabel(err) });
          throw err;
        },
      ) as T;
    }
    span.end();
    return result;
  }

  /** Records a span that already happened (times in epoch microseconds). */
  complete(name: string, startUs: number, endUs: number, options: SpanOptions = {}): void {
    if (!this.isEnabled) return;
    const parent = options.parent === null ? undefined : (options.parent ?? (options.scope ? undefined : this.resolver?.()));
    const scope = options.scope ?? parent?.scope ?? { role: options.role ?? 'process' };
    if (parent) parent.hasChildren = true;
    const ts = Math.round(startUs);
    const event: TraceEvent = { ph: 'X', name, cat: options.cat ?? parent?.cat ?? 'span', ts, dur: Math.max(0, Math.round(endUs) - ts) };
    if (parent) event.p = parent.id;
    if (options.attrs) event.args = options.attrs;
    if (scope.run !== undefined && scope.dataDir !== undefined) this.touchRun(scope.dataDir, scope.run, endUs / 1000);
    this.route(scope, event);
  }

  /** Counter values at this moment (one counter track per key in the exported trace). */
  counter(name: string, values: Record<string, number>, options: Pick<SpanOptions, 'scope' | 'role'> & { atUs?: number } = {}): void {
    if (!this.isEnabled) return;
    const scope = options.scope ?? this.resolver?.()?.scope ?? { role: options.role ?? 'process' };
    const ts = Math.round(options.atUs ?? nowUs());
    if (scope.run !== undefined && scope.dataDir !== undefined) this.touchRun(scope.dataDir, scope.run, ts / 1000);
    this.route(scope, { ph: 'C', name, ts, args: values });
  }

  /** A point event (a weights version becoming visible, a group handed over). */
  instant(name: string, attrs?: Attrs, options: Pick<SpanOptions, 'scope' | 'role' | 'cat'> = {}): void {
    if (!this.isEnabled) return;
    const parent = options.scope ? undefined : this.resolver?.();
    const scope = options.scope ?? parent?.scope ?? { role: options.role ?? 'process' };
    const event: TraceEvent = { ph: 'i', name, cat: options.cat ?? parent?.cat ?? 'event', ts: Math.round(nowUs()) };
    if (parent) {
      parent.hasChildren = true;
      event.p = parent.id;
    }
    if (attrs) event.args = attrs;
    this.route(scope, event);
  }

  /** @internal LiveSpan.end */
  recordEnded(span: LiveSpan, endUs: number, attrs: Attrs | undefined): void {
    const ts = Math.round(span.startUs);
    const event: TraceEvent = { ph: 'X', name: span.name, cat: span.cat, ts, dur: Math.max(0, Math.round(endUs) - ts) };
    if (span.hasChildren) event.id = span.id;
    if (span.parentId !== undefined) event.p = span.parentId;
    if (attrs) event.args = attrs;
    const { scope } = span;
    if (span.parentId === undefined && scope.run !== undefined && scope.dataDir !== undefined) this.runClosed(scope.dataDir, scope.run, endUs / 1000);
    // Recorded even if tracing was turned off meanwhile: the span began while it was on.
    this.route(scope, event);
  }

  // ------------------------------------------------------------------------------------ routing

  private runKey(dataDir: string, run: string): string {
    return `${dataDir}\0${run}`;
  }

  private runOpened(dataDir: string, run: string, nowMs: number): void {
    const key = this.runKey(dataDir, run);
    const active = this.runs.get(key);
    if (active) {
      active.open++;
      active.lastMs = Math.max(active.lastMs, nowMs);
    } else {
      this.runs.set(key, { dataDir, run, open: 1, lastMs: nowMs, scopes: new Map() });
    }
  }

  private runClosed(dataDir: string, run: string, nowMs: number): void {
    const active = this.runs.get(this.runKey(dataDir, run));
    if (!active) return;
    active.open = Math.max(0, active.open - 1);
    active.lastMs = Math.max(active.lastMs, nowMs);
  }

  private touchRun(dataDir: string, run: string, nowMs: number): void {
    const key = this.runKey(dataDir, run);
    const active = this.runs.get(key);
    if (active) active.lastMs = Math.max(active.lastMs, nowMs);
    else this.runs.set(key, { dataDir, run, open: 0, lastMs: nowMs, scopes: new Map() });
  }

  /** Runs active in this process now: a span open, or one ended within the grace period. */
  activeRuns(): { dataDir: string; run: string }[] {
    return this.active(Date.now()).map(({ dataDir, run }) => ({ dataDir, run }));
  }

  /** Runs active at `now` (epoch ms). */
  private active(now: number): ActiveRun[] {
    const active: ActiveRun[] = [];
    for (const [key, run] of this.runs) {
      if (run.open > 0 || now - run.lastMs < ACTIVE_GRACE_MS) active.push(run);
      else if (now - run.lastMs > 6 * ACTIVE_GRACE_MS) this.runs.delete(key);
    }
    return active;
  }

  private route(scope: TraceScope, event: TraceEvent): void {
    if (this.forwarder) {
      if (this.forwardBuffer.length >= this.opts.maxBufferedEvents) this.dropped++;
      else this.forwardBuffer.push({ scope, event });
      return;
    }
    if (scope.run !== undefined && scope.dataDir !== undefined) {
      this.enqueue(scope as Required<TraceScope>, event);
      return;
    }
    // Active when the event happened (a worker thread's events arrive up to a flush interval late).
    for (const run of this.active(event.ts / 1000)) {
      let runScope = run.scopes.get(scope.role);
      if (!runScope) run.scopes.set(scope.role, (runScope = { role: scope.role, run: run.run, dataDir: run.dataDir }));
      this.enqueue(runScope, event);
    }
  }

  private enqueue(scope: Required<TraceScope>, event: TraceEvent): void {
    if (this.buffer.length >= this.opts.maxBufferedEvents) this.dropped++;
    else this.buffer.push([scope, event]);
  }

  // ----------------------------------------------------------------------------------- flushing

  private startTimer(): void {
    if (this.timer) return;
    this.timer = setInterval(() => {
      if (this.forwarder) this.flushForward();
      else if (this.buffer.length > 0 || this.dropped > 0) void this.flush();
    }, this.opts.flushIntervalMs);
    this.timer.unref();
  }

  private stopTimer(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Worker-thread mode: hands the buffered entries to the parent now. */
  flushForward(): void {
    if (!this.forwarder) return;
    if (this.dropped > 0) {
      this.forwardBuffer.push({
        scope: { role: 'process' },
        event: { ph: 'C', name: 'trace dropped', ts: Math.round(nowUs()), args: { events: this.dropped } },
      });
      this.dropped = 0;
    }
    if (this.forwardBuffer.length === 0) return;
    const entries = this.forwardBuffer;
    this.forwardBuffer = [];
    this.forwarder(entries);
  }

  private writerFor(scope: Required<TraceScope>): RollingFile {
    const key = `${scope.dataDir}\0${scope.run}\0${scope.role}`;
    let writer = this.writers.get(key);
    if (!writer) {
      const { host, pid, stamp } = this.process;
      const dir = runLayout(scope.dataDir, scope.run).traceDir;
      const header = { trajflowTrace: TRACE_FORMAT, role: scope.role, run: scope.run, host, pid, stamp, clock: 'epoch-us' };
      writer = new RollingFile(dir, `${safeName(scope.role)}-${safeName(host)}-${pid}-${stamp}`, header, () => this.opts);
      this.writers.set(key, writer);
    }
    return writer;
  }

  /** Takes the buffer, grouped into lines per file series. */
  private drain(): [RollingFile, string[]][] {
    if (this.dropped > 0) {
      const dropped = this.dropped;
      this.dropped = 0;
      for (const { dataDir, run } of this.activeRuns()) {
        this.buffer.push([
          { dataDir, run, role: 'process' },
          { ph: 'C', name: 'trace dropped', ts: Math.round(nowUs()), args: { events: dropped } },
        ]);
      }
    }
    // Grouped by scope object first (most events share a few), then by file series.
    const byScope = new Map<TraceScope, string[]>();
    for (const [scope, event] of this.buffer) {
      let lines = byScope.get(scope);
      if (!lines) byScope.set(scope, (lines = []));
      lines.push(JSON.stringify(event));
    }
    this.buffer = [];
    const byWriter = new Map<RollingFile, string[]>();
    for (const [scope, lines] of byScope) {
      let writer: RollingFile;
      try {
        writer = this.writerFor(scope as Required<TraceScope>);
      } catch (err) {
        // A run id that cannot name a folder: its events are lost, as a failed write's would be.
        this.reportWriteError(err);
        continue;
      }
      const existing = byWriter.get(writer);
      if (existing) for (const line of lines) existing.push(line);
      else byWriter.set(writer, lines);
    }
    return [...byWriter.entries()];
  }

  /** Writes everything buffered so far; resolves once it is on disk. Never rejects. */
  flush(): Promise<void> {
    if (this.forwarder) {
      this.flushForward();
      return Promise.resolve();
    }
    const batches = this.drain();
    this.flushChain = this.flushChain.then(async () => {
      for (const [writer, lines] of batches) {
        try {
          await writer.append(lines);
        } catch (err) {
          this.reportWriteError(err);
        }
      }
    });
    return this.flushChain;
  }

  /** Synchronous last flush (process exit). */
  flushSync(): void {
    if (this.forwarder) return this.flushForward();
    for (const [writer, lines] of this.drain()) {
      try {
        writer.appendSync(lines);
      } catch (err) {
        this.reportWriteError(err);
      }
    }
  }

  private reportWriteError(err: unknown): void {
    if (this.writeErrorReported) return;
    this.writeErrorReported = true;
    process.emitWarning(`trajflow trace: cannot write trace files (${(err as Error).message}); tracing goes on, failed writes are lost`);
  }
}

/** This process's (or worker thread's) recorder. */
export const tracer = new Recorder();

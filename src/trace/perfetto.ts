/**
 * Perfetto export: merges a run's trace files (every process and role, one wall clock) into one
 * Chrome trace-event JSON file (`{"traceEvents": [...]}`) that ui.perfetto.dev and
 * chrome://tracing open.
 *
 * - One track group (Chrome "process") per role of each process, named after the role and the
 *   process: "inference engine (host pid 1234)". A process running several roles (a local run)
 *   gets one group per role.
 * - Spans become complete events (`ph: 'X'`) on lanes (Chrome "threads") named after their lane
 *   group (`trajectory 3`, `activity 12`, `engine`): concurrent spans are packed onto as few lanes
 *   as keep them from overlapping, and a child span goes on its parent's lane, nested inside it.
 * - Counters are `ph: 'C'` events of their role's group; point events are process-scoped `ph: 'i'`.
 *
 * Derived, and marked so: when no workflow worker recorded trajectory spans (a worker started from
 * a prebuilt workflow bundle without the trace interceptor), each trajectory's span is derived from
 * its first to last activity (`derived: true`), and with no controller counters the trajectories
 * in flight are counted from those spans.
 */
import { createReadStream, createWriteStream, promises as fs } from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';
import { finished } from 'node:stream/promises';
import { isTrajectoryId } from '../core/ids';
import { runLayout } from '../store/runLayout';
import { ROLE_TITLES, TRACE_ROLES } from './names';
import type { Attrs, TraceEvent } from './recorder';

export interface TraceFileHeader {
  trajflowTrace: number;
  role: string;
  run: string;
  host: string;
  pid: number;
  stamp: string;
  file: number;
  clock: string;
}

/** The events of one file (or of one header's part of it). */
export interface TraceSegment {
  file: string;
  header: TraceFileHeader;
  events: TraceEvent[];
}

export interface ChromeEvent {
  ph: 'X' | 'C' | 'i' | 'M';
  name: string;
  pid: number;
  tid: number;
  ts?: number;
  dur?: number;
  cat?: string;
  s?: 'p' | 't' | 'g';
  args?: Record<string, unknown>;
}

export interface ChromeTrace {
  traceEvents: ChromeEvent[];
  displayTimeUnit: 'ms';
  otherData: Record<string, unknown>;
}

export interface ExportOptions {
  /** Keep only what overlaps [from, to], in seconds after the first event of the run. */
  fromS?: number;
  toS?: number;
}

export interface TrackGroupSummary {
  pid: number;
  name: string;
  role: string;
  lanes: number;
  spans: number;
  counters: number;
}

export interface ExportSummary {
  run: string;
  files: number;
  unreadableLines: number;
  spans: number;
  counters: number;
  instants: number;
  derivedTrajectories: number;
  groups: TrackGroupSummary[];
  /** Epoch microseconds of the first and last event exported. */
  startUs: number;
  endUs: number;
}

export function traceDir(dataDir: string, runId: string): string {
  return runLayout(dataDir, runId).traceDir;
}

function isHeader(value: unknown): value is TraceFileHeader {
  return typeof value === 'object' && value !== null && typeof (value as { trajflowTrace?: unknown }).trajflowTrace === 'number';
}

function isEvent(value: unknown): value is TraceEvent {
  if (typeof value !== 'object' || value === null) return false;
  const e = value as Record<string, unknown>;
  if (typeof e.name !== 'string' || typeof e.ts !== 'number' || !Number.isFinite(e.ts)) return false;
  if (e.ph === 'X') return typeof e.dur === 'number' && Number.isFinite(e.dur);
  if (e.ph === 'C') return typeof e.args === 'object' && e.args !== null;
  return e.ph === 'i';
}

/**
 * Reads one trace file. Lines that do not parse (the tail of a file whose process was killed
 * mid-write) are counted and skipped.
 */
export async function readTraceFile(file: string): Promise<{ segments: TraceSegment[]; unreadableLines: number }> {
  const segments: TraceSegment[] = [];
  let current: TraceSegment | undefined;
  let unreadableLines = 0;
  const lines = readline.createInterface({ input: createReadStream(file, 'utf8'), crlfDelay: Infinity });
  for await (const line of lines) {
    if (line.length === 0) continue;
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch {
      unreadableLines++;
      continue;
    }
    if (isHeader(value)) {
      current = { file, header: value, events: [] };
      segments.push(current);
    } else if (current && isEvent(value)) {
      current.events.push(value);
    } else {
      unreadableLines++;
    }
  }
  return { segments, unreadableLines };
}

/** Every trace file of a run. */
export async function readRunTrace(dataDir: string, runId: string): Promise<{ files: string[]; segments: TraceSegment[]; unreadableLines: number }> {
  const dir = traceDir(dataDir, runId);
  let names: string[];
  try {
    names = (await fs.readdir(dir)).filter((name) => name.endsWith('.jsonl')).sort();
  } catch {
    names = [];
  }
  if (names.length === 0) {
    throw new Error(`no trace files for run ${runId} under ${dir} (is trace.enabled off, or have its workers not written yet?)`);
  }
  const segments: TraceSegment[] = [];
  let unreadableLines = 0;
  for (const name of names) {
    const read = await readTraceFile(path.join(dir, name));
    segments.push(...read.segments);
    unreadableLines += read.unreadableLines;
  }
  return { files: names.map((name) => path.join(dir, name)), segments, unreadableLines };
}

/** Order of lane groups inside a track group. */
const LANE_ORDER = ['training', 'controller', 'group', 'trajectory', 'queue', 'activity', 'engine', 'trainer', 'span', 'event'];

function laneRank(cat: string): number {
  const i = LANE_ORDER.indexOf(cat);
  return i < 0 ? LANE_ORDER.length : i;
}

function roleRank(role: string): number {
  const i = (TRACE_ROLES as readonly string[]).indexOf(role);
  return i < 0 ? TRACE_ROLES.length : i;
}

interface Group {
  key: string;
  role: string;
  host: string;
  pid: number;
  derived: boolean;
  chromePid: number;
  firstTs: number;
  lanes: Lane[];
  spans: number;
  counters: number;
}

interface Lane {
  cat: string;
  tid: number;
  /** End times of the spans open on this lane, outermost first. */
  stack: number[];
}

interface SpanRecord {
  event: Extract<TraceEvent, { ph: 'X' }>;
  group: Group;
  /** process-unique key of this span's id and its parent's, for nesting. */
  key?: string;
  parentKey?: string;
  depth: number;
}


/** Merges parsed trace segments into one Chrome trace. */
export function buildChromeTrace(run: string, segments: readonly TraceSegment[], options: ExportOptions = {}): { trace: ChromeTrace; summary: ExportSummary } {
  const groups = new Map<string, Group>();
  const groupOf = (role: string, host: string, pid: number, stamp: string, derived = false): Group => {
    const key = `${host}\0${pid}\0${stamp}\0${role}`;
    let group = groups.get(key);
    if (!group) {
      group = { key, role, host, pid, derived, chromePid: 0, firstTs: Infinity, lanes: [], spans: 0, counters: 0 };
      groups.set(key, group);
    }
    return group;
  };

  const spans: SpanRecord[] = [];
  const counters: { event: Extract<TraceEvent, { ph: 'C' }>; group: Group }[] = [];
  const instants: { event: Extract<TraceEvent, { ph: 'i' }>; group: Group; parentKey?: string }[] = [];
  let firstTs = Infinity;
  for (const { header, events } of segments) {
    const group = groupOf(header.role, header.host, header.pid, header.stamp);
    const proc = `${header.host}\0${header.pid}\0${header.stamp}`;
    for (const event of events) {
      firstTs = Math.min(firstTs, event.ts);
      if (event.ph === 'X') {
        spans.push({
          event,
          group,
          ...(event.id !== undefined ? { key: `${proc}\0${event.id}` } : {}),
          ...(event.p !== undefined ? { parentKey: `${proc}\0${event.p}` } : {}),
          depth: 0,
        });
      } else if (event.ph === 'C') {
        counters.push({ event, group });
      } else {
        instants.push({ event, group, ...(event.p !== undefined ? { parentKey: `${proc}\0${event.p}` } : {}) });
      }
    }
  }

  // Derived trajectory spans, only when no workflow worker recorded any.
  let derivedTrajectories = 0;
  if (!spans.some((s) => s.event.cat === 'trajectory')) {
    const byTrajectory = new Map<string, { start: number; end: number }>();
    for (const { event } of spans) {
      const wf = event.args?.wf;
      if (event.cat !== 'activity' || typeof wf !== 'string' || !isTrajectoryId(wf)) continue;
      const seen = byTrajectory.get(wf);
      const end = event.ts + event.dur;
      if (seen) {
        seen.start = Math.min(seen.start, event.ts);
        seen.end = Math.max(seen.end, end);
      } else {
        byTrajectory.set(wf, { start: event.ts, end });
      }
    }
    if (byTrajectory.size > 0) {
      const group = groupOf('workflows', 'derived', 0, '', true);
      for (const [wf, { start, end }] of byTrajectory) {
        spans.push({ event: { ph: 'X', name: 'trajectory', cat: 'trajectory', ts: start, dur: end - start, args: { wf, derived: true } }, group, depth: 0 });
        derivedTrajectories++;
      }
    }
  }
  if (!counters.some((c) => c.event.name === 'rollout')) {
    const trajectories = spans.filter((s) => s.event.cat === 'trajectory');
    if (trajectories.length > 0) {
      const group = trajectories[0].group;
      const steps: [number, number][] = [];
      for (const { event } of trajectories) steps.push([event.ts, 1], [event.ts + event.dur, -1]);
      // Ends before starts at the same instant: a slot handed straight on is not counted twice.
      steps.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
      let inFlight = 0;
      for (const [ts, delta] of steps) {
        inFlight += delta;
        counters.push({ event: { ph: 'C', name: 'rollout (derived from trajectory spans)', ts, args: { in_flight: inFlight } }, group });
      }
    }
  }

  // Time window.
  const t0 = Number.isFinite(firstTs) ? firstTs : 0;
  const from = options.fromS !== undefined ? t0 + options.fromS * 1e6 : -Infinity;
  const to = options.toS !== undefined ? t0 + options.toS * 1e6 : Infinity;
  const keptSpans = spans.filter(({ event }) => event.ts <= to && event.ts + event.dur >= from);
  const keptInstants = instants.filter(({ event }) => event.ts >= from && event.ts <= to);
  // A counter keeps its last value from before the window, moved to the window's start.
  const keptCounters: typeof counters = [];
  const before = new Map<string, (typeof counters)[number]>();
  for (const c of counters) {
    if (c.event.ts > to) continue;
    if (c.event.ts >= from) keptCounters.push(c);
    else {
      const key = `${c.group.key}\0${c.event.name}`;
      const last = before.get(key);
      if (!last || last.event.ts <= c.event.ts) before.set(key, c);
    }
  }
  for (const c of before.values()) keptCounters.push({ event: { ...c.event, ts: from }, group: c.group });

  // Track group numbering: roles in pipeline order, then by first activity.
  for (const { event, group } of [...keptSpans, ...keptCounters, ...keptInstants]) group.firstTs = Math.min(group.firstTs, event.ts);
  const usedGroups = [...new Set([...keptSpans, ...keptCounters, ...keptInstants].map((x) => x.group))];
  usedGroups.sort((a, b) => roleRank(a.role) - roleRank(b.role) || Number(a.derived) - Number(b.derived) || a.firstTs - b.firstTs || a.key.localeCompare(b.key));
  usedGroups.forEach((group, i) => (group.chromePid = i + 1));

  // Depth of each span (parents first when they start together).
  const byKey = new Map<string, SpanRecord>();
  for (const span of keptSpans) if (span.key) byKey.set(span.key, span);
  const depthOf = (span: SpanRecord, guard = 0): number => {
    if (!span.parentKey || guard > 64) return 0;
    const parent = byKey.get(span.parentKey);
    return parent ? 1 + depthOf(parent, guard + 1) : 0;
  };
  for (const span of keptSpans) span.depth = depthOf(span);
  keptSpans.sort((a, b) => a.event.ts - b.event.ts || b.event.dur - a.event.dur || a.depth - b.depth);

  // Lane packing.
  const laneOfSpan = new Map<string, Lane>();
  const tidOf = new Map<SpanRecord, Lane>();
  const freeAfterPop = (lane: Lane, ts: number) => {
    while (lane.stack.length > 0 && lane.stack[lane.stack.length - 1] <= ts) lane.stack.pop();
  };
  for (const span of keptSpans) {
    const { event, group } = span;
    const end = event.ts + event.dur;
    let lane: Lane | undefined;
    const parentLane = span.parentKey ? laneOfSpan.get(span.parentKey) : undefined;
    if (parentLane) {
      freeAfterPop(parentLane, event.ts);
      const top = parentLane.stack[parentLane.stack.length - 1];
      if (top === undefined || top >= end) lane = parentLane;
    }
    const cat = parentLane?.cat ?? event.cat;
    if (!lane) {
      for (const candidate of group.lanes) {
        if (candidate.cat !== cat) continue;
        freeAfterPop(candidate, event.ts);
        if (candidate.stack.length === 0) {
          lane = candidate;
          break;
        }
      }
    }
    if (!lane) {
      lane = { cat, tid: group.lanes.length + 1, stack: [] };
      group.lanes.push(lane);
    }
    lane.stack.push(end);
    tidOf.set(span, lane);
    if (span.key) laneOfSpan.set(span.key, lane);
    group.spans++;
  }
  for (const { group } of keptCounters) group.counters++;

  // Metadata: names and order of track groups and lanes.
  const traceEvents: ChromeEvent[] = [];
  const summaries: TrackGroupSummary[] = [];
  for (const group of usedGroups) {
    const title = ROLE_TITLES[group.role] ?? group.role;
    const name = group.derived ? `${title} (derived from activity spans)` : `${title} (${group.host} pid ${group.pid})`;
    traceEvents.push({ ph: 'M', name: 'process_name', pid: group.chromePid, tid: 0, args: { name } });
    traceEvents.push({ ph: 'M', name: 'process_sort_index', pid: group.chromePid, tid: 0, args: { sort_index: group.chromePid } });
    traceEvents.push({ ph: 'M', name: 'process_labels', pid: group.chromePid, tid: 0, args: { labels: `run ${run}, role ${group.role}` } });
    const perCat = new Map<string, Lane[]>();
    for (const lane of group.lanes) perCat.set(lane.cat, [...(perCat.get(lane.cat) ?? []), lane]);
    const cats = [...perCat.keys()].sort((a, b) => laneRank(a) - laneRank(b) || a.localeCompare(b));
    let sortIndex = 0;
    for (const cat of cats) {
      const lanes = perCat.get(cat)!;
      lanes.forEach((lane, i) => {
        const laneName = lanes.length === 1 ? cat : `${cat} ${i + 1}`;
        traceEvents.push({ ph: 'M', name: 'thread_name', pid: group.chromePid, tid: lane.tid, args: { name: laneName } });
        traceEvents.push({ ph: 'M', name: 'thread_sort_index', pid: group.chromePid, tid: lane.tid, args: { sort_index: sortIndex++ } });
      });
    }
    summaries.push({ pid: group.chromePid, name, role: group.role, lanes: group.lanes.length, spans: group.spans, counters: group.counters });
  }

  let startUs = Infinity;
  let endUs = -Infinity;
  const timed: ChromeEvent[] = [];
  for (const span of keptSpans) {
    const { event, group } = span;
    const out: ChromeEvent = { ph: 'X', name: event.name, cat: event.cat, pid: group.chromePid, tid: tidOf.get(span)!.tid, ts: event.ts, dur: event.dur };
    if (event.args) out.args = cleanArgs(event.args);
    timed.push(out);
    startUs = Math.min(startUs, event.ts);
    endUs = Math.max(endUs, event.ts + event.dur);
  }
  for (const { event, group } of keptCounters) {
    timed.push({ ph: 'C', name: event.name, pid: group.chromePid, tid: 0, ts: event.ts, args: event.args });
    startUs = Math.min(startUs, event.ts);
    endUs = Math.max(endUs, event.ts);
  }
  for (const { event, group, parentKey } of keptInstants) {
    const lane = parentKey ? laneOfSpan.get(parentKey) : undefined;
    const out: ChromeEvent = { ph: 'i', name: event.name, cat: event.cat, pid: group.chromePid, tid: lane?.tid ?? 0, ts: event.ts, s: lane ? 't' : 'p' };
    if (event.args) out.args = cleanArgs(event.args);
    timed.push(out);
    startUs = Math.min(startUs, event.ts);
    endUs = Math.max(endUs, event.ts);
  }
  timed.sort((a, b) => a.ts! - b.ts!);
  traceEvents.push(...timed);

  const summary: ExportSummary = {
    run,
    files: new Set(segments.map((s) => s.file)).size,
    unreadableLines: 0,
    spans: keptSpans.length,
    counters: keptCounters.length,
    instants: keptInstants.length,
    derivedTrajectories,
    groups: summaries,
    startUs: Number.isFinite(startUs) ? startUs : 0,
    endUs: Number.isFinite(endUs) ? endUs : 0,
  };
  const trace: ChromeTrace = {
    traceEvents,
    displayTimeUnit: 'ms',
    otherData: { trajflowRun: run, clock: 'wall-clock epoch microseconds, merged across processes', derivedTrajectories },
  };
  return { trace, summary };
}

function cleanArgs(args: Attrs): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(args)) if (value !== undefined) out[key] = value;
  return out;
}

/** Writes a Chrome trace without building the whole JSON text in memory. */
export async function writeChromeTrace(trace: ChromeTrace, outFile: string): Promise<number> {
  await fs.mkdir(path.dirname(path.resolve(outFile)), { recursive: true });
  const out = createWriteStream(outFile);
  let bytes = 0;
  const write = (text: string) => {
    bytes += Buffer.byteLength(text);
    return out.write(text) ? Promise.resolve() : new Promise<void>((resolve) => out.once('drain', () => resolve()));
  };
  await write('{"traceEvents":[\n');
  const { traceEvents } = trace;
  for (let i = 0; i < traceEvents.length; i += 1000) {
    const chunk = traceEvents.slice(i, i + 1000).map((e) => JSON.stringify(e));
    await write(`${chunk.join(',\n')}${i + 1000 < traceEvents.length ? ',\n' : '\n'}`);
  }
  await write(`],"displayTimeUnit":"ms","otherData":${JSON.stringify(trace.otherData)}}\n`);
  out.end();
  await finished(out);
  return bytes;
}

/** `trajflow trace`: reads a run's trace files and writes one Perfetto-ready JSON file. */
export async function exportRunTrace(dataDir: string, runId: string, outFile: string, options: ExportOptions = {}): Promise<ExportSummary & { out: string; bytes: number }> {
  const { segments, unreadableLines, files } = await readRunTrace(dataDir, runId);
  const { trace, summary } = buildChromeTrace(runId, segments, options);
  const bytes = await writeChromeTrace(trace, outFile);
  return { ...summary, files: files.length, unreadableLines, out: outFile, bytes };
}

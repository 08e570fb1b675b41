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
  const dir = runLayout(dataDir, runId).traceDir;
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

interface CounterRecord {
  event: Extract<TraceEvent, { ph: 'C' }>;
  group: Group;
}

interface InstantRecord {
  event: Extract<TraceEvent, { ph: 'i' }>;
  group: Group;
  parentKey?: string;
}

/** Every event of the run, each with its track group. */
interface Collected {
  spans: SpanRecord[];
  counters: CounterRecord[];
  instants: InstantRecord[];
}

/** The track groups met so far, one per role of each process. */
class TrackGroups {
  private readonly groups = new Map<string, Group>();

  of(role: string, host: string, pid: number, stamp: string, derived = false): Group {
    const key = `${host}\0${pid}\0${stamp}\0${role}`;
    let group = this.groups.get(key);
    if (!group) {
      group = { key, role, host, pid, derived, chromePid: 0, firstTs: Infinity, lanes: [], spans: 0, counters: 0 };
      this.groups.set(key, group);
    }
    return group;
  }
}

/** Sorts the segments' events into spans, counters and instants; spans and instants keep their parent's key. */
function collectEvents(segments: readonly TraceSegment[], groups: TrackGroups): Collected & { firstTs: number } {
  const collected: Collected = { spans: [], counters: [], instants: [] };
  let firstTs = Infinity;
  for (const { header, events } of segments) {
    const group = groups.of(header.role, header.host, header.pid, header.stamp);
    const proc = `${header.host}\0${header.pid}\0${header.stamp}`;
    for (const event of events) {
      firstTs = Math.min(firstTs, event.ts);
      if (event.ph === 'X') {
        collected.spans.push({
          event,
          group,
          ...(event.id !== undefined ? { key: `${proc}\0${event.id}` } : {}),
          ...(event.p !== undefined ? { parentKey: `${proc}\0${event.p}` } : {}),
          depth: 0,
        });
      } else if (event.ph === 'C') {
        collected.counters.push({ event, group });
      } else {
        collected.instants.push({ event, group, ...(event.p !== undefined ? { parentKey: `${proc}\0${event.p}` } : {}) });
      }
    }
  }
  return { ...collected, firstTs };
}

/**
 * Trajectory spans from each trajectory's first to last activity, only when no workflow worker
 * recorded any; added to `spans`. Returns how many.
 */
function deriveTrajectorySpans(spans: SpanRecord[], groups: TrackGroups): number {
  if (spans.some((s) => s.event.cat === 'trajectory')) return 0;
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
  if (byTrajectory.size === 0) return 0;
  const group = groups.of('workflows', 'derived', 0, '', true);
  for (const [wf, { start, end }] of byTrajectory) {
    spans.push({ event: { ph: 'X', name: 'trajectory', cat: 'trajectory', ts: start, dur: end - start, args: { wf, derived: true } }, group, depth: 0 });
  }
  return byTrajectory.size;
}

/** With no controller counters, the trajectories in flight counted from the trajectory spans. */
function deriveInFlightCounter({ spans, counters }: Collected): void {
  if (counters.some((c) => c.event.name === 'rollout')) return;
  const trajectories = spans.filter((s) => s.event.cat === 'trajectory');
  if (trajectories.length === 0) return;
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

/** What overlaps the window [from, to] (epoch µs). */
function keepWindow({ spans, counters, instants }: Collected, from: number, to: number): Collected {
  const kept: Collected = {
    spans: spans.filter(({ event }) => event.ts <= to && event.ts + event.dur >= from),
    counters: [],
    instants: instants.filter(({ event }) => event.ts >= from && event.ts <= to),
  };
  // A counter keeps its last value from before the window, moved to the window's start.
  const before = new Map<string, CounterRecord>();
  for (const c of counters) {
    if (c.event.ts > to) continue;
    if (c.event.ts >= from) kept.counters.push(c);
    else {
      const key = `${c.group.key}\0${c.event.name}`;
      const last = before.get(key);
      if (!last || last.event.ts <= c.event.ts) before.set(key, c);
    }
  }
  for (const c of before.values()) kept.counters.push({ event: { ...c.event, ts: from }, group: c.group });
  return kept;
}

/** The track groups with events, numbered (Chrome pid): roles in pipeline order, then by first activity. */
function numberGroups({ spans, counters, instants }: Collected): Group[] {
  for (const { event, group } of [...spans, ...counters, ...instants]) group.firstTs = Math.min(group.firstTs, event.ts);
  const used = [...new Set([...spans, ...counters, ...instants].map((x) => x.group))];
  used.sort((a, b) => roleRank(a.role) - roleRank(b.role) || Number(a.derived) - Number(b.derived) || a.firstTs - b.firstTs || a.key.localeCompare(b.key));
  used.forEach((group, i) => (group.chromePid = i + 1));
  return used;
}

/** Sets each span's depth and sorts the spans by start (parents first when they start together). */
function orderByStartAndDepth(spans: SpanRecord[]): void {
  const byKey = new Map<string, SpanRecord>();
  for (const span of spans) if (span.key) byKey.set(span.key, span);
  const depthOf = (span: SpanRecord, guard = 0): number => {
    if (!span.parentKey || guard > 64) return 0;
    const parent = byKey.get(span.parentKey);
    return parent ? 1 + depthOf(parent, guard + 1) : 0;
  };
  for (const span of spans) span.depth = depthOf(span);
  spans.sort((a, b) => a.event.ts - b.event.ts || b.event.dur - a.event.dur || a.depth - b.depth);
}

/**
 * Puts each span (in start order) on a lane of its group: its parent's lane if it fits inside the
 * spans open there, else the first free lane of its lane group, else a new one.
 */
function packLanes(spans: readonly SpanRecord[]): { laneOfSpan: Map<SpanRecord, Lane>; laneByKey: Map<string, Lane> } {
  const laneByKey = new Map<string, Lane>();
  const laneOfSpan = new Map<SpanRecord, Lane>();
  const freeAfterPop = (lane: Lane, ts: number) => {
    while (lane.stack.length > 0 && lane.stack[lane.stack.length - 1] <= ts) lane.stack.pop();
  };
  for (const span of spans) {
    const { event, group } = span;
    const end = event.ts + event.dur;
    let lane: Lane | undefined;
    const parentLane = span.parentKey ? laneByKey.get(span.parentKey) : undefined;
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
    laneOfSpan.set(span, lane);
    if (span.key) laneByKey.set(span.key, lane);
    group.spans++;
  }
  return { laneOfSpan, laneByKey };
}

/** Metadata events: the names and order of track groups and their lanes; and each group's summary. */
function metadataEvents(run: string, groups: readonly Group[]): { events: ChromeEvent[]; summaries: TrackGroupSummary[] } {
  const events: ChromeEvent[] = [];
  const summaries: TrackGroupSummary[] = [];
  for (const group of groups) {
    const title = ROLE_TITLES[group.role] ?? group.role;
    const name = group.derived ? `${title} (derived from activity spans)` : `${title} (${group.host} pid ${group.pid})`;
    events.push({ ph: 'M', name: 'process_name', pid: group.chromePid, tid: 0, args: { name } });
    events.push({ ph: 'M', name: 'process_sort_index', pid: group.chromePid, tid: 0, args: { sort_index: group.chromePid } });
    events.push({ ph: 'M', name: 'process_labels', pid: group.chromePid, tid: 0, args: { labels: `run ${run}, role ${group.role}` } });
    const perCat = new Map<string, Lane[]>();
    for (const lane of group.lanes) perCat.set(lane.cat, [...(perCat.get(lane.cat) ?? []), lane]);
    const cats = [...perCat.keys()].sort((a, b) => laneRank(a) - laneRank(b) || a.localeCompare(b));
    let sortIndex = 0;
    for (const cat of cats) {
      const lanes = perCat.get(cat)!;
      lanes.forEach((lane, i) => {
        const laneName = lanes.length === 1 ? cat : `${cat} ${i + 1}`;
        events.push({ ph: 'M', name: 'thread_name', pid: group.chromePid, tid: lane.tid, args: { name: laneName } });
        events.push({ ph: 'M', name: 'thread_sort_index', pid: group.chromePid, tid: lane.tid, args: { sort_index: sortIndex++ } });
      });
    }
    summaries.push({ pid: group.chromePid, name, role: group.role, lanes: group.lanes.length, spans: group.spans, counters: group.counters });
  }
  return { events, summaries };
}

/** The spans, counters and instants as Chrome events in time order, and the time they cover. */
function timedEvents({ spans, counters, instants }: Collected, lanes: ReturnType<typeof packLanes>): { events: ChromeEvent[]; startUs: number; endUs: number } {
  let startUs = Infinity;
  let endUs = -Infinity;
  const cover = (from: number, to: number) => {
    startUs = Math.min(startUs, from);
    endUs = Math.max(endUs, to);
  };
  const events: ChromeEvent[] = [];
  for (const span of spans) {
    const { event, group } = span;
    const out: ChromeEvent = {
      ph: 'X',
      name: event.name,
      cat: event.cat,
      pid: group.chromePid,
      tid: lanes.laneOfSpan.get(span)!.tid,
      ts: event.ts,
      dur: event.dur,
    };
    if (event.args) out.args = cleanArgs(event.args);
    events.push(out);
    cover(event.ts, event.ts + event.dur);
  }
  for (const { event, group } of counters) {
    events.push({ ph: 'C', name: event.name, pid: group.chromePid, tid: 0, ts: event.ts, args: event.args });
    cover(event.ts, event.ts);
  }
  for (const { event, group, parentKey } of instants) {
    const lane = parentKey ? lanes.laneByKey.get(parentKey) : undefined;
    const out: ChromeEvent = { ph: 'i', name: event.name, cat: event.cat, pid: group.chromePid, tid: lane?.tid ?? 0, ts: event.ts, s: lane ? 't' : 'p' };
    if (event.args) out.args = cleanArgs(event.args);
    events.push(out);
    cover(event.ts, event.ts);
  }
  events.sort((a, b) => a.ts! - b.ts!);
  return { events, startUs: Number.isFinite(startUs) ? startUs : 0, endUs: Number.isFinite(endUs) ? endUs : 0 };
}

/** Merges parsed trace segments into one Chrome trace. */
export function buildChromeTrace(run: string, segments: readonly TraceSegment[], options: ExportOptions = {}): { trace: ChromeTrace; summary: ExportSummary } {
  const groups = new TrackGroups();
  const { firstTs, ...collected } = collectEvents(segments, groups);
  const derivedTrajectories = deriveTrajectorySpans(collected.spans, groups);
  deriveInFlightCounter(collected);

  const t0 = Number.isFinite(firstTs) ? firstTs : 0;
  const from = options.fromS !== undefined ? t0 + options.fromS * 1e6 : -Infinity;
  const to = options.toS !== undefined ? t0 + options.toS * 1e6 : Infinity;
  const kept = keepWindow(collected, from, to);

  const usedGroups = numberGroups(kept);
  orderByStartAndDepth(kept.spans);
  const lanes = packLanes(kept.spans);
  for (const { group } of kept.counters) group.counters++;
  const metadata = metadataEvents(run, usedGroups);
  const timed = timedEvents(kept, lanes);

  const summary: ExportSummary = {
    run,
    files: new Set(segments.map((s) => s.file)).size,
    unreadableLines: 0,
    spans: kept.spans.length,
    counters: kept.counters.length,
    instants: kept.instants.length,
    derivedTrajectories,
    groups: metadata.summaries,
    startUs: timed.startUs,
    endUs: timed.endUs,
  };
  const trace: ChromeTrace = {
    traceEvents: [...metadata.events, ...timed.events],
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
export async function exportRunTrace(
  dataDir: string,
  runId: string,
  outFile: string,
  options: ExportOptions = {},
): Promise<ExportSummary & { out: string; bytes: number }> {
  const { segments, unreadableLines, files } = await readRunTrace(dataDir, runId);
  const { trace, summary } = buildChromeTrace(runId, segments, options);
  const bytes = await writeChromeTrace(trace, outFile);
  return { ...summary, files: files.length, unreadableLines, out: outFile, bytes };
}

/**
 * Trace hooks for workflow code. Workflows cannot do I/O, so they hand trace events to the
 * workflow worker through a Temporal sink (`trajflowTrace`, implemented in src/trace/sinks.ts),
 * which records them outside the sandbox after the workflow task. Sink calls add nothing to
 * workflow history, and none is made while a workflow replays, so replay stays deterministic and
 * an event is recorded once, by the worker that first ran that code.
 *
 * Times passed from workflows are workflow time (epoch ms of the task, set by the server).
 */
import { proxySinks, workflowInfo, type Sinks } from '@temporalio/workflow';

export type TraceAttrs = Record<string, string | number | boolean>;

export interface TraceSinks extends Sinks {
  trajflowTrace: {
    /** A workflow run ended (`outcome`: completed, failed, cancelled, continued). */
    workflowEnded(run: string, kind: string, startMs: number, outcome: string, attrs: TraceAttrs): void;
    /** Counter values now (one track per key). */
    counters(run: string, name: string, values: Record<string, number>): void;
    /** A span that already happened, in workflow time. */
    span(run: string, name: string, cat: string, startMs: number, endMs: number, attrs: TraceAttrs): void;
  };
}

const { trajflowTrace } = proxySinks<TraceSinks>();

function live(): boolean {
  return !workflowInfo().unsafe.isReplaying;
}

export function traceWorkflowEnded(run: string, kind: string, startMs: number, outcome: string, attrs: TraceAttrs = {}): void {
  if (live()) trajflowTrace.workflowEnded(run, kind, startMs, outcome, attrs);
}

export function traceCounters(run: string, name: string, values: Record<string, number>): void {
  if (live()) trajflowTrace.counters(run, name, values);
}

export function traceSpan(run: string, name: string, cat: string, startMs: number, endMs: number, attrs: TraceAttrs = {}): void {
  if (live()) trajflowTrace.span(run, name, cat, startMs, endMs, attrs);
}

/**
 * Emits a counter only when its values changed since the last call with the same key (workflow
 * memory; after a cache eviction the first call emits again).
 */
export function counterTracker(): (run: string, name: string, values: Record<string, number>) => void {
  const last = new Map<string, string>();
  return (run, name, values) => {
    const text = JSON.stringify(values);
    if (last.get(name) === text) return;
    last.set(name, text);
    traceCounters(run, name, values);
  };
}

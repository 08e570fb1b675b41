/**
 * The workflow worker's side of the `trajflowTrace` sink (see workflowSinks.ts): records what
 * workflows report under the `workflows` role of their run.
 */
import type { InjectedSinks } from '@temporalio/worker';
import { nowUs, tracer, type TraceScope } from './recorder';
import type { TraceSinks } from './workflowSinks';

export function traceSinks(dataDir: string): InjectedSinks<TraceSinks> {
  const scope = (run: string): TraceScope => ({ dataDir, role: 'workflows', run });
  return {
    trajflowTrace: {
      workflowEnded: {
        fn(info, run, kind, startMs, outcome, attrs) {
          tracer.complete(kind, startMs * 1000, nowUs(), { cat: kind, scope: scope(run), parent: null, attrs: { wf: info.workflowId, outcome, ...attrs } });
        },
        callDuringReplay: false,
      },
      counters: {
        fn(_info, run, name, values) {
          tracer.counter(name, values, { scope: scope(run) });
        },
        callDuringReplay: false,
      },
      span: {
        fn(info, run, name, cat, startMs, endMs, attrs) {
          tracer.complete(name, startMs * 1000, endMs * 1000, { cat, scope: scope(run), parent: null, attrs: { wf: info.workflowId, ...attrs } });
        },
        callDuringReplay: false,
      },
    },
  };
}

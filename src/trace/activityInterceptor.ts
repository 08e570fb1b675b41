/**
 * One span per activity execution, recorded by an activity inbound interceptor so no activity has
 * to trace itself: the span is named after the RL stage (names.ts), carries the activity type,
 * attempt, workflow id and turn, and records a failure's type. The span is also the context of
 * everything traced inside the activity: `tracer.begin/span/counter` there inherit its run and
 * role and nest under it (found through Temporal's own activity AsyncLocalStorage).
 */
import { asyncLocalStorage, type Context } from '@temporalio/activity';
import type { ActivityInterceptorsFactory } from '@temporalio/worker';
import { runIdOfWorkflowId } from '../core/ids';
import { ACTIVITY_STAGES, runIdOfInput } from './names';
import { errorLabel, LiveSpan, tracer, type Attrs } from './recorder';

const spans = new WeakMap<Context, LiveSpan>();

tracer.setContextResolver(() => {
  const context = asyncLocalStorage.getStore();
  return context ? spans.get(context) : undefined;
});

/** The run of an activity: its input's `runId`, else the one its workflow id names. */
function runOf(input: unknown, workflowId: string | undefined): string | undefined {
  return runIdOfInput(input) ?? (workflowId ? runIdOfWorkflowId(workflowId) : undefined);
}

/** Activity interceptors of a worker of `role` whose runs keep their data under `dataDir`. */
export function traceActivities(dataDir: string, role: string): ActivityInterceptorsFactory {
  return (ctx) => ({
    inbound: {
      async execute(input, next) {
        if (!tracer.enabled) return next(input);
        const { info } = ctx;
        const workflowId = info.workflowExecution?.workflowId;
        const arg = input.args[0] as Record<string, unknown> | undefined;
        const attrs: Attrs = { activity: info.activityType, attempt: info.attempt };
        if (workflowId) attrs.wf = workflowId;
        if (typeof arg?.turn === 'number') attrs.turn = arg.turn;
        if (typeof arg?.step === 'number') attrs.step = arg.step;
        if (typeof arg?.version === 'number') attrs.version = arg.version;
        const span = tracer.begin(ACTIVITY_STAGES[info.activityType] ?? info.activityType, {
          cat: 'activity',
          scope: { dataDir, role, run: runOf(arg, workflowId) },
          parent: null,
          attrs,
        });
        if (span instanceof LiveSpan) spans.set(ctx, span);
        try {
          const result = await next(input);
          span.end();
          return result;
        } catch (err) {
          span.end({ error: errorLabel(err) });
          throw err;
        }
      },
    },
  });
}

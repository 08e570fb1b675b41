/**
 * The workflow worker runs two roles' local activities (episode sessions, local model calls): each
 * goes through the interceptor chain of its own role, outermost first, and its result is passed back.
 */
import type { Context } from '@temporalio/activity';
import type { ActivityExecuteInput, ActivityInterceptorsFactory } from '@temporalio/worker';
import { byActivityType } from '../workers/workflowWorker';

function recording(name: string, calls: string[]): ActivityInterceptorsFactory {
  return () => ({
    inbound: {
      async execute(input, next) {
        calls.push(`${name} in`);
        const result = await next(input);
        calls.push(`${name} out`);
        return result;
      },
    },
  });
}

async function run(factory: ActivityInterceptorsFactory, activityType: string): Promise<unknown> {
  const ctx = { info: { activityType } } as unknown as Context;
  const input = { args: [activityType], headers: {} } as unknown as ActivityExecuteInput;
  return factory(ctx).inbound!.execute!(input, async (i) => `ran ${String(i.args[0])}`);
}

test('each activity runs through the chain its type routes to, first interceptor outermost', async () => {
  const calls: string[] = [];
  const model = [recording('trace inference', calls), recording('meter inference', calls)];
  const env = [recording('trace env', calls)];
  const routed = byActivityType((type) => (type === 'generate' ? model : env));

  expect(await run(routed, 'generate')).toBe('ran generate');
  expect(calls.splice(0)).toEqual(['trace inference in', 'meter inference in', 'meter inference out', 'trace inference out']);
  expect(await run(routed, 'sessionTurn')).toBe('ran sessionTurn');
  expect(calls.splice(0)).toEqual(['trace env in', 'trace env out']);
});

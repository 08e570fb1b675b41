/**
 * The floor under bench/orchestration.ts: a workflow that calls a no-op activity `count` times on
 * another worker's task queue, as a trajectory calls its env and inference workers, with nothing of
 * trajflow's around it (no interceptors, no store, no payload beyond a number).
 */
import { proxyActivities } from '@temporalio/workflow';

export interface NoopActivities {
  noop(i: number): Promise<number>;
}

export async function noopLoop(count: number, activityQueue: string): Promise<number> {
  const { noop } = proxyActivities<NoopActivities>({ startToCloseTimeout: '1 minute', taskQueue: activityQueue });
  for (let i = 0; i < count; i++) await noop(i);
  return count;
}

/** Facts read back from a workflow's event history. */
import type { WorkflowHandle } from '@temporalio/client';

/** Activity attempts in a workflow's history, by activity type: scheduled count and retried ones. */
export async function activityAttempts(handle: WorkflowHandle): Promise<Record<string, { scheduled: number; attempts: number[] }>> {
  const history = await handle.fetchHistory();
  const typeOf = new Map<string, string>();
  const byType: Record<string, { scheduled: number; attempts: number[] }> = {};
  for (const event of history.events ?? []) {
    const scheduled = event.activityTaskScheduledEventAttributes;
    if (scheduled) {
      const type = scheduled.activityType?.name ?? '?';
      typeOf.set(String(event.eventId), type);
      (byType[type] ??= { scheduled: 0, attempts: [] }).scheduled++;
    }
    const started = event.activityTaskStartedEventAttributes;
    if (started) {
      const type = typeOf.get(String(started.scheduledEventId)) ?? '?';
      (byType[type] ??= { scheduled: 0, attempts: [] }).attempts.push(started.attempt ?? 1);
    }
  }
  return byType;
}

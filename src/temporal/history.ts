/** Facts read back from a workflow's event history. */
import type { WorkflowHandle } from '@temporalio/client';

export type HistoryEvent = NonNullable<Awaited<ReturnType<WorkflowHandle['fetchHistory']>>['events']>[number];

/** When the server recorded `event` (its protobuf Timestamp), in ms. */
export function eventTimeMs(event: HistoryEvent): number {
  return Number(event.eventTime?.seconds) * 1000 + (event.eventTime?.nanos ?? 0) / 1e6;
}

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

/** The marker name the SDK's core records a local activity's result under. */
const LOCAL_ACTIVITY_MARKER = 'core_local_activity';

/**
 * Local activities recorded in a workflow's history, by activity type: how many results were
 * recorded (one marker each) and the attempt that produced each.
 */
export async function localActivityResults(handle: WorkflowHandle): Promise<Record<string, { recorded: number; attempts: number[] }>> {
  const history = await handle.fetchHistory();
  const byType: Record<string, { recorded: number; attempts: number[] }> = {};
  for (const event of history.events ?? []) {
    const marker = event.markerRecordedEventAttributes;
    const data = marker?.markerName === LOCAL_ACTIVITY_MARKER ? marker.details?.data?.payloads?.[0]?.data : undefined;
    if (!data) continue;
    const { activity_type: type, attempt } = JSON.parse(Buffer.from(data).toString('utf8')) as { activity_type: string; attempt?: number };
    const entry = (byType[type] ??= { recorded: 0, attempts: [] });
    entry.recorded++;
    entry.attempts.push(attempt ?? 1);
  }
  return byType;
}

/**
 * What a trajectory activity may hand back to its workflow. Temporal carries each result as one
 * payload in workflow history, and the server refuses a payload over its limit; a refused result
 * reaches the workflow only as "Activity task failed" (the real reason is in the worker's log), or
 * for a local activity fails the whole workflow. So these activities measure their result first
 * and, when it would not fit, fail non-retryably with a reason naming the activity, the size and
 * the limit, which the trajectory records as its outcome.
 */
import { ApplicationFailure, Context } from '@temporalio/activity';
import { defaultPayloadConverter } from '@temporalio/common';
import { PAYLOAD_TOO_LARGE, PAYLOAD_UNSERIALIZABLE } from '../src/core/failures';

/** The Temporal server's default limit on one payload (dynamic config `limit.blobSize.error`). */
export const TEMPORAL_PAYLOAD_LIMIT_BYTES = 2 * 1024 * 1024;

/** gRPC's limit on one message to the Temporal server, e.g. a workflow task's completion with all its commands. */
export const TEMPORAL_GRPC_MESSAGE_LIMIT_BYTES = 4 * 1024 * 1024;

/**
 * Most a trajectory activity may return: a quarter of a gRPC message, half a payload. A local
 * session's turn result (a marker) and the `generate` input made from it go to the server in the
 * same workflow task completion, so both must fit in one message with room to spare.
 */
export const TURN_RESULT_LIMIT_BYTES = TEMPORAL_GRPC_MESSAGE_LIMIT_BYTES / 4;

/** Bytes of `value` as a Temporal payload: its JSON data and metadata (framing aside). */
export function payloadBytes(value: unknown): number {
  const payload = defaultPayloadConverter.toPayload(value);
  const metadata = Object.entries(payload.metadata ?? {}).reduce((sum, [key, bytes]) => sum + Buffer.byteLength(key) + (bytes?.length ?? 0), 0);
  return (payload.data?.length ?? 0) + metadata;
}

/** `result` if it fits in `limitBytes` as a payload; otherwise a non-retryable failure saying why `activity` cannot return it. */
export function checkPayload<T>(activity: string, result: T, limitBytes = TURN_RESULT_LIMIT_BYTES): T {
  let bytes: number;
  try {
    bytes = payloadBytes(result);
  } catch (err) {
    throw ApplicationFailure.create({
      type: PAYLOAD_UNSERIALIZABLE,
      message: `${activity} returned a result Temporal cannot serialize: ${whyNotJson(result) ?? messageOf(err)}`,
      nonRetryable: true,
    });
  }
  if (bytes > limitBytes) {
    throw ApplicationFailure.create({
      type: PAYLOAD_TOO_LARGE,
      message:
        `${activity} returned ${describeBytes(bytes)}, over the ${describeBytes(limitBytes)} limit on what a trajectory activity may return ` +
        `(Temporal refuses a payload over ${describeBytes(TEMPORAL_PAYLOAD_LIMIT_BYTES)})`,
      nonRetryable: true,
    });
  }
  return result;
}

/** JSON's own complaint about `value` (the payload converter's hides it), if it has one. */
function whyNotJson(value: unknown): string | undefined {
  try {
    JSON.stringify(value);
    return undefined;
  } catch (err) {
    return messageOf(err);
  }
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** `checkPayload` for the activity running now. */
export function deliverable<T>(result: T): T {
  return checkPayload(Context.current().info.activityType, result);
}

/** A size for people: `3 MiB (3145728 bytes)`, `1 MiB`, `512 bytes`. */
export function describeBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} bytes`;
  const [value, unit] = bytes < 1024 * 1024 ? [bytes / 1024, 'KiB'] : [bytes / (1024 * 1024), 'MiB'];
  const rounded = `${Number(value.toFixed(1))} ${unit}`;
  return Number.isInteger(value) ? rounded : `${rounded} (${bytes} bytes)`;
}

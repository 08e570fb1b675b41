/**
 * What a trajectory activity may return (activities/payloadLimit.ts), and how the workflow words a
 * failure, with hand-made numbers: a payload is its JSON plus the metadata `encoding: json/plain`
 * (8 + 10 bytes).
 */
import { ActivityFailure, ApplicationFailure, CancelledFailure, ChildWorkflowFailure, RetryState, ServerFailure } from '@temporalio/common';
import { checkPayload, describeBytes, payloadBytes, TURN_RESULT_LIMIT_BYTES } from '../activities/payloadLimit';
import { PAYLOAD_TOO_LARGE, PAYLOAD_UNSERIALIZABLE } from '../src/core/failures';
import { episodeFailure, failureReason } from '../workflows/activityFailures';

function failureOf(fn: () => unknown): ApplicationFailure {
  try {
    fn();
  } catch (err) {
    return err as ApplicationFailure;
  }
  throw new Error('did not throw');
}

describe('payload limit', () => {
  it('measures a payload as Temporal carries it', () => {
    expect(payloadBytes('abc')).toBe(5 + 18);
    expect(payloadBytes({ a: 1 })).toBe(7 + 18);
  });

  it('passes a result up to the limit and refuses one byte more, naming the activity, the size and the limit', () => {
    expect(checkPayload('sessionTurn', 'x'.repeat(80), 100)).toBe('x'.repeat(80));
    const failure = failureOf(() => checkPayload('sessionTurn', 'x'.repeat(81), 100));
    expect(failure).toBeInstanceOf(ApplicationFailure);
    expect(failure).toMatchObject({ type: PAYLOAD_TOO_LARGE, nonRetryable: true });
    expect(failure.message).toBe(
      'sessionTurn returned 101 bytes, over the 100 bytes limit on what a trajectory activity may return (Temporal refuses a payload over 2 MiB)',
    );
  });

  it('refuses 3 MiB against the default limit of 1 MiB', () => {
    expect(TURN_RESULT_LIMIT_BYTES).toBe(1024 * 1024);
    const failure = failureOf(() => checkPayload('openSession', { next: 'x'.repeat(3 * 1024 * 1024) }));
    // 3,145,728 characters + {"next":""} (11) + 18 of metadata.
    expect(failure.message).toMatch(/^openSession returned 3 MiB \(3145757 bytes\), over the 1 MiB limit/);
  });

  it('refuses a result JSON cannot write', () => {
    const failure = failureOf(() => checkPayload('sessionTurn', { info: { count: BigInt(1) } }));
    expect(failure).toMatchObject({ type: PAYLOAD_UNSERIALIZABLE, nonRetryable: true });
    expect(failure.message).toMatch(/^sessionTurn returned a result Temporal cannot serialize: .*BigInt/);
  });

  it('describes sizes for people', () => {
    expect(describeBytes(512)).toBe('512 bytes');
    expect(describeBytes(1536)).toBe('1.5 KiB (1536 bytes)');
    expect(describeBytes(2 * 1024 * 1024)).toBe('2 MiB');
  });
});

describe('failures in words', () => {
  const serverRefusal = () =>
    new ActivityFailure(
      'Activity task failed',
      'sessionTurn',
      '7',
      RetryState.NON_RETRYABLE_FAILURE,
      'worker',
      new ServerFailure('Complete result exceeds size limit.', true),
    );

  it('follows the causes past "Activity task failed" and "Child Workflow execution failed"', () => {
    const child = new ChildWorkflowFailure('default', { workflowId: 't', runId: 'r' }, 'trajectoryWorkflow', RetryState.NON_RETRYABLE_FAILURE, serverRefusal());
    expect(failureReason(child)).toBe('sessionTurn failed: Complete result exceeds size limit.');
  });

  it('ends an episode as failed with a known type’s message, or with the chain of causes', () => {
    const tooLarge = ApplicationFailure.create({ type: PAYLOAD_TOO_LARGE, message: 'sessionTurn returned 3 MiB', nonRetryable: true });
    const wrapped = new ActivityFailure('Activity task failed', 'sessionTurn', '7', RetryState.NON_RETRYABLE_FAILURE, 'worker', tooLarge);
    expect(episodeFailure(wrapped)).toEqual({ status: 'failed', reason: 'sessionTurn returned 3 MiB' });
    expect(episodeFailure(tooLarge)).toEqual({ status: 'failed', reason: 'sessionTurn returned 3 MiB' });
    expect(episodeFailure(serverRefusal())).toEqual({ status: 'failed', reason: 'sessionTurn failed: Complete result exceeds size limit.' });
  });

  it('leaves cancellations and workflow bugs alone', () => {
    expect(episodeFailure(new CancelledFailure('cancelled'))).toBeUndefined();
    expect(
      episodeFailure(new ActivityFailure('Activity task cancelled', 'generate', '3', RetryState.CANCEL_REQUESTED, 'worker', new CancelledFailure('cancelled'))),
    ).toBeUndefined();
    expect(episodeFailure(new TypeError('x is undefined'))).toBeUndefined();
  });
});

import { getEventListeners } from 'node:events';
import { RunInterrupted, unlessInterrupted } from '../client/launch';

describe('unlessInterrupted', () => {
  it('waits with one abort listener, and takes it off after', async () => {
    const controller = new AbortController();
    let during = -1;
    const result = await unlessInterrupted('run-1', controller.signal, async () => {
      during = getEventListeners(controller.signal, 'abort').length;
      return 42;
    });
    expect(result).toBe(42);
    expect(during).toBe(1);
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
  });

  it('rejects with RunInterrupted as soon as the signal aborts, the wait still pending', async () => {
    const controller = new AbortController();
    let callSignal: AbortSignal | undefined;
    const waiting = unlessInterrupted('run-2', controller.signal, (calls) => {
      callSignal = calls;
      return new Promise<never>(() => undefined);
    });
    expect(callSignal?.aborted).toBe(false);
    controller.abort();
    await expect(waiting).rejects.toThrow(new RunInterrupted('run-2'));
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
    // The pending call is cancelled before the caller goes on to close its connection.
    expect(callSignal?.aborted).toBe(true);
    await expect(unlessInterrupted('run-3', controller.signal, async () => 1)).rejects.toBeInstanceOf(RunInterrupted);
  });

  it("passes the wait's own failure through", async () => {
    await expect(unlessInterrupted('run-4', new AbortController().signal, () => Promise.reject(new Error('workflow failed')))).rejects.toThrow(
      'workflow failed',
    );
  });
});

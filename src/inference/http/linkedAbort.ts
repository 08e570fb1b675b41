/**
 * One AbortSignal that fires when any of several does, with listeners removed when done.
 * (AbortSignal.any would do, but keeps listeners on long-lived signals such as a provider's
 * close signal for as long as they live.)
 */
export interface LinkedAbort {
  signal: AbortSignal;
  /** Aborts the linked signal itself (a timeout, say). */
  abort(reason: unknown): void;
  /** Stops following the sources; call when the work under the signal is over. */
  unlink(): void;
}

export function linkAbort(...sources: (AbortSignal | undefined)[]): LinkedAbort {
  const controller = new AbortController();
  const followed = sources.filter((source): source is AbortSignal => source !== undefined);
  const listeners = followed.map((source) => {
    const listener = () => controller.abort(source.reason);
    source.addEventListener('abort', listener, { once: true });
    return listener;
  });
  const already = followed.find((source) => source.aborted);
  if (already) controller.abort(already.reason);
  return {
    signal: controller.signal,
    abort: (reason) => controller.abort(reason),
    unlink: () => followed.forEach((source, i) => source.removeEventListener('abort', listeners[i])),
  };
}

/**
 * How a call to a model server can fail. The class decides what the provider does next:
 * `ServerUnavailableError` sends the request to another server (this one is marked down),
 * `ServerRejectedError` and `MalformedResponseError` end the request at once (another server would
 * answer the same), and an abort error means the caller gave up.
 */

/** The server did not answer usefully: connection refused or reset, a timeout, a 5xx, its own abort, or foreign weights. */
export class ServerUnavailableError extends Error {
  override readonly name = 'ServerUnavailableError';

  constructor(
    readonly server: string,
    readonly endpoint: string,
    /** `weights`: it answered with tokens of weights other than the ones it was synced to. */
    readonly reason: 'connection' | 'timeout' | 'status' | 'aborted' | 'weights',
    detail: string,
    readonly status?: number,
    options?: ErrorOptions,
  ) {
    super(`${server} ${endpoint}: ${detail}`, options);
  }
}

/** The server answered 4xx: the request itself is at fault, so no other server is tried. */
export class ServerRejectedError extends Error {
  override readonly name = 'ServerRejectedError';

  constructor(
    readonly server: string,
    readonly endpoint: string,
    readonly status: number,
    readonly serverMessage: string,
  ) {
    super(`${server} ${endpoint} refused the request (HTTP ${status}): ${serverMessage}`);
  }
}

/** The answer does not have the shape the server's API promises (`where` names the field). */
export class MalformedResponseError extends Error {
  override readonly name = 'MalformedResponseError';

  constructor(
    readonly server: string,
    readonly endpoint: string,
    readonly problems: string,
  ) {
    super(`${server} ${endpoint} sent an unexpected response: ${problems}`);
  }
}

/** The error a cancelled call rejects with: named `AbortError`, like fetch's, carrying the reason. */
export function abortError(reason: unknown): Error {
  const message = reason instanceof Error ? reason.message : reason === undefined ? 'the request was aborted' : String(reason);
  const error = new Error(`aborted: ${message}`, { cause: reason });
  error.name = 'AbortError';
  return error;
}

export function isAbortError(error: unknown): boolean {
  return error instanceof Error && error.name === 'AbortError';
}

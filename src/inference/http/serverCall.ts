/**
 * One JSON call to one model server over Node's global fetch, with a timeout, and every failure
 * turned into one of the errors in ./errors (so the caller only decides: retry elsewhere, or stop).
 */
import type { z } from 'zod';
import { describeIssuesInline } from '../../core/issues';
import { abortError, MalformedResponseError, ServerRejectedError, ServerUnavailableError } from './errors';
import { linkAbort } from './linkedAbort';

/** A call a backend asks for; the provider sends it to a server of its choosing. */
export interface HttpCall {
  method: 'GET' | 'POST';
  /** Path on the server, query string included (`/pause?mode=keep`). */
  endpoint: string;
  body?: unknown;
  headers?: Record<string, string>;
  /** How a successful answer's body is read: JSON (the default), or text (vLLM's LoRA endpoints answer with a sentence). */
  answer?: 'json' | 'text';
}

export interface CallOptions {
  timeoutMs: number;
  /** The caller's cancellation; aborting it rejects with an AbortError (not a server failure). */
  signal?: AbortSignal;
}

/** A server's answer body is quoted in errors up to this length. */
const MAX_QUOTED_CHARS = 500;

/** Sends `call` to the server at base URL `server`; resolves with the parsed JSON (undefined for an empty body), or the text. */
export async function callServer(server: string, call: HttpCall, { timeoutMs, signal }: CallOptions): Promise<unknown> {
  if (signal?.aborted) throw abortError(signal.reason);
  const link = linkAbort(signal);
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    link.abort(new Error('timeout'));
  }, timeoutMs);
  let status: number;
  let text: string;
  try {
    const response = await fetch(`${server.replace(/\/+$/, '')}${call.endpoint}`, {
      method: call.method,
      headers: { ...(call.body === undefined ? {} : { 'content-type': 'application/json' }), ...call.headers },
      body: call.body === undefined ? undefined : JSON.stringify(call.body),
      signal: link.signal,
    });
    status = response.status;
    // Reading the body is part of the call: the timeout and the caller's signal cover it too.
    text = await response.text();
  } catch (error) {
    if (signal?.aborted) throw abortError(signal.reason);
    if (timedOut) throw new ServerUnavailableError(server, call.endpoint, 'timeout', `no answer within ${timeoutMs / 1000} s`);
    throw new ServerUnavailableError(server, call.endpoint, 'connection', `connection failed (${connectionFailure(error)})`, undefined, { cause: error });
  } finally {
    clearTimeout(timer);
    link.unlink();
  }
  if (status >= 500) throw new ServerUnavailableError(server, call.endpoint, 'status', `HTTP ${status}: ${serverMessage(text)}`, status);
  if (status >= 400) throw new ServerRejectedError(server, call.endpoint, status, serverMessage(text));
  if (status < 200 || status >= 300) throw new MalformedResponseError(server, call.endpoint, `HTTP ${status}`);
  if (call.answer === 'text') return text;
  if (text.trim() === '') return undefined;
  try {
    return JSON.parse(text);
  } catch {
    throw new MalformedResponseError(server, call.endpoint, `not JSON: ${quote(text)}`);
  }
}

/**
 * Validates an answer against the schema of the server's API; a mismatch names the server, the
 * endpoint and each offending field (`choices[0].token_ids: ...`).
 */
export function parseAnswer<T>(schema: z.ZodType<T>, json: unknown, server: string, endpoint: string): T {
  const parsed = schema.safeParse(json);
  if (!parsed.success) throw new MalformedResponseError(server, endpoint, describeIssuesInline(parsed.error.issues, 'the body'));
  return parsed.data;
}

/**
 * What an error body says, in the shapes vLLM (FastAPI: `{detail}` or `{error: {message}}`) and
 * SGLang (`{error: {message}}`, `{error: "..."}`, `{message}`, its LoRA endpoints' `{error_message}`) use;
 * else the body itself.
 */
export function serverMessage(text: string): string {
  try {
    const body = JSON.parse(text) as Record<string, unknown> | null;
    const error = body?.error;
    if (typeof error === 'string') return error;
    if (error && typeof error === 'object' && typeof (error as { message?: unknown }).message === 'string') return (error as { message: string }).message;
    if (typeof body?.message === 'string') return body.message;
    if (typeof body?.error_message === 'string' && body.error_message) return body.error_message;
    if (typeof body?.detail === 'string') return body.detail;
    if (body?.detail !== undefined) return quote(JSON.stringify(body.detail));
  } catch {
    // Not JSON: quoted as it is.
  }
  return text.trim() === '' ? '(empty body)' : quote(text);
}

function quote(text: string): string {
  const trimmed = text.trim();
  return trimmed.length > MAX_QUOTED_CHARS ? `${trimmed.slice(0, MAX_QUOTED_CHARS)}...` : trimmed;
}

/** The system error code under fetch's generic "fetch failed" (ECONNREFUSED, ECONNRESET, ...). */
function connectionFailure(error: unknown): string {
  let current: unknown = error;
  for (let depth = 0; current instanceof Error && depth < 4; depth++) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === 'string') return `${code}: ${current.message}`;
    current = current.cause;
  }
  return error instanceof Error ? error.message : String(error);
}

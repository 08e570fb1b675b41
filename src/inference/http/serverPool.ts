/**
 * The model servers of one provider and what this process knows of each: how many of its requests
 * each is running, which are down (and until when), and which weights version each holds.
 *
 * A server that fails is down for a backoff that starts at `initialBackoffMs` and doubles with
 * each failure in a row up to `maxBackoffMs`; once it has passed, the server is tried again, and
 * an answer revives it. Only this process's requests are counted: servers shared with other
 * workers may be busier than they look, which least-loaded choice tolerates.
 */
import type { WeightsLabel } from './weightVersions';

export interface ServerState {
  readonly url: string;
  /** Requests of this process the server is running now. */
  inFlight: number;
  /** Failures in a row; 0 when live. */
  failures: number;
  /** Not to be tried before this time (the pool's clock); 0 when live. */
  downUntil: number;
  lastError?: string;
  /** When a request was last sent to it, to spread ties between equally loaded servers. */
  lastPickedAt: number;
  /**
   * The weights the server is known to hold. Undefined until loaded, while a load is under way or
   * failed, and after the server goes down: it may come back restarted, on its initial weights.
   */
  knownWeights?: WeightsLabel;
  /**
   * LoRA runs: the trajflow adapters the server holds, as last listed or changed by this process;
   * undefined like knownWeights (the first sync after it replaces the target's adapter).
   */
  adapters?: WeightsLabel[];
  /** LoRA runs: this process's requests on the server per adapter name (those are not unloaded). */
  readonly adapterUses: Map<string, number>;
  /** Whether the backend's set-up check (checkServer) passed on it; forgotten, like its weights, when it goes down. */
  checked?: boolean;
  /** The weight sync under way on this server, shared by every request that needs it. */
  syncing?: Promise<void>;
}

export interface BackoffOptions {
  initialBackoffMs?: number;
  maxBackoffMs?: number;
}

export const DEFAULT_INITIAL_BACKOFF_MS = 1_000;
export const DEFAULT_MAX_BACKOFF_MS = 30_000;

export class ServerPool {
  readonly servers: readonly ServerState[];
  private readonly initialBackoffMs: number;
  private readonly maxBackoffMs: number;

  constructor(
    urls: readonly string[],
    { initialBackoffMs = DEFAULT_INITIAL_BACKOFF_MS, maxBackoffMs = DEFAULT_MAX_BACKOFF_MS }: BackoffOptions = {},
    private readonly now: () => number = () => performance.now(),
  ) {
    if (urls.length === 0) throw new Error('a model server pool needs at least one server URL');
    this.servers = urls.map((url) => ({ url, inFlight: 0, failures: 0, downUntil: 0, lastPickedAt: -Infinity, adapterUses: new Map<string, number>() }));
    this.initialBackoffMs = initialBackoffMs;
    this.maxBackoffMs = Math.max(maxBackoffMs, initialBackoffMs);
  }

  isLive(server: ServerState): boolean {
    return server.downUntil <= this.now();
  }

  /**
   * The live server with the fewest requests in flight (ties: the one picked longest ago), marked
   * as picked; undefined when every server is down.
   */
  pickLeastLoaded(): ServerState | undefined {
    let best: ServerState | undefined;
    for (const server of this.servers) {
      if (!this.isLive(server)) continue;
      if (!best || server.inFlight < best.inFlight || (server.inFlight === best.inFlight && server.lastPickedAt < best.lastPickedAt)) best = server;
    }
    if (best) best.lastPickedAt = this.now();
    return best;
  }

  /** Milliseconds until the first down server may be tried again (0 if one is live). */
  msUntilNextLive(): number {
    const now = this.now();
    return Math.max(0, Math.min(...this.servers.map((server) => server.downUntil - now)));
  }

  /** Marks `server` down after `error`; returns the backoff chosen. */
  markDown(server: ServerState, error: Error): number {
    const backoffMs = Math.min(this.initialBackoffMs * 2 ** server.failures, this.maxBackoffMs);
    server.failures++;
    server.downUntil = this.now() + backoffMs;
    server.lastError = error.message;
    server.knownWeights = undefined;
    server.adapters = undefined;
    server.checked = undefined;
    return backoffMs;
  }

  /** `server` answered: it is live, and its backoff starts over. */
  markUp(server: ServerState): void {
    server.failures = 0;
    server.downUntil = 0;
    server.lastError = undefined;
  }

  /** Every server and its last error, for the error that ends a request no server answered. */
  describe(): string {
    return this.servers.map((server) => `${server.url} (${server.lastError ?? (this.isLive(server) ? 'live' : 'down')})`).join('; ');
  }
}

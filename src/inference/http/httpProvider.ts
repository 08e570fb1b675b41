/**
 * InferenceProvider over model servers speaking vLLM's or SGLang's HTTP API (`backend`), token ids
 * in and out.
 *
 * Each request goes to the live server with the fewest of this process's requests in flight. A
 * server that refuses or resets the connection, answers 5xx, aborts the request itself, or takes
 * longer than requestTimeoutS is marked down (backoff 1 s doubling to 30 s) and the request is
 * sent again, under a fresh request id, to another server (or to the same one once its backoff
 * has passed). With every server down the request waits for one to come back; it fails only once
 * 2 × requestTimeoutS have passed without an answer, naming the servers and their last errors (a
 * Temporal activity retry takes it from there). A 4xx answer, or an answer of the wrong shape,
 * fails it at once: another server would answer the same.
 *
 * Weights: loadWeights tells every live server to load the checkpoint directory, labelled with
 * its version and its run's lineage (./weightVersions.ts); a server that is down then is brought
 * to it before its next request. The target is the checkpoint itself: a worker that outlives a run
 * loads the next run's weights whatever their version numbers. An answer sampled by another
 * lineage's weights (a server shared with another run, which reloaded it) is never returned: the
 * server is synced again and the request retried. Syncs of one server by several processes take
 * turns (./serverSyncLock.ts).
 *
 * LoRA: a checkpoint folder that is a peft adapter (../../store/loraAdapter.ts) is loaded as a
 * runtime adapter named by its label, beside the server's base model, and each request names the
 * newest adapter of the target's lineage the server holds (at the target's version or later); its
 * tokens carry that adapter's version. A few adapters stay loaded per server (./loraAdapters.ts):
 * older ones are unloaded to make room, except those a request of this process is using.
 */
import { randomUUID } from 'node:crypto';
import { setMaxListeners } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from '../../log';
import { BusyTracker } from '../../metrics/busy';
import type { EngineStats, GenerateRequest, GenerateResult, InferenceProvider } from '../provider';
import { isLoraAdapterFolder } from '../../store/loraAdapter';
import type { SampledCompletion, ServerBackend, ServerConnection } from './backend';
import { abortError, isAbortError, ServerRejectedError, ServerUnavailableError } from './errors';
import { linkAbort } from './linkedAbort';
import { adapterServing, adaptersToUnload, listAdapters, sameAdapter } from './loraAdapters';
import { callServer } from './serverCall';
import { ServerPool, type BackoffOptions, type ServerState } from './serverPool';
import { ServerSyncLock } from './serverSyncLock';
import { sglangBackend } from './sglang';
import { vllmBackend } from './vllm';
import { formatLabel, lineageOf, type WeightsLabel } from './weightVersions';

export interface HttpProviderOptions {
  backend: 'vllm' | 'sglang';
  /** Base URLs (`http://host:port`). */
  servers: readonly string[];
  /** Longest one generate call may take on one server before it is retried on another. */
  requestTimeoutS: number;
  /**
   * Longest one server may take to load a checkpoint. Default requestTimeoutS + 600 s: SGLang
   * first lets the requests in flight finish.
   */
  weightLoadTimeoutS?: number;
  /** How long a failed server is left alone (default 1 s, doubling to 30 s). */
  backoff?: BackoffOptions;
  /**
   * A folder every process syncing these servers shares (the data directory's locks/): their
   * weight syncs of one server take turns. Without it, only this process's syncs do.
   */
  syncLockDir?: string;
  logger?: Logger;
}

const BACKENDS: Record<HttpProviderOptions['backend'], ServerBackend> = { sglang: sglangBackend, vllm: vllmBackend };

/** Version reads, pause / resume, labels: small calls with no model work behind them. */
const CONTROL_TIMEOUT_MS = 10_000;
/** A server's one-time set-up check (vLLM's /server_info gathers its environment the first time). */
const SERVER_CHECK_TIMEOUT_MS = 60_000;
/** Telling a server to drop a cancelled request is a courtesy: the cancellation does not wait longer. */
const ABORT_NOTICE_TIMEOUT_MS = 2_000;
/** A request fails after this many request timeouts without any server answering it. */
const GIVE_UP_AFTER_TIMEOUTS = 2;

export function createHttpProvider(options: HttpProviderOptions): InferenceProvider {
  return new HttpProvider(options);
}

/** The checkpoint every server should hold, and its label. */
interface WeightsTarget extends WeightsLabel {
  checkpoint: string;
  /** A LoRA adapter of the servers' base model, not whole weights. */
  adapter: boolean;
}

class HttpProvider implements InferenceProvider {
  private readonly backend: ServerBackend;
  private readonly pool: ServerPool;
  private readonly requestTimeoutMs: number;
  private readonly weightLoadTimeoutMs: number;
  private readonly logger: Logger | undefined;
  private readonly syncLock: ServerSyncLock | undefined;
  private target: WeightsTarget | undefined;
  /** The version of the last loadWeights that succeeded. */
  private loadedVersion: number | undefined;
  /** Aborted by close(): every request, wait and weight sync follows it. */
  private readonly closing = new AbortController();
  private readonly pending = new Set<Promise<unknown>>();

  /** Requests on the servers: busy while at least one is. */
  private readonly requests = new BusyTracker();
  private waiting = 0;
  private generatedTokens = 0;

  constructor({ backend, servers, requestTimeoutS, weightLoadTimeoutS, backoff, syncLockDir, logger }: HttpProviderOptions) {
    if (!(requestTimeoutS > 0)) throw new Error(`requestTimeoutS must be positive, got ${requestTimeoutS}`);
    this.backend = BACKENDS[backend];
    this.pool = new ServerPool(servers, backoff);
    this.requestTimeoutMs = requestTimeoutS * 1000;
    this.weightLoadTimeoutMs = (weightLoadTimeoutS ?? requestTimeoutS + 600) * 1000;
    this.logger = logger?.child({ component: 'inference-http', backend });
    this.syncLock = syncLockDir === undefined ? undefined : new ServerSyncLock(syncLockDir);
    // Every request in flight listens to it: hundreds at once are expected, not a leak.
    setMaxListeners(0, this.closing.signal);
  }

  generate(request: GenerateRequest): Promise<GenerateResult> {
    return this.track(async () => {
      const link = linkAbort(request.signal, this.closing.signal);
      try {
        return await this.generateWithFailover(request, link.signal);
      } finally {
        link.unlink();
      }
    });
  }

  loadWeights(checkpoint: string, version: number): Promise<number> {
    return this.track(async () => {
      // The caller names the weights it needs; one call at a time per run (activities/servedWeights.ts).
      this.target = { checkpoint, version, lineage: lineageOf(checkpoint), adapter: await isLoraAdapterFolder(checkpoint) };
      const outcomes = await Promise.allSettled(this.pool.servers.map((server) => this.loadOnServer(server)));
      const failures = outcomes.flatMap((outcome) => (outcome.status === 'rejected' ? [errorMessage(outcome.reason)] : []));
      if (failures.length > 0) throw new Error(`loading weights version ${version} from ${checkpoint} failed: ${failures.join('; ')}`);
      this.loadedVersion = this.target.version;
      return this.loadedVersion;
    });
  }

  async stats(): Promise<EngineStats> {
    const { uptimeMs, busyMs, inFlight } = this.requests.stats();
    return {
      // -1 until trajflow loads weights: a server's initial weights carry no trajflow version.
      policyVersion: this.loadedVersion ?? -1,
      uptimeMs,
      busyMs,
      // The servers' forward passes are not visible through their request APIs.
      decodeSteps: 0,
      generatedTokens: this.generatedTokens,
      batchSizeSum: 0,
      // Most requests this process has had on the servers at once.
      maxBatchSize: this.requests.mostInFlight,
      running: inFlight,
      waiting: this.waiting,
    };
  }

  /** Aborts every request and weight sync in flight (telling the servers), and waits for them to end. */
  async close(): Promise<void> {
    if (this.closing.signal.aborted) return;
    this.closing.abort(new Error('the HTTP inference provider is closed'));
    await Promise.allSettled([...this.pending]);
  }

  private track<T>(work: () => Promise<T>): Promise<T> {
    if (this.closing.signal.aborted) return Promise.reject(new Error('the HTTP inference provider is closed'));
    const promise = work();
    this.pending.add(promise);
    void promise.finally(() => this.pending.delete(promise)).catch(() => undefined);
    return promise;
  }

  private async generateWithFailover(request: GenerateRequest, signal: AbortSignal): Promise<GenerateResult> {
    const startedAt = performance.now();
    const giveUpAt = startedAt + GIVE_UP_AFTER_TIMEOUTS * this.requestTimeoutMs;
    for (;;) {
      if (signal.aborted) throw abortError(signal.reason);
      const server = this.pool.pickLeastLoaded();
      if (!server) {
        if (performance.now() >= giveUpAt) throw this.noServerAnswered(startedAt);
        await this.waitForAServer(Math.min(this.pool.msUntilNextLive(), giveUpAt - performance.now()), signal);
        continue;
      }
      try {
        return await this.attempt(server, request, signal, startedAt);
      } catch (error) {
        if (!(error instanceof ServerUnavailableError)) throw error;
        const backoffMs = this.pool.markDown(server, error);
        this.logger?.warn({ server: server.url, backoffMs, error: error.message }, 'model server failed; sending the request to another');
        if (performance.now() >= giveUpAt) throw this.noServerAnswered(startedAt);
      }
    }
  }

  /** One try of a request on one server, under a request id of its own. */
  private async attempt(server: ServerState, request: GenerateRequest, signal: AbortSignal, startedAt: number): Promise<GenerateResult> {
    // Counted from here, so requests arriving during a weight sync spread to other servers.
    server.inFlight++;
    try {
      const adapter = await untilAborted(this.syncBeforeUse(server), signal);
      const requestId = `trajflow-${randomUUID()}`;
      const call = this.backend.generateCall(request, requestId, adapter);
      const sentAt = performance.now();
      const requestDone = this.requests.begin();
      const adapterDone = adapter && useAdapter(server, adapter);
      try {
        const json = await callServer(server.url, call, { timeoutMs: this.requestTimeoutMs, signal });
        const sampled = this.backend.readGenerate(json, { server: server.url, endpoint: call.endpoint }, adapter);
        // Not the caller's abort (that rejects the fetch): the server gave up on it, say for a pause.
        if (sampled.finish === 'aborted') throw new ServerUnavailableError(server.url, call.endpoint, 'aborted', 'the server aborted the request');
        const foreign = this.foreignLineage(sampled.lineages);
        if (foreign !== undefined) {
          throw new ServerUnavailableError(
            server.url,
            call.endpoint,
            'weights',
            `the answer was sampled by weights of another run (lineage ${foreign || 'none'}, not ${this.target?.lineage}): another process loaded them; syncing again`,
          );
        }
        this.pool.markUp(server);
        this.generatedTokens += sampled.completionIds.length;
        return toResult(sampled, sentAt - startedAt, performance.now() - sentAt);
      } catch (error) {
        // The servers also drop a request whose client hung up, but not necessarily at once.
        if (isAbortError(error) && signal.aborted) await this.tellServerToAbort(server, requestId);
        if (adapter && isUnknownAdapter(error, adapter)) {
          throw new ServerUnavailableError(
            server.url,
            call.endpoint,
            'weights',
            `the server no longer holds adapter ${formatLabel(adapter)} (another process unloaded it): syncing again`,
          );
        }
        throw error;
      } finally {
        requestDone();
        adapterDone?.();
      }
    } finally {
      server.inFlight--;
    }
  }

  /** A lineage among `lineages` that is not the target's, if any (any is fine before the first load). */
  private foreignLineage(lineages: readonly string[]): string | undefined {
    const target = this.target;
    return target === undefined ? undefined : lineages.find((lineage) => lineage !== target.lineage);
  }

  private async waitForAServer(ms: number, signal: AbortSignal): Promise<void> {
    this.waiting++;
    try {
      await sleep(Math.max(1, ms), undefined, { signal });
    } catch {
      throw abortError(signal.reason);
    } finally {
      this.waiting--;
    }
  }

  private noServerAnswered(startedAt: number): Error {
    const seconds = ((performance.now() - startedAt) / 1000).toFixed(1);
    return new Error(`no ${this.backend.name} server answered the generate request in ${seconds} s; last errors: ${this.pool.describe()}`);
  }

  private async tellServerToAbort(server: ServerState, requestId: string): Promise<void> {
    try {
      await callServer(server.url, this.backend.abortCall(requestId), { timeoutMs: ABORT_NOTICE_TIMEOUT_MS });
    } catch (error) {
      this.logger?.warn({ server: server.url, requestId, error: errorMessage(error) }, 'could not tell the model server to abort a cancelled request');
    }
  }

  /** Brings a live server to the target weights (for loadWeights); a server found down is left for later. */
  private async loadOnServer(server: ServerState): Promise<void> {
    if (!this.pool.isLive(server)) {
      this.logger?.info({ server: server.url, version: this.target?.version }, 'model server is down: it loads the weights before its next request');
      return;
    }
    try {
      await this.syncBeforeUse(server);
      this.pool.markUp(server);
    } catch (error) {
      // A server that answered with an error (a bad directory, say) is reported; one that did not
      // answer at all is left to sync when it is back.
      if (!(error instanceof ServerUnavailableError) || error.reason === 'status') throw error;
      const backoffMs = this.pool.markDown(server, error);
      this.logger?.warn({ server: server.url, backoffMs, error: error.message }, 'model server failed; it loads the weights before its next request');
    }
  }

  /**
   * Resolves once `server` holds the target checkpoint (or a newer version of its lineage), loading
   * it if needed; one sync per server at a time in this process, and across processes under the lock.
   * For a LoRA target, resolves with the adapter a request should name.
   */
  private async syncBeforeUse(server: ServerState): Promise<WeightsLabel | undefined> {
    for (;;) {
      const target = this.target;
      if (!target) return undefined;
      if (target.adapter) {
        const adapter = adapterServing(server.adapters, target);
        if (adapter) return adapter;
      } else if (holds(server.knownWeights, target)) {
        return undefined;
      }
      server.syncing ??= this.syncUnderLock(server, target).finally(() => {
        server.syncing = undefined;
      });
      await server.syncing;
    }
  }

  private syncUnderLock(server: ServerState, target: WeightsTarget): Promise<void> {
    return this.syncLock ? this.syncLock.hold(server.url, () => this.sync(server, target), this.closing.signal) : this.sync(server, target);
  }

  private async sync(server: ServerState, target: WeightsTarget): Promise<void> {
    const connection = this.connection(server);
    if (!server.checked) {
      await this.backend.checkServer?.(connection, SERVER_CHECK_TIMEOUT_MS);
      server.checked = true;
    }
    if (target.adapter) return this.syncAdapter(server, target, connection);
    // Until this provider has loaded a server once, its label may name weights loaded from a
    // folder since rewritten (a data directory cleared and a run id used again), so the first
    // sync always loads. After it, a newer version of the same lineage was loaded by another
    // inference worker of the same run: keep it.
    const reported = server.knownWeights === undefined ? undefined : await this.backend.weightLabel(connection, CONTROL_TIMEOUT_MS);
    if (reported !== undefined && holds(reported, target)) {
      server.knownWeights = reported;
      return;
    }
    // From here until the load succeeds, what the server holds is unknown.
    server.knownWeights = undefined;
    this.logger?.info({ server: server.url, from: reported ?? null, to: target.version, checkpoint: target.checkpoint }, 'model server loading weights');
    const started = performance.now();
    await this.backend.loadWeights(connection, target.checkpoint, target, { controlMs: CONTROL_TIMEOUT_MS, loadMs: this.weightLoadTimeoutMs });
    server.knownWeights = { version: target.version, lineage: target.lineage };
    this.logger?.info({ server: server.url, version: target.version, ms: Math.round(performance.now() - started) }, 'model server loaded weights');
  }

  /**
   * LoRA: makes `server` hold the target's adapter beside its base model. As for whole weights, an
   * adapter another worker of the run loaded is used only once this provider has synced the server;
   * before that, an adapter under the target's name may come from a folder since rewritten, and is
   * replaced.
   */
  private async syncAdapter(server: ServerState, target: WeightsTarget, connection: ServerConnection): Promise<void> {
    const firstSync = server.adapters === undefined;
    if (firstSync) await this.checkBaseWeights(connection);
    let held = await listAdapters(connection, CONTROL_TIMEOUT_MS);
    if (!firstSync && adapterServing(held, target)) {
      server.adapters = held;
      return;
    }
    server.adapters = undefined;
    if (held.some((adapter) => sameAdapter(adapter, target))) {
      await this.backend.unloadAdapter(connection, target, this.weightLoadTimeoutMs);
      held = held.filter((adapter) => !sameAdapter(adapter, target));
    }
    held = await this.unloadOldAdapters(server, connection, held, target);
    this.logger?.info({ server: server.url, to: target.version, checkpoint: target.checkpoint }, 'model server loading LoRA adapter');
    const started = performance.now();
    await this.backend.loadAdapter(connection, target.checkpoint, target, this.weightLoadTimeoutMs);
    server.adapters = [...held, { version: target.version, lineage: target.lineage }];
    this.logger?.info({ server: server.url, version: target.version, ms: Math.round(performance.now() - started) }, 'model server loaded LoRA adapter');
  }

  /**
   * Adapters apply to the base model the server started with: one whose weights trajflow replaced
   * by a full fine-tuning run's checkpoint (a label with a lineage) would sample other tokens under
   * the adapters' labels.
   */
  private async checkBaseWeights(connection: ServerConnection): Promise<void> {
    const base = await this.backend.weightLabel(connection, CONTROL_TIMEOUT_MS);
    if (base?.lineage) {
      throw new Error(
        `${connection.url} serves a full fine-tuning run's weights (version ${base.version} of lineage ${base.lineage}), not its base model: a LoRA run's adapters need the base model; restart the server`,
      );
    }
  }

  /** Unloads old adapters to make room for `incoming` (best-effort: one that fails to unload stays); returns those left. */
  private async unloadOldAdapters(server: ServerState, connection: ServerConnection, held: WeightsLabel[], incoming: WeightsLabel): Promise<WeightsLabel[]> {
    let left = held;
    for (const old of adaptersToUnload(held, incoming, (adapter) => (server.adapterUses.get(formatLabel(adapter)) ?? 0) > 0)) {
      try {
        await this.backend.unloadAdapter(connection, old, this.weightLoadTimeoutMs);
        left = left.filter((adapter) => !sameAdapter(adapter, old));
      } catch (error) {
        this.logger?.warn({ server: server.url, adapter: formatLabel(old), error: errorMessage(error) }, 'could not unload an old LoRA adapter');
      }
    }
    return left;
  }

  private connection(server: ServerState): ServerConnection {
    return { url: server.url, send: (call, { timeoutMs }) => callServer(server.url, call, { timeoutMs, signal: this.closing.signal }) };
  }
}

/** Whether weights labelled `held` serve `target`: its lineage, its version or newer. */
function holds(held: WeightsLabel | undefined, target: WeightsLabel): boolean {
  return held !== undefined && held.lineage === target.lineage && held.version >= target.version;
}

/** Counts a request of this process on `adapter` (so it is not unloaded under it); returns the release. */
function useAdapter(server: ServerState, adapter: WeightsLabel): () => void {
  const name = formatLabel(adapter);
  server.adapterUses.set(name, (server.adapterUses.get(name) ?? 0) + 1);
  return () => {
    const left = (server.adapterUses.get(name) ?? 1) - 1;
    if (left > 0) server.adapterUses.set(name, left);
    else server.adapterUses.delete(name);
  };
}

/** Whether `error` is the server refusing a request for naming an adapter it does not hold (both servers' messages name it). */
function isUnknownAdapter(error: unknown, adapter: WeightsLabel): boolean {
  return error instanceof ServerRejectedError && error.serverMessage.includes(formatLabel(adapter));
}

function toResult(sampled: SampledCompletion, queueMs: number, decodeMs: number): GenerateResult {
  const { completionIds, logprobs, firstVersion, tokenVersions } = sampled;
  const mixed = tokenVersions.some((version) => version !== firstVersion);
  return {
    completionIds,
    logprobs,
    finishReason: sampled.finish === 'length' ? 'length' : 'stop', // 'aborted' never gets here
    policyVersion: firstVersion,
    ...(mixed ? { tokenPolicyVersions: tokenVersions } : {}),
    // Time before the answering server got the request (earlier attempts, waits for a live
    // server, its weight sync), then the call itself (the server's own queue included).
    queueMs,
    decodeMs,
  };
}

/** `work`, or an AbortError as soon as `signal` aborts (work shared with others goes on). */
function untilAborted<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(abortError(signal.reason));
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(abortError(signal.reason));
    signal.addEventListener('abort', onAbort, { once: true });
    void work.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

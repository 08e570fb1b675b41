/**
 * The embedded policy as an InferenceProvider: a BatchingEngine in its own worker thread, so forward
 * passes never stall the calling thread's event loop (the Temporal worker's). Each call is a
 * message; replies resolve the matching promise by id.
 */
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import type { GenerateRequest, InferenceProvider } from '../inference/provider';
import type { EngineResult, EngineTimings } from './engine';
import type { EngineThreadData, EngineThreadOptions, FromThread, ToThread } from './engineThread';
import { loadCheckpoint, type ModelWeights } from './weights';
import { tracer } from '../trace/recorder';

export type EmbeddedProviderOptions = EngineThreadOptions;

/** A message to the thread, before it gets its id (Omit distributed over the union). */
type WithoutId<M> = M extends unknown ? Omit<M, 'id'> : never;
type Call = WithoutId<ToThread>;

interface Pending {
  resolve: (value: unknown) => void;
  reject: (error: Error) => void;
}

export class EmbeddedProvider implements InferenceProvider {
  private readonly pending = new Map<number, Pending>();
  private nextId = 0;
  /** Set once the thread is gone (closed or crashed); every later call rejects with it. */
  private failure: Error | undefined;
  /** Settles when the thread reports its engine ready, or fails first. */
  private readonly started: Promise<void>;
  private startupDone!: Pending;
  private readonly stopFollowingTrace: () => void;

  /** Starts the thread and resolves once its engine is ready (rejects if the weights cannot load). */
  static async create(options: EmbeddedProviderOptions = {}): Promise<EmbeddedProvider> {
    // The thread traces while this process does (and follows it when it is switched).
    const provider = new EmbeddedProvider(startEngineThread({ ...options, trace: options.trace ?? tracer.enabled }));
    try {
      await provider.started;
    } catch (err) {
      await provider.worker.terminate();
      throw err;
    }
    return provider;
  }

  private constructor(private readonly worker: Worker) {
    this.started = new Promise((resolve, reject) => (this.startupDone = { resolve: () => resolve(), reject }));
    worker.on('message', (message: FromThread) => this.settle(message));
    worker.on('error', (err) => this.fail(err));
    worker.on('exit', (code) => this.fail(new Error(`engine thread exited (code ${code})`)));
    this.stopFollowingTrace = tracer.onEnabledChange((enabled) => void this.call({ type: 'trace', enabled }).catch(() => undefined));
  }

  generate(request: GenerateRequest): Promise<EngineResult> {
    return this.call({ type: 'generate', request }) as Promise<EngineResult>;
  }

  stats(): Promise<EngineTimings> {
    return this.call({ type: 'stats' }) as Promise<EngineTimings>;
  }

  /** New policy weights for every later token; resolves once the engine uses them. */
  async setWeights(weights: ModelWeights, version: number): Promise<void> {
    await this.call({ type: 'setWeights', weights, version });
  }

  /** Loads a checkpoint file (as the trainer publishes them) and switches to it between steps. */
  async loadWeights(checkpointFile: string): Promise<number> {
    const { weights, policyVersion } = await tracer.span('weights.read', undefined, () => loadCheckpoint(checkpointFile));
    await tracer.span('weights.apply', { version: policyVersion }, () => this.setWeights(weights, policyVersion));
    return policyVersion;
  }

  /** Stops the thread; calls still in flight reject. */
  async close(): Promise<void> {
    if (this.failure) return;
    // The thread's last trace events come before its reply (not waited for long: a stuck thread
    // must still close).
    if (tracer.enabled) {
      let timer: NodeJS.Timeout | undefined;
      const giveUp = new Promise<void>((resolve) => (timer = setTimeout(resolve, 2_000)));
      await Promise.race([this.call({ type: 'trace', flush: true }).catch(() => undefined), giveUp]);
      clearTimeout(timer);
    }
    this.fail(new Error('EmbeddedProvider is closed'));
    await this.worker.terminate();
  }

  private call(message: Call): Promise<unknown> {
    if (this.failure) return Promise.reject(this.failure);
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      try {
        this.worker.postMessage({ ...message, id });
      } catch (err) {
        this.pending.delete(id);
        reject(err);
      }
    });
  }

  private settle(message: FromThread): void {
    if (message.type === 'ready') return this.startupDone.resolve(undefined);
    if (message.type === 'startFailed') return this.fail(new Error(message.message));
    if (message.type === 'traceEvents') return tracer.ingest(message.entries);
    const pending = this.pending.get(message.id);
    if (!pending) return;
    this.pending.delete(message.id);
    if (message.type === 'error') pending.reject(new Error(message.message));
    else if (message.type === 'result') pending.resolve(message.result);
    else if (message.type === 'stats') pending.resolve(message.stats);
    else pending.resolve(undefined);
  }

  private fail(error: Error): void {
    this.stopFollowingTrace?.();
    this.failure ??= error;
    this.startupDone.reject(this.failure);
    for (const { reject } of this.pending.values()) reject(this.failure);
    this.pending.clear();
  }
}

/**
 * Compiled (dist/), the thread runs the sibling engineThread.js. From TypeScript sources (jest via
 * @swc/jest) there is no .js to run and Node 20 cannot load .ts, so the thread starts from a few
 * lines that compile every .ts it requires with @swc/core (a dev dependency, so present wherever
 * the sources are).
 */
function startEngineThread(options: EngineThreadOptions): Worker {
  const workerData: EngineThreadData = { trajflowEngine: options };
  if (!__filename.endsWith('.ts')) return new Worker(path.join(__dirname, 'engineThread.js'), { workerData });
  const bootstrap = `
    const { readFileSync } = require('node:fs');
    const { transformSync } = require(${JSON.stringify(require.resolve('@swc/core'))});
    require.extensions['.ts'] = (module, filename) => {
      const options = { filename, swcrc: false, sourceMaps: 'inline', module: { type: 'commonjs' }, jsc: { parser: { syntax: 'typescript' }, target: 'es2022' } };
      module._compile(transformSync(readFileSync(filename, 'utf8'), options).code, filename);
    };
    require(${JSON.stringify(path.join(__dirname, 'engineThread.ts'))});
  `;
  return new Worker(bootstrap, { eval: true, workerData });
}

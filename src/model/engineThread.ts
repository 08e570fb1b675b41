/**
 * Body of the engine's worker thread: builds the weights and a BatchingEngine, then serves the
 * EmbeddedProvider's messages. Forward passes block only this thread, never the Temporal worker's
 * event loop.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { configDifferences, modelConfig, type ModelConfig } from './config';
import { BatchingEngine, type EngineResult, type EngineTimings } from './engine';
import { initWeights, loadCheckpoint, type Checkpoint, type ModelWeights } from './weights';
import type { GenerateRequest } from '../inference/provider';
import { tracer, type TraceEntry } from '../trace/recorder';

export interface EngineThreadOptions {
  /** Architecture; fields left out take the defaults. A checkpoint must match it. */
  model?: Partial<ModelConfig>;
  /** Seed of fresh weights (default 0), used when no checkpoint is named. */
  seed?: number;
  /** Checkpoint file to load the weights and policy version from. */
  checkpoint?: string;
  maxBatch?: number;
  /** Record engine trace events (prefill, decode steps, occupancy) and post them to the parent. */
  trace?: boolean;
}

export type ToThread =
  | { type: 'generate'; id: number; request: GenerateRequest }
  | { type: 'stats'; id: number }
  | { type: 'setWeights'; id: number; weights: ModelWeights; version: number }
  /** Turn engine tracing on or off; off (and `flush`) posts what is buffered first. */
  | { type: 'trace'; id: number; enabled?: boolean; flush?: boolean };

export type FromThread =
  | { type: 'ready' }
  | { type: 'startFailed'; message: string }
  | { type: 'result'; id: number; result: EngineResult }
  | { type: 'stats'; id: number; stats: EngineTimings }
  | { type: 'done'; id: number }
  | { type: 'error'; id: number; message: string }
  /** Buffered trace events, posted about once a second while tracing is on. */
  | { type: 'traceEvents'; entries: TraceEntry[] };

/** The weights the options name: the checkpoint's (checked against the architecture) or fresh ones. */
async function resolveWeights({ model, seed = 0, checkpoint }: EngineThreadOptions): Promise<Checkpoint> {
  const config = modelConfig(model);
  if (checkpoint === undefined) return { weights: initWeights(config, seed), policyVersion: 0 };
  const loaded = await loadCheckpoint(checkpoint);
  const differences = configDifferences(loaded.weights.config, config);
  if (differences.length > 0) {
    throw new Error(`checkpoint ${checkpoint} is for another architecture than configured (${differences.join(', ')})`);
  }
  return loaded;
}

async function serve(port: NonNullable<typeof parentPort>, options: EngineThreadOptions): Promise<void> {
  const post = (message: FromThread) => port.postMessage(message);
  // Trace events go to the parent thread, whose recorder writes them to its files.
  tracer.forwardTo((entries) => post({ type: 'traceEvents', entries }));
  tracer.setEnabled(options.trace === true);
  let engine: BatchingEngine;
  try {
    const { weights, policyVersion } = await resolveWeights(options);
    engine = await BatchingEngine.create({ weights, policyVersion, maxBatch: options.maxBatch });
  } catch (err) {
    // Nothing listens after this, so the thread ends once the message is out.
    post({ type: 'startFailed', message: (err as Error).message });
    return;
  }
  port.on('message', (message: ToThread) => {
    const fail = (err: unknown) => post({ type: 'error', id: message.id, message: (err as Error).message });
    try {
      if (message.type === 'generate') {
        engine.generate(message.request).then((result) => post({ type: 'result', id: message.id, result }), fail);
      } else if (message.type === 'stats') {
        post({ type: 'stats', id: message.id, stats: engine.stats() });
      } else if (message.type === 'trace') {
        if (message.enabled !== undefined) tracer.setEnabled(message.enabled);
        tracer.flushForward();
        post({ type: 'done', id: message.id });
      } else {
        engine.setWeights(message.weights, message.version);
        post({ type: 'done', id: message.id });
      }
    } catch (err) {
      fail(err);
    }
  });
  post({ type: 'ready' });
}

/** workerData of an engine thread. The key keeps this module inert in any other worker that imports it. */
export interface EngineThreadData {
  trajflowEngine: EngineThreadOptions;
}

const data = workerData as Partial<EngineThreadData> | undefined;
if (parentPort && data?.trajflowEngine) void serve(parentPort, data.trajflowEngine);

/**
 * The inference backend named by the config: the embedded CPU engine (default), or vLLM / SGLang
 * servers. It lives in model/, the layer above inference/, because it picks between the embedded
 * provider (here, beside the engine) and the HTTP providers (src/inference/http), and both
 * implement the interface in src/inference/provider.
 */
import type { RunConfig } from '../../config/schema';
import { createHttpProvider } from '../inference/http/httpProvider';
import type { InferenceProvider } from '../inference/provider';
import type { Logger } from '../log';
import { serverLocksDir } from '../store/runLayout';
import { EmbeddedProvider } from './embeddedProvider';

export async function createProvider(config: Pick<RunConfig, 'inference' | 'model' | 'dataDir'>, logger?: Logger): Promise<InferenceProvider> {
  const { backend, servers, requestTimeoutS, maxBatch } = config.inference;
  if (backend !== 'embedded') return createHttpProvider({ backend, servers, requestTimeoutS, syncLockDir: serverLocksDir(config.dataDir), logger });
  const { seed, checkpoint, path: _path, ...architecture } = config.model;
  return EmbeddedProvider.create({ model: architecture, seed, checkpoint, maxBatch });
}

/** The inference backend named by the config: the embedded CPU engine (default), or vLLM / SGLang servers. */
import type { RunConfig } from '../../config/schema';
import { EmbeddedProvider } from '../model/embeddedProvider';
import { createHttpProvider } from './http/httpProvider';
import type { InferenceProvider } from './provider';
import type { Logger } from '../log';
import { serverLocksDir } from '../store/runLayout';

export async function createProvider(config: RunConfig, logger?: Logger): Promise<InferenceProvider> {
  const { backend, servers, requestTimeoutS, maxBatch } = config.inference;
  if (backend !== 'embedded') return createHttpProvider({ backend, servers, requestTimeoutS, syncLockDir: serverLocksDir(config.dataDir), logger });
  const { seed, checkpoint, path: _path, ...architecture } = config.model;
  return EmbeddedProvider.create({ model: architecture, seed, checkpoint, maxBatch });
}

/** The inference backend named by the config. The embedded CPU engine is the default. */
import type { RunConfig } from '../../config/schema';
import { EmbeddedProvider } from '../model/embeddedProvider';
import type { InferenceProvider } from './provider';

export async function createProvider(config: RunConfig): Promise<InferenceProvider> {
  const { seed, checkpoint, ...architecture } = config.model;
  return EmbeddedProvider.create({ model: architecture, seed, checkpoint, maxBatch: config.inference.maxBatch });
}

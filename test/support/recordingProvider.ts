/** An inference provider that notes every prompt it is given and what it sampled: what the model actually saw. */
import type { InferenceProvider } from '../../src/inference/provider';

export interface ModelCall {
  promptIds: number[];
  completionIds: number[];
}

export function recordingProvider(provider: InferenceProvider, calls: ModelCall[]): InferenceProvider {
  return new Proxy(provider, {
    get(target, property) {
      if (property === 'generate') {
        return async (request: Parameters<InferenceProvider['generate']>[0]) => {
          const result = await target.generate(request);
          calls.push({ promptIds: [...request.promptIds], completionIds: [...result.completionIds] });
          return result;
        };
      }
      const value = Reflect.get(target, property) as unknown;
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

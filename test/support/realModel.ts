/** The real-model test setup: SmolLM2-135M-Instruct on one-digit sums with a calculator, served through vLLM's or SGLang's API. */
import { SMOLLM2_DIR } from '../../src/paths';
import { testConfig } from './harness';

export const STEPS = 3;
export const MAX_STALENESS = 1;

/** A short real-model training config for the suite's dev server, its model server on `port`. */
export function realModelConfig(
  name: string,
  port: number,
  trainer: Record<string, unknown> = {},
  backend: 'sglang' | 'vllm' = 'sglang',
  evaluation: Record<string, unknown> = {},
) {
  return testConfig(name, {
    model: { path: SMOLLM2_DIR, maxContext: 1024 },
    inference: { backend, servers: [`http://127.0.0.1:${port}`], requestTimeoutS: 120, maxBatch: 8 },
    env: { name: 'arithmetic', digits: 1, terms: 2, operators: ['+'], tools: ['calculator'], sessions: 'local' },
    agent: { name: 'tool', format: 'hermes', maxTurns: 2 },
    sampling: { maxTokens: 24, temperature: 1 },
    rollout: { groupSize: 4, maxConcurrency: 8 },
    trainer: { steps: STEPS, batchGroups: 1, maxStaleness: MAX_STALENESS, learningRate: 1e-5, formatWarmupSteps: 0, ...trainer },
    eval: { everySteps: 0, ...evaluation },
  });
}

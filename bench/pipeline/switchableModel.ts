/**
 * The inference worker's provider for the whole bench: the Temporal workers start once (bundling
 * the workflows takes seconds), and each run points this at a fresh model stand-in of its own, so
 * every run's engine counters start at zero.
 */
import type { EngineStats, GenerateRequest, GenerateResult, InferenceProvider } from '../../src/inference/provider';
import type { StandInModel } from './standInModel';

export class SwitchableModel implements InferenceProvider {
  private current: StandInModel | undefined;

  use(model: StandInModel): void {
    this.current = model;
  }

  private model(): StandInModel {
    if (!this.current) throw new Error('no model stand-in is in use: a bench run sets one before it starts');
    return this.current;
  }

  generate(request: GenerateRequest): Promise<GenerateResult> {
    return this.model().generate(request);
  }

  loadWeights(checkpoint: string, version: number): Promise<number> {
    return this.model().loadWeights(checkpoint, version);
  }

  async stats(): Promise<EngineStats> {
    return this.current
      ? this.current.stats()
      : { policyVersion: 0, uptimeMs: 0, busyMs: 0, decodeSteps: 0, generatedTokens: 0, batchSizeSum: 0, maxBatchSize: 0, running: 0, waiting: 0 };
  }

  async close(): Promise<void> {
    await this.current?.close();
  }
}

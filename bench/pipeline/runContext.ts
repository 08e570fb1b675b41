/** What every kind of bench run gets: the shared stack, its own config, run id and model stand-in. */
import type { RunConfig } from '../../config/schema';
import type { Logger } from '../../src/log';
import type { StandInModel } from './standInModel';
import type { TemporalStack } from './temporalStack';

export interface RunContext {
  stack: TemporalStack;
  config: RunConfig;
  runId: string;
  model: StandInModel;
  logger: Logger;
}

/** A run: returns when it started (performance.now() ms); the trainer recorded its steps. */
export type PipelineRunner = (context: RunContext) => Promise<number>;

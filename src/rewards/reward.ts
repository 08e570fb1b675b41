/** What a reward is: a scoring function of an answer with its own validated options. */
import type { z } from 'zod';

export interface RewardInput {
  task: unknown;
  /** The model's final answer. */
  answer: string;
  /** The expected answer, for rewards that compare against one. */
  reference?: string;
  /** Anything else a custom reward needs (tool results, trajectory metadata). */
  [key: string]: unknown;
}

export interface RewardDefinition<S extends z.ZodType = z.ZodType> {
  /** Validates (and fills defaults of) the spec's `options` before the reward is ever called. */
  options: S;
  // Method syntax keeps definitions with different option types assignable to RewardDefinition.
  score(input: RewardInput, options: z.output<S>): number | Promise<number>;
}

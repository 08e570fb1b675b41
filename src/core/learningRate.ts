/**
 * The learning rate of each train step: `trainer.learningRate` shaped by
 * `trainer.learningRateSchedule` over the run's `trainer.steps`. The training workflow puts each
 * step's rate into that step's trainer config, so the embedded and the Python trainer both read
 * `learningRate` alone, and the activity's input in the Web UI shows the rate the step used.
 */
import type { TrainerConfig } from '../../config/schema';

/**
 * lr(k) for step k = 0 .. steps-1, with base = learningRate, W = warmupSteps, r = minRatio:
 *
 *   k < W:       base (k + 1) / W                                 (linear warm-up)
 *   otherwise,   with progress x = (k - W) / (steps - W) in [0, 1):
 *     constant:  base
 *     linear:    base (1 - (1 - r) x)
 *     cosine:    base (r + (1 - r) (1 + cos(pi x)) / 2)
 *
 * so a decay starts at base on the first step after the warm-up and would reach r base on the
 * step after the last: every step's rate is above 0, even with r = 0.
 */
export function learningRateAt({ learningRate: base, learningRateSchedule: schedule, steps }: TrainerConfig, step: number): number {
  const { warmupSteps, decay, minRatio } = schedule;
  if (step < warmupSteps) return (base * (step + 1)) / warmupSteps;
  const progress = Math.min(1, (step - warmupSteps) / Math.max(1, steps - warmupSteps));
  switch (decay) {
    case 'constant':
      return base;
    case 'linear':
      return base * (1 - (1 - minRatio) * progress);
    case 'cosine':
      return base * (minRatio + ((1 - minRatio) * (1 + Math.cos(Math.PI * progress))) / 2);
  }
}

/**
 * `config` for step `step`: its learningRate is the one the schedule gives that step. A run whose
 * input was recorded before the schedule existed has none, and keeps its learningRate.
 */
export function stepTrainerConfig(config: TrainerConfig, step: number): TrainerConfig {
  const schedule: TrainerConfig['learningRateSchedule'] | undefined = config.learningRateSchedule;
  return schedule === undefined ? config : { ...config, learningRate: learningRateAt(config, step) };
}

import { TrainerConfigSchema } from '../config/schema';
import { learningRateAt, stepTrainerConfig } from '../src/core/learningRate';

const trainer = (schedule: object, steps = 10) => TrainerConfigSchema.parse({ learningRate: 0.01, steps, learningRateSchedule: schedule });
const rates = (config: ReturnType<typeof trainer>) => Array.from({ length: config.steps }, (_, step) => learningRateAt(config, step));

describe('learning rate schedule', () => {
  it('is constant by default', () => {
    expect(rates(TrainerConfigSchema.parse({ learningRate: 0.01, steps: 5 }))).toEqual([0.01, 0.01, 0.01, 0.01, 0.01]);
  });

  it('warms up linearly from learningRate / warmupSteps, then holds', () => {
    expect(rates(trainer({ warmupSteps: 4 }, 6))).toEqual([0.0025, 0.005, 0.0075, 0.01, 0.01, 0.01]);
  });

  it('decays linearly from learningRate after the warm-up towards minRatio x learningRate', () => {
    // steps 10, warm-up 2: progress (k - 2) / 8 at k = 2 .. 9
    const lr = rates(trainer({ warmupSteps: 2, decay: 'linear', minRatio: 0.2 }));
    expect(lr.slice(0, 3)).toEqual([0.005, 0.01, 0.01]);
    lr.slice(2).forEach((rate, i) => expect(rate).toBeCloseTo(0.01 * (1 - 0.8 * (i / 8)), 12));
  });

  it('follows a half cosine, every rate above 0 even with minRatio 0', () => {
    const lr = rates(trainer({ decay: 'cosine' }, 4));
    [1, (1 + Math.SQRT1_2) / 2, 0.5, (1 - Math.SQRT1_2) / 2].forEach((factor, k) => expect(lr[k]).toBeCloseTo(0.01 * factor, 12));
    expect(Math.min(...lr)).toBeGreaterThan(0);
    expect(lr).toEqual([...lr].sort((a, b) => b - a));
  });

  it("puts the step's rate into the step's trainer config, and leaves a config without a schedule as it is", () => {
    const config = trainer({ decay: 'linear' }, 4);
    expect(stepTrainerConfig(config, 2)).toEqual({ ...config, learningRate: 0.005 });
    const { learningRateSchedule, ...recordedBeforeSchedules } = config;
    void learningRateSchedule;
    const old = recordedBeforeSchedules as typeof config;
    expect(stepTrainerConfig(old, 3)).toBe(old);
  });
});

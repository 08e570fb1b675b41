/**
 * Adapter for any Gymnasium-style environment: `reset({ seed })` returning `[observation, info]`
 * and `step(action)` returning `[observation, reward, terminated, truncated, info]`, sync or async
 * (a JavaScript port, or a bridge to a Python process). Truncation is reported as `info.truncated`,
 * which trajflow records as "max steps" rather than a finished task.
 */
import { BaseEnvironment, type StepResult } from './environment';

type MaybePromise<T> = T | Promise<T>;

export interface GymnasiumLike<Obs, Act> {
  reset(options?: { seed?: number }): MaybePromise<[Obs, Record<string, unknown>]>;
  step(action: Act): MaybePromise<[Obs, number, boolean, boolean, Record<string, unknown>]>;
  close?(): MaybePromise<void>;
}

export class GymnasiumAdapter<Obs, Act> extends BaseEnvironment<Obs, Act> {
  /** `seed` is passed to every `reset`, so a rebuilt session replays the same episode. */
  constructor(
    private readonly env: GymnasiumLike<Obs, Act>,
    private readonly seed?: number,
  ) {
    super();
  }

  async reset(): Promise<Obs> {
    const [observation] = await this.env.reset(this.seed === undefined ? undefined : { seed: this.seed });
    return observation;
  }

  async step(action: Act): Promise<StepResult<Obs>> {
    const [observation, reward, terminated, truncated, info] = await this.env.step(action);
    return {
      observation,
      reward,
      done: terminated || truncated,
      info: { ...info, truncated, outcome: terminated ? 'terminated' : truncated ? 'truncated' : 'running' },
    };
  }

  override async close(): Promise<void> {
    await this.env.close?.();
  }
}

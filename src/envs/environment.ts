/**
 * The shape every trajflow environment implements (Gym-style), so rollouts and the environment
 * registry can drive any of them the same way.
 */

export interface StepResult<Obs> {
  observation: Obs;
  reward: number;
  /** The episode is over (terminal state or truncation); call `reset()` before stepping again. */
  done: boolean;
  /** Environment-specific details; JSON-serializable, since it is recorded in trajectories. */
  info: Record<string, unknown>;
}

export interface Environment<Obs, Act> {
  /** Starts a new episode and returns its first observation. */
  reset(): Obs;
  step(action: Act): StepResult<Obs>;
  /** Releases whatever the environment holds (processes, connections); it is not used afterwards. */
  close(): void;
}

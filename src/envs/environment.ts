/**
 * The shape every trajflow environment implements (Gym-style), so rollouts, evaluation and the
 * environment registry drive any of them the same way. Methods may be sync or async: an
 * environment that runs tools, commands or remote calls simply returns promises.
 *
 * Environments run in the env worker (activities), never in a workflow, so they may do any I/O.
 * Durable recovery rebuilds a lost session by creating the environment again with the same seed
 * and replaying the model's recorded answers, so `reset()` then the same steps must reach the same
 * state (seed every random choice from the seed the factory is given).
 */

export interface StepResult<Obs> {
  observation: Obs;
  reward: number;
  /** The episode is over (terminal state or truncation); the environment is not stepped again. */
  done: boolean;
  /**
   * Environment-specific details; JSON-serializable, since they are recorded in history.
   * `truncated: true` marks an episode cut off by a step limit rather than ended by the task;
   * `outcome` (a word) says how it ended.
   */
  info: Record<string, unknown>;
  /**
   * A cost (>= 0; absent or 0: none) charged to this action alone, kept apart from `reward`: a
   * move the task forbids, like stepping into a hole. It is no part of the episode's return, so it
   * never changes whether the task was solved nor the episode-level advantage; per-turn credit
   * (`trainer.turnCredit`) charges it to the turn that took the action, and to no other.
   */
  penalty?: number;
  /**
   * For a discrete action space (actions 0..n-1): what each action would have been charged
   * (`penalty`, its expectation where the outcome is random) from the state this step was taken
   * in, the action taken included. Only an environment that can price an action without taking it
   * reports it; `trainer.turnCredit.allMoves` trains every answer of the turn on it.
   */
  actionPenalties?: number[];
}

export interface Environment<Obs = unknown, Act = unknown> {
  /** Starts the episode and returns its first observation. */
  reset(): Obs | Promise<Obs>;
  step(action: Act): StepResult<Obs> | Promise<StepResult<Obs>>;
  /** Releases whatever the environment holds (processes, directories); it is not used afterwards. */
  close(): void | Promise<void>;
}

/**
 * A base class for environments: implement `reset` and `step`; override `close` when the
 * environment holds something (it always runs, also when the episode fails or is cancelled).
 */
export abstract class BaseEnvironment<Obs, Act> implements Environment<Obs, Act> {
  abstract reset(): Obs | Promise<Obs>;
  abstract step(action: Act): StepResult<Obs> | Promise<StepResult<Obs>>;
  close(): void | Promise<void> {}
}

/**
 * Environments around a task the model answers in text: `TaskEnvironment` (one turn: the answer is
 * scored) and, in toolEnvironment.ts, `ToolEnvironment` (tool calls first, then the answer).
 *
 * The answer is scored by a reward: a registered one named in the config (`{ name, options }` or a
 * weighted sum), or a function. A reward that fails raises `RewardError`, which the trajectory
 * records as its failure: a broken reward is never read as "wrong answer, 0".
 */
import { scoreReward, type RewardSpec } from '../rewards/registry';
import { BaseEnvironment, type StepResult } from './environment';

export interface Task {
  /** What the model is asked. */
  prompt: string;
  /** The expected answer, for rewards that compare against one. */
  reference?: string;
  [key: string]: unknown;
}

export interface ToolResultRecord {
  /** The tool that was called. */
  name: string;
  /** False when the call was not run or failed (unknown tool, bad arguments, error, timeout). */
  ok: boolean;
  /** The tool's output, or the error the model should read. */
  content: string;
}

export type TaskObservation = { kind: 'task'; prompt: string } | { kind: 'tool_results'; results: ToolResultRecord[] } | { kind: 'done'; reward: number };

/** How an answer is scored: a registered reward spec, or a function of the task and the answer. */
export type AnswerScorer<T extends Task> = RewardSpec | ((task: T, answer: string) => number | Promise<number>);

/** A reward could not score an answer; the trajectory fails with this message. */
export class RewardError extends Error {
  override name = 'RewardError';
}

/** Scores `answer`; throws RewardError when the reward throws or returns a non-number. */
export async function scoreAnswer<T extends Task>(scorer: AnswerScorer<T>, task: T, answer: string, extra: Record<string, unknown> = {}): Promise<number> {
  if (typeof scorer === 'function') {
    let value: unknown;
    try {
      value = await scorer(task, answer);
    } catch (err) {
      throw new RewardError(`reward function threw: ${err instanceof Error ? err.message : String(err)}`);
    }
    if (typeof value !== 'number' || !Number.isFinite(value)) throw new RewardError(`reward function returned ${String(value)}, not a finite number`);
    return value;
  }
  const score = await scoreReward(scorer, { ...extra, task, answer, reference: task.reference });
  if (!score.ok) throw new RewardError(score.error);
  return score.value;
}

/** The answer's reward as the step that ends the episode. */
export function finalStep(reward: number): StepResult<TaskObservation> {
  return { observation: { kind: 'done', reward }, reward, done: true, info: { outcome: reward > 0 ? 'correct' : 'incorrect' } };
}

/** One turn: the model reads the task, its whole answer is scored, the episode ends. */
export class TaskEnvironment<T extends Task = Task> extends BaseEnvironment<TaskObservation, string> {
  constructor(
    readonly task: T,
    private readonly scorer: AnswerScorer<T>,
  ) {
    super();
  }

  reset(): TaskObservation {
    return { kind: 'task', prompt: this.task.prompt };
  }

  async step(answer: string): Promise<StepResult<TaskObservation>> {
    return finalStep(await scoreAnswer(this.scorer, this.task, answer));
  }
}

/**
 * What a rollout stores (claim check): per-turn token records and per-trajectory / per-group
 * summaries. Token arrays live only here, in the store; workflows pass ids and small summaries.
 */
import type { ChatMessage } from './tokenizer';

/** Why generation stopped: a stop token, the token budget, or a full context window. */
export type FinishReason = 'stop' | 'length' | 'context';

/** One model call of a trajectory, exactly as sampled. */
export interface TurnRecord {
  trajectoryId: string;
  turn: number;
  /** Messages trajflow rendered before this completion (system/user/environment text). */
  messages: ChatMessage[];
  /**
   * Whether this turn's context starts afresh with `promptDeltaIds` (turn 0 always; every turn of
   * an agent that keeps no history) instead of continuing the earlier turns. Absent = turn 0 only.
   */
  startsContext?: boolean;
  /**
   * Why this turn starts a context of its own when its agent kept a conversation: the history an
   * agent framework sent did not continue the stored turns (src/agentCalls/history.ts).
   */
  segmentReason?: string;
  /** Template + environment tokens appended to the context before sampling: loss mask 0. */
  promptDeltaIds: number[];
  /** Tokens the model sampled: loss mask 1. */
  completionIds: number[];
  /** Behaviour logprob of each completion token. */
  logprobs: number[];
  /** Weights version of each completion token (a trajectory may span versions). */
  policyVersions: number[];
  finishReason: FinishReason;
  /** The completion decoded for the agent to parse; never tokenized again. */
  text: string;
  /** Length of the whole context the model saw (all earlier turns + this delta). */
  contextTokens: number;
}

/**
 * How a trajectory ended: the episode ran its course (`ended`: the environment said done, whether
 * or not the task was solved), or a limit cut it off (turns, environment steps, context), or it
 * could not finish (`failed`: environment, reward or agent code threw, or an activity failed for
 * good, such as one whose result was too large for workflow history; `env_timeout`: one
 * environment turn took too long; `timeout`: the whole episode did). The last three are never
 * trained on. Whether the task was solved is a separate fact (`solved` in src/core/groupStats).
 */
export type TrajectoryStatus = 'ended' | 'max_turns' | 'max_steps' | 'max_context' | 'failed' | 'env_timeout' | 'timeout';

export interface TrajectorySummary {
  runId: string;
  groupId: string;
  trajectoryId: string;
  env: string;
  status: TrajectoryStatus;
  /** Why the episode ended, in words. */
  reason: string;
  reward: number;
  /** The environment's own return; the task counts as solved when it is > 0. */
  envReturn: number;
  /**
   * What each turn's own answer cost, one entry per turn, 0 where none; absent when no turn paid:
   * the environment's penalty for the action (`StepResult.penalty`), or for an answer the agent
   * could not read, the format credit it forwent (`reward.formatWeight`). Only per-turn credit
   * (`trainer.turnCredit`) reads it.
   */
  turnPenalties?: number[];
  /**
   * What each well-formed answer would have been charged on each turn's state, by the answer's
   * text (`StepResult.actionPenalties`), one entry per turn, `{}` where the turn did not step the
   * environment; absent when the environment prices no actions. Only
   * `trainer.turnCredit.allMoves` reads it.
   */
  turnAnswerPenalties?: Record<string, number>[];
  turns: number;
  envSteps: number;
  invalidActions: number;
  completionTokens: number;
  minPolicyVersion: number;
  maxPolicyVersion: number;
  /** Times the environment session was rebuilt after its worker went away. */
  envRestores: number;
  /** Where the episode's wall time went. */
  time: TrajectoryTime;
}

/**
 * A trajectory's wall time split by stage: inside `generate` activities, inside environment
 * activities (session open, turns, close), and the rest (task dispatch, queues, admission, records).
 */
export interface TrajectoryTime {
  totalMs: number;
  generationMs: number;
  environmentMs: number;
  waitingMs: number;
}

/** A group: G trajectories of one prompt. Failed trajectories are listed apart, never scored 0. */
export interface GroupSummary {
  runId: string;
  groupId: string;
  /** Trajectories that completed, with their rewards and turn counts in the same order. */
  trajectoryIds: string[];
  rewards: number[];
  /** Whether each trajectory solved the task (its environment return was > 0). */
  solved: boolean[];
  turns: number[];
  failed: { trajectoryId: string; reason: string }[];
  rewardMean: number;
  rewardStd: number;
}

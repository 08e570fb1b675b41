/**
 * What a trajectory accounts as it goes: how it ended, its turns and what each cost, and the
 * summary it records at the end. Workflow time (`Date.now()` in a workflow is the time of the
 * workflow task) is deterministic, so the wall time split replays identically.
 */
import type { GenerateOutput } from '../../activities/inference';
import type { TurnOutcome } from '../../src/episode/episode';
import { endsEpisode } from '../../src/core/episode';
import type { TrajectoryStatus, TrajectorySummary, TrajectoryTime } from '../../src/core/records';
import type { TrajectoryInput } from '../types';

export class EpisodeTally {
  status: TrajectoryStatus = 'max_turns';
  reason: string;
  turns = 0;
  envSteps = 0;
  invalidActions = 0;
  completionTokens = 0;
  envReturn = 0;
  /** What each turn's own answer cost, by turn (sparse); in the summary only when some turn paid. */
  private readonly turnPenalties: number[] = [];
  /** What every answer would have cost, by turn (sparse); in the summary only when the environment priced some turn. */
  private readonly turnAnswerPenalties: Record<string, number>[] = [];
  private minPolicyVersion = Number.MAX_SAFE_INTEGER;
  maxPolicyVersion = -1;
  /** Time inside generate activities, as they report it. */
  private generationMs = 0;
  private readonly startedAt = Date.now();

  constructor(private readonly input: TrajectoryInput) {
    this.reason = `no terminal state within ${input.agent.maxTurns} turns`;
  }

  end(status: TrajectoryStatus, reason: string): void {
    this.status = status;
    this.reason = reason;
  }

  /** Counts a turn the model answered. */
  generated(reply: GenerateOutput): void {
    this.turns++;
    this.generationMs += reply.activityMs ?? 0;
    this.completionTokens += reply.completionTokens;
    this.minPolicyVersion = Math.min(this.minPolicyVersion, reply.minPolicyVersion);
    this.maxPolicyVersion = Math.max(this.maxPolicyVersion, reply.maxPolicyVersion);
  }

  /** Counts what the session made of the answer; says whether the episode has ended. */
  answered(outcome: TurnOutcome): 'going on' | 'ended' {
    if (outcome.kind === 'invalid') {
      this.invalidActions++;
      // The format credit this answer forwent (or `reward.unreadablePenalty`) is its own cost, as
      // a move into a hole is that move's: per-turn credit then tells an unreadable answer from a
      // readable one on the same state. Left to the episode's share alone, an unreadable answer's
      // turn would return what a safe move's does: nothing would hold unreadable answers back, and
      // they would spread.
      const { formatWeight, unreadablePenalty = formatWeight } = this.input.reward;
      if (unreadablePenalty > 0) this.turnPenalties[this.turns - 1] = unreadablePenalty;
      return 'going on';
    }
    this.envSteps++;
    this.envReturn += outcome.reward;
    if (outcome.penalty) this.turnPenalties[this.turns - 1] = outcome.penalty;
    if (outcome.answerPenalties) this.turnAnswerPenalties[this.turns - 1] = outcome.answerPenalties;
    if (!endsEpisode(outcome)) return 'going on';
    if (outcome.info.truncated) this.end('max_steps', 'environment step limit reached');
    else this.end('ended', `episode ended: ${typeof outcome.info.outcome === 'string' ? outcome.info.outcome : 'done'}`);
    return 'ended';
  }

  /** The agent scored its own episode (an agent program's reported reward): that is its return. */
  reported(reward: number): void {
    this.envReturn = reward;
    this.end('ended', `episode ended: the agent reported reward ${reward}`);
  }

  summary(reward: number, sessionRebuilds: number, environmentMs: number): TrajectorySummary {
    const { input, turns, turnPenalties, turnAnswerPenalties } = this;
    return {
      runId: input.runId,
      groupId: input.groupId,
      trajectoryId: input.trajectoryId,
      env: input.env.name,
      status: this.status,
      reason: this.reason,
      reward,
      envReturn: this.envReturn,
      ...(turnPenalties.length > 0 ? { turnPenalties: Array.from({ length: turns }, (_, turn) => turnPenalties[turn] ?? 0) } : {}),
      ...(turnAnswerPenalties.length > 0 ? { turnAnswerPenalties: Array.from({ length: turns }, (_, turn) => turnAnswerPenalties[turn] ?? {}) } : {}),
      turns,
      envSteps: this.envSteps,
      invalidActions: this.invalidActions,
      completionTokens: this.completionTokens,
      minPolicyVersion: turns > 0 ? this.minPolicyVersion : -1,
      maxPolicyVersion: this.maxPolicyVersion,
      envRestores: sessionRebuilds,
      time: timeSplit(Date.now() - this.startedAt, this.generationMs, environmentMs),
    };
  }
}

function timeSplit(totalMs: number, generationMs: number, environmentMs: number): TrajectoryTime {
  const round = (ms: number) => Math.round(ms);
  return {
    totalMs: round(totalMs),
    generationMs: round(generationMs),
    environmentMs: round(environmentMs),
    waitingMs: round(Math.max(0, totalMs - generationMs - environmentMs)),
  };
}

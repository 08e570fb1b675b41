/**
 * When an episode is over and what it earned: pure, so the trajectory workflow, the session
 * activities and the in-process benchmark apply the same rules.
 */

/** What this needs of a turn's outcome (src/episode/episode's TurnOutcome). */
interface OutcomeShape {
  kind: 'invalid' | 'stepped';
  done?: boolean;
  next?: unknown;
}

/** Whether the episode is over after this outcome: the environment said done, or shows nothing more. */
export function endsEpisode(outcome: OutcomeShape): boolean {
  return outcome.kind === 'stepped' && (outcome.done === true || outcome.next === undefined);
}

export interface EpisodeCounts {
  /** The environment's return: the sum of its step rewards. */
  envReturn: number;
  /** Model answers, parsed or not. */
  turns: number;
  /** Answers the agent could not read as an action. */
  invalidActions: number;
}

/**
 * The trajectory's reward: the environment's return plus `formatWeight` x the share of the
 * model's answers that parsed as an action (0 for an episode without answers).
 */
export function episodeReward({ envReturn, turns, invalidActions }: EpisodeCounts, formatWeight: number): number {
  const formatShare = turns > 0 ? (turns - invalidActions) / turns : 0;
  return envReturn + formatWeight * formatShare;
}

/**
 * Group-relative advantages: every trajectory of a group answers the same prompt, so the group's
 * own rewards are the baseline (no value network). One advantage per trajectory, shared by all of
 * its tokens; optionally a per-turn one on top. Pure.
 */

export type AdvantageEstimator = 'grpo' | 'rloo' | 'drgrpo';

export interface AdvantageOptions {
  /** Added to GRPO's standard deviation so a group of equal rewards divides by eps, not 0. */
  epsStd?: number;
}

/**
 * One advantage per reward of a group. A group of one, or of equal rewards, has nothing to
 * compare: zeros (exactly, where the mean of equal floats can differ from them in the last bit).
 */
export function computeAdvantages(rewards: readonly number[], estimator: AdvantageEstimator, { epsStd = 1e-6 }: AdvantageOptions = {}): number[] {
  const bad = rewards.findIndex((r) => !Number.isFinite(r));
  if (bad >= 0) throw new Error(`computeAdvantages: reward ${bad} is ${rewards[bad]}, expected a finite number`);
  const G = rewards.length;
  if (G < 2 || rewards.every((r) => r === rewards[0])) return rewards.map(() => 0);
  const mean = rewards.reduce((sum, r) => sum + r, 0) / G;
  switch (estimator) {
    case 'grpo': {
      // GRPO: A_i = (r_i - mean(r)) / (std(r) + eps), std the population one: sqrt(sum (r - mean)^2 / G)
      const std = Math.sqrt(rewards.reduce((sum, r) => sum + (r - mean) ** 2, 0) / G);
      return rewards.map((r) => (r - mean) / (std + epsStd));
    }
    case 'rloo':
      // RLOO: A_i = r_i - (sum_{j != i} r_j) / (G - 1), the mean of the other G - 1 rewards
      return rewards.map((r) => r - (mean * G - r) / (G - 1));
    case 'drgrpo':
      // Dr. GRPO: A_i = r_i - mean(r), without GRPO's division by the std (its difficulty bias)
      return rewards.map((r) => r - mean);
    default:
      throw new Error(`unknown advantage estimator ${JSON.stringify(estimator)} (expected grpo, rloo or drgrpo)`);
  }
}

/** One trajectory of a group as per-turn credit sees it. */
export interface EpisodeTurns {
  /** What the model was shown at each turn (the anchor state's key), in turn order. */
  states: readonly string[];
  /** The episode's reward. */
  reward: number;
  /**
   * The part of `reward` the environment paid for the episode's outcome (its return), counted as
   * arriving after the last turn and discounted. The rest (format credit, say) is earned by every
   * answer alike, so every turn keeps it whole: discounting it too would make a failure that ends
   * early look better than one that ends late. Default: all of `reward`.
   */
  outcomeReward?: number;
  /**
   * What each turn's own answer cost, by turn (`TrajectorySummary.turnPenalties`: the environment's
   * penalty for the action, or the format credit of an answer that did not parse); absent: none.
   * It is the turn's own cost, not something later turns earned or lost: it is neither discounted
   * nor passed back to the turns before.
   */
  turnPenalties?: readonly number[];
}

/**
 * Per-turn advantages by anchor state (GiGPO, Feng et al. 2025): a group's trajectories play the
 * same environment instance, so the same state recurs across (and within) them. Every visit of a
 * state gets a discounted return,
 *
 *   G_{i,t} = gamma^(T_i - 1 - t) * o_i + (r_i - o_i) - c_{i,t}
 *
 * (T_i turns; o_i the outcome part of the reward r_i, arriving after the last turn; the rest is
 * every turn's alike; c_{i,t} the penalty of turn t's own action),
 * and the visits of one state are compared with each other by the episode-level estimator
 * (`computeAdvantages` on their returns): which action, taken in that very state, led to more.
 * That is the credit an episode-level advantage spreads over every turn alike: a move into a hole
 * and the good moves before it share the failed episode's advantage, while here the hole move is
 * compared with the other moves made on the same cell. A state visited once has no comparison: 0.
 * Returns one advantage per turn, per episode.
 */
export function turnAdvantages(episodes: readonly EpisodeTurns[], estimator: AdvantageEstimator, discount: number): number[][] {
  if (!(discount > 0 && discount <= 1)) throw new Error(`turnAdvantages: discount must be in (0, 1], got ${discount}`);
  const visits = new Map<string, { episode: number; turn: number; return: number }[]>();
  episodes.forEach(({ states, reward, outcomeReward = reward, turnPenalties = [] }, episode) => {
    states.forEach((state, turn) => {
      const visit = { episode, turn, return: discount ** (states.length - 1 - turn) * outcomeReward + (reward - outcomeReward) - (turnPenalties[turn] ?? 0) };
      const earlier = visits.get(state);
      if (earlier) earlier.push(visit);
      else visits.set(state, [visit]);
    });
  });
  const advantages = episodes.map(({ states }) => states.map(() => 0));
  for (const group of visits.values()) {
    computeAdvantages(
      group.map((v) => v.return),
      estimator,
    ).forEach((advantage, k) => {
      advantages[group[k].episode][group[k].turn] = advantage;
    });
  }
  return advantages;
}

/**
 * Per-turn advantages from each turn's own cost, with the mean cost of all the turns given as the
 * baseline:
 *
 *   A_t = -(c_t - mean(c))
 *
 * Where the environment charges a move its regret against the best move (FrozenLake with
 * `progressDistance: path`: nothing on a shortest path over the ice, 0.1 per move of it given
 * up), -c_t is for a move that stays on the ice the best policy's advantage Q*(s, a) - V*(s):
 * known without a critic or a second visit of the state. Centring on the batch's mean makes the
 * turns' pushes sum to zero, so tokens every answer shares (its format) are not pushed down as a whole.
 */
export function costAdvantages(costs: readonly number[]): number[] {
  const bad = costs.findIndex((c) => !Number.isFinite(c));
  if (bad >= 0) throw new Error(`costAdvantages: cost ${bad} is ${costs[bad]}, expected a finite number`);
  // Equal costs compare nothing: exact zeros, where their float mean can differ in the last bit.
  if (costs.every((c) => c === costs[0])) return costs.map(() => 0);
  const mean = costs.reduce((sum, c) => sum + c, 0) / costs.length;
  return costs.map((c) => mean - c);
}

/**
 * The share of each priced answer in the all-moves term's target (`trainer.turnCredit.allMoves`):
 *
 *   q(a) = exp(-c_a / temperature) / sum_b exp(-c_b / temperature)
 *
 * (c_a: the penalty answer a would have been charged), computed shifted by the cheapest price so
 * the largest exponent is 0 whatever the temperature.
 */
export function priceShares(prices: readonly number[], temperature: number): number[] {
  const bad = prices.findIndex((c) => !Number.isFinite(c));
  if (bad >= 0) throw new Error(`priceShares: price ${bad} is ${prices[bad]}, expected a finite number`);
  if (!(temperature > 0)) throw new Error(`priceShares: temperature must be > 0, got ${temperature}`);
  const cheapest = Math.min(...prices);
  const weights = prices.map((c) => Math.exp(-(c - cheapest) / temperature));
  const total = weights.reduce((sum, w) => sum + w, 0);
  return weights.map((w) => w / total);
}

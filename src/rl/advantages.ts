/**
 * Group-relative advantages: every trajectory of a group answers the same prompt, so the group's
 * own rewards are the baseline (no value network). One advantage per trajectory, shared by all of
 * its tokens. Pure.
 */

export type AdvantageEstimator = 'grpo' | 'rloo' | 'drgrpo';

export interface AdvantageOptions {
  /** Added to GRPO's standard deviation so a group of equal rewards divides by eps, not 0. */
  epsStd?: number;
}

/** One advantage per reward of a group; a group of one has nothing to compare with: zeros. */
export function computeAdvantages(
  rewards: readonly number[],
  estimator: AdvantageEstimator,
  { epsStd = 1e-6 }: AdvantageOptions = {},
): number[] {
  const bad = rewards.findIndex((r) => !Number.isFinite(r));
  if (bad >= 0) throw new Error(`computeAdvantages: reward ${bad} is ${rewards[bad]}, expected a finite number`);
  const G = rewards.length;
  if (G < 2) return rewards.map(() => 0);
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

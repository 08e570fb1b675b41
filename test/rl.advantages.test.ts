import { computeAdvantages, costAdvantages, priceShares, turnAdvantages, type AdvantageEstimator, type EpisodeTurns } from '../src/rl/advantages';
import ADVANTAGES_FIXTURE from './fixtures/twins/advantages.json';

const expectClose = (actual: number[], expected: number[]) => {
  expect(actual).toHaveLength(expected.length);
  actual.forEach((value, i) => expect(value).toBeCloseTo(expected[i], 6));
};

/** The twins' hand-worked cases (shared with python/tests/test_trainer_advantages.py). */
const TWINS = ADVANTAGES_FIXTURE as {
  episode: { why: string; estimator: AdvantageEstimator; rewards: number[]; epsStd?: number; exact?: boolean; expected: number[] }[];
  turn: { why: string; estimator: AdvantageEstimator; discount: number; episodes: EpisodeTurns[]; exact?: boolean; expected: number[][] }[];
};

describe('computeAdvantages', () => {
  it.each(TWINS.episode)('$estimator $rewards: $why', ({ estimator, rewards, epsStd, exact, expected }) => {
    const advantages = computeAdvantages(rewards, estimator, epsStd === undefined ? {} : { epsStd });
    if (exact) expect(advantages).toEqual(expected);
    else expectClose(advantages, expected);
  });

  it('rejects non-finite rewards and unknown estimators', () => {
    expect(() => computeAdvantages([1, Number.NaN], 'grpo')).toThrow(/reward 1 is NaN/);
    expect(() => computeAdvantages([1, 0], 'ppo' as never)).toThrow(/unknown advantage estimator "ppo"/);
  });
});

describe('turnAdvantages (anchor states)', () => {
  it.each(TWINS.turn)('$estimator, discount $discount: $why', ({ estimator, discount, episodes, exact, expected }) => {
    const advantages = turnAdvantages(episodes, estimator, discount);
    if (exact) expect(advantages).toEqual(expected);
    expect(advantages.map((row) => row.length)).toEqual(expected.map((row) => row.length));
    advantages.forEach((row, i) => expectClose(row, expected[i]));
  });

  it('rejects a discount outside (0, 1]', () => {
    expect(() => turnAdvantages([], 'grpo', 0)).toThrow(/discount must be in \(0, 1\]/);
    expect(() => turnAdvantages([], 'grpo', 1.5)).toThrow(/discount/);
  });
});

describe('costAdvantages (each turn against the mean cost)', () => {
  it('pushes a costly turn down and a free one up, summing to zero', () => {
    // Costs 0, 0, 0.2 (onto a dead end), 1 (into a hole): mean 0.3.
    const advantages = costAdvantages([0, 0, 0.2, 1]);
    expectClose(advantages, [0.3, 0.3, 0.1, -0.7]);
    expect(advantages.reduce((sum, a) => sum + a, 0)).toBeCloseTo(0, 12);
  });

  it('gives exact zeros where every turn cost the same, and nothing for no turns', () => {
    expect(costAdvantages([0.1, 0.1, 0.1])).toEqual([0, 0, 0]);
    expect(costAdvantages([])).toEqual([]);
  });

  it('names a cost that is not a finite number', () => {
    expect(() => costAdvantages([0, Number.NaN])).toThrow(/cost 1 is NaN/);
  });
});

describe("priceShares (the all-moves term's target)", () => {
  it('gives each answer exp(-price / temperature), normalised; equal prices equal shares', () => {
    const shares = priceShares([0.1, 0, 0, 0.1], 0.05);
    const edge = Math.exp(-2);
    expect(shares[0]).toBeCloseTo(edge / (2 + 2 * edge), 12);
    expect(shares[1]).toBeCloseTo(1 / (2 + 2 * edge), 12);
    expect(shares[1]).toBe(shares[2]);
    expect(shares.reduce((a, b) => a + b, 0)).toBeCloseTo(1, 12);
  });

  it('stays finite at a temperature far below the prices, and refuses bad input', () => {
    expect(priceShares([1.2, 0, 5], 1e-4)).toEqual([0, 1, 0]);
    expect(() => priceShares([0, NaN], 0.05)).toThrow(/price 1 is NaN/);
    expect(() => priceShares([0, 1], 0)).toThrow(/temperature must be > 0/);
  });
});

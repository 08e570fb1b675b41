import { computeAdvantages, costAdvantages, priceShares, turnAdvantages } from '../src/rl/advantages';

const expectClose = (actual: number[], expected: number[]) => {
  expect(actual).toHaveLength(expected.length);
  actual.forEach((value, i) => expect(value).toBeCloseTo(expected[i], 6));
};

describe('computeAdvantages', () => {
  // rewards 1, 0, 0, 0: mean 0.25, population std sqrt((0.75^2 + 3 * 0.25^2) / 4) = sqrt(0.1875) = 0.4330127
  const rewards = [1, 0, 0, 0];

  it('grpo: (r - mean) / (std + eps)', () => {
    const scale = 0.4330127 + 1e-6;
    expectClose(computeAdvantages(rewards, 'grpo'), [0.75 / scale, -0.25 / scale, -0.25 / scale, -0.25 / scale]);
    // eps matters only when the std is tiny: rewards 1 and 0 have std 0.5
    expectClose(computeAdvantages([1, 0], 'grpo', { epsStd: 0.5 }), [0.5, -0.5]);
  });

  it('rloo: r minus the mean of the other rewards', () => {
    // 1 - (0 + 0 + 0) / 3 = 1;  0 - (1 + 0 + 0) / 3 = -1/3
    expectClose(computeAdvantages(rewards, 'rloo'), [1, -1 / 3, -1 / 3, -1 / 3]);
    // 0.5 - (1 + 0) / 2 = 0;  1 - (0.5 + 0) / 2 = 0.75;  0 - (0.5 + 1) / 2 = -0.75
    expectClose(computeAdvantages([0.5, 1, 0], 'rloo'), [0, 0.75, -0.75]);
  });

  it('drgrpo: r - mean, no std normalisation', () => {
    expectClose(computeAdvantages(rewards, 'drgrpo'), [0.75, -0.25, -0.25, -0.25]);
    expectClose(computeAdvantages([2, 4], 'drgrpo'), [-1, 1]);
  });

  it('gives zeros to a group of equal rewards and to a group of one', () => {
    for (const estimator of ['grpo', 'rloo', 'drgrpo'] as const) {
      expect(computeAdvantages([1, 1, 1], estimator)).toEqual([0, 0, 0]);
      // Sixteen 1.2s sum to 19.199999999999996: their float mean is not 1.2, their advantage is 0 all the same.
      expect(computeAdvantages(Array(16).fill(1.2), estimator)).toEqual(Array(16).fill(0));
      expect(computeAdvantages([0.7], estimator)).toEqual([0]);
      expect(computeAdvantages([], estimator)).toEqual([]);
    }
  });

  it('rejects non-finite rewards and unknown estimators', () => {
    expect(() => computeAdvantages([1, Number.NaN], 'grpo')).toThrow(/reward 1 is NaN/);
    expect(() => computeAdvantages([1, 0], 'ppo' as never)).toThrow(/unknown advantage estimator "ppo"/);
  });
});

describe('turnAdvantages (anchor states)', () => {
  it('compares the discounted returns of the visits of each state, by hand', () => {
    // Returns with gamma 0.5: e0 A 0.5, B 1 | e1 A 0, C 0 | e2 A 0.25, A 0.5, D 1
    const episodes = [
      { states: ['A', 'B'], reward: 1 },
      { states: ['A', 'C'], reward: 0 },
      { states: ['A', 'A', 'D'], reward: 1 },
    ];
    // A's visits: 0.5, 0, 0.25, 0.5 (mean 0.3125); B, C, D are visited once: no comparison.
    const advantages = turnAdvantages(episodes, 'drgrpo', 0.5);
    expect(advantages.map((row) => row.length)).toEqual([2, 2, 3]);
    const expected = [
      [0.1875, 0],
      [-0.3125, 0],
      [-0.0625, 0.1875, 0],
    ];
    advantages.forEach((row, i) => row.forEach((a, t) => expect(a).toBeCloseTo(expected[i][t], 12)));
  });

  it('normalizes each state group like the episode estimator; equal returns give 0', () => {
    const episodes = [
      { states: ['A', 'B'], reward: 1 },
      { states: ['A', 'B'], reward: 0 },
      { states: ['A', 'B'], reward: 1 },
    ];
    const advantages = turnAdvantages(episodes, 'grpo', 1);
    // A and B both see returns 1, 0, 1: GRPO gives (r - 2/3) / sqrt(2/9).
    const high = (1 - 2 / 3) / Math.sqrt(2 / 9);
    const low = (0 - 2 / 3) / Math.sqrt(2 / 9);
    expect(advantages[0][0]).toBeCloseTo(high, 5);
    expect(advantages[1][1]).toBeCloseTo(low, 5);
    expect(
      turnAdvantages(
        [
          { states: ['A'], reward: 1 },
          { states: ['A'], reward: 1 },
        ],
        'grpo',
        0.9,
      ),
    ).toEqual([[0], [0]]);
  });

  it('discounts only the outcome part of the reward, so an early failure does not beat a late one', () => {
    // Both fail (outcome 0) with full format credit 0.2; e1 falls at its first turn, e0 at its second.
    const failures = [
      { states: ['A', 'B'], reward: 0.2, outcomeReward: 0 },
      { states: ['A'], reward: 0.2, outcomeReward: 0 },
    ];
    expect(turnAdvantages(failures, 'drgrpo', 0.5)).toEqual([[0, 0], [0]]);
    // Counted as outcome, the same credit would favour the early failure: A's returns 0.1 and 0.2.
    const [late, early] = turnAdvantages(
      failures.map(({ states, reward }) => ({ states, reward })),
      'drgrpo',
      0.5,
    );
    expect(late[0]).toBeCloseTo(-0.05, 12);
    expect(early[0]).toBeCloseTo(0.05, 12);
    // A success's outcome is discounted, its format credit is not: A's returns 0.2 + 0.5 * 1 and 0.2.
    const mixed = turnAdvantages([{ states: ['A', 'B'], reward: 1.2, outcomeReward: 1 }, failures[1]], 'drgrpo', 0.5);
    expect(mixed[0][0]).toBeCloseTo(0.25, 12);
    expect(mixed[1][0]).toBeCloseTo(-0.25, 12);
  });

  it("charges a turn's penalty to that turn alone, undiscounted", () => {
    // All three fail; e0 steps into a hole at its second turn (penalty 0.5) from state B.
    const episodes = [
      { states: ['A', 'B'], reward: 0, turnPenalties: [0, 0.5] },
      { states: ['A', 'B', 'C'], reward: 0 },
      { states: ['A', 'B'], reward: 0 },
    ];
    const [fell, wandered, other] = turnAdvantages(episodes, 'drgrpo', 0.5);
    // B's returns -0.5, 0, 0 (mean -1/6): the move into the hole pays it all, the others gain.
    expect(fell[1]).toBeCloseTo(-1 / 3, 12);
    expect(wandered[1]).toBeCloseTo(1 / 6, 12);
    expect(other[1]).toBeCloseTo(1 / 6, 12);
    // A, two turns before the hole, sees no penalty: its returns are all 0.
    expect([fell[0], wandered[0], other[0]]).toEqual([0, 0, 0]);
    // As an outcome (reward -0.5) it would be passed back to A, discounted: -0.25 against 0 and 0.
    const [asOutcome] = turnAdvantages([{ states: ['A', 'B'], reward: -0.5 }, episodes[1], episodes[2]], 'drgrpo', 0.5);
    expect(asOutcome[0]).toBeCloseTo(-0.25 + 0.25 / 3, 12);
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

"""Advantages by hand: the cases of test/rl.advantages.test.ts, so both languages agree."""

import math

import pytest

from trajflow_py.trainer.advantages import EpisodeTurns, compute_advantages, turn_advantages

REWARDS = [1, 0, 0, 0]  # mean 0.25, population std sqrt(0.1875) = 0.4330127


def close(actual, expected, abs=1e-6):
    assert actual == pytest.approx(expected, abs=abs)


def test_grpo_divides_by_the_population_std_plus_eps():
    scale = 0.4330127 + 1e-6
    close(compute_advantages(REWARDS, "grpo"), [0.75 / scale, -0.25 / scale, -0.25 / scale, -0.25 / scale])
    # eps matters only when the std is tiny: rewards 1 and 0 have std 0.5
    close(compute_advantages([1, 0], "grpo", eps_std=0.5), [0.5, -0.5])


def test_rloo_subtracts_the_mean_of_the_other_rewards():
    close(compute_advantages(REWARDS, "rloo"), [1, -1 / 3, -1 / 3, -1 / 3])
    close(compute_advantages([0.5, 1, 0], "rloo"), [0, 0.75, -0.75])


def test_drgrpo_subtracts_the_mean_only():
    close(compute_advantages(REWARDS, "drgrpo"), [0.75, -0.25, -0.25, -0.25])
    close(compute_advantages([2, 4], "drgrpo"), [-1, 1])


@pytest.mark.parametrize("estimator", ["grpo", "rloo", "drgrpo"])
def test_equal_rewards_and_groups_of_one_give_zeros(estimator):
    assert compute_advantages([1, 1, 1], estimator) == [0, 0, 0]
    # Sixteen 1.2s sum to 19.199999999999996: their float mean is not 1.2, their advantage is 0 all the same.
    assert compute_advantages([1.2] * 16, estimator) == [0] * 16
    assert compute_advantages([0.7], estimator) == [0]
    assert compute_advantages([], estimator) == []


def test_rejects_non_finite_rewards_and_unknown_estimators():
    with pytest.raises(ValueError, match="reward 1 is nan"):
        compute_advantages([1, math.nan], "grpo")
    with pytest.raises(ValueError, match="unknown advantage estimator 'ppo'"):
        compute_advantages([1, 0], "ppo")


def test_turn_advantages_compare_the_visits_of_each_state():
    # Returns with gamma 0.5: e0 A 0.5, B 1 | e1 A 0, C 0 | e2 A 0.25, A 0.5, D 1
    episodes = [EpisodeTurns(["A", "B"], 1), EpisodeTurns(["A", "C"], 0), EpisodeTurns(["A", "A", "D"], 1)]
    # A's visits: 0.5, 0, 0.25, 0.5 (mean 0.3125); B, C, D are visited once: no comparison.
    advantages = turn_advantages(episodes, "drgrpo", 0.5)
    expected = [[0.1875, 0], [-0.3125, 0], [-0.0625, 0.1875, 0]]
    assert [len(row) for row in advantages] == [2, 2, 3]
    for row, want in zip(advantages, expected, strict=True):
        close(row, want, abs=1e-12)


def test_turn_advantages_discount_only_the_outcome_and_charge_penalties_to_their_turn():
    # Both fail with format credit 0.2: the undiscounted credit makes neither failure look better.
    failures = [EpisodeTurns(["A", "B"], 0.2, outcome_reward=0), EpisodeTurns(["A"], 0.2, outcome_reward=0)]
    assert turn_advantages(failures, "drgrpo", 0.5) == [[0, 0], [0]]
    # A success's outcome is discounted, its format credit is not: A's returns 0.2 + 0.5 * 1 and 0.2.
    mixed = turn_advantages([EpisodeTurns(["A", "B"], 1.2, outcome_reward=1), failures[1]], "drgrpo", 0.5)
    close([mixed[0][0], mixed[1][0]], [0.25, -0.25], abs=1e-12)
    # e0 steps into a hole from B (penalty 0.5): B's returns -0.5, 0, 0 (mean -1/6).
    fell, wandered, other = turn_advantages(
        [EpisodeTurns(["A", "B"], 0, turn_penalties=[0, 0.5]), EpisodeTurns(["A", "B", "C"], 0), EpisodeTurns(["A", "B"], 0)],
        "drgrpo",
        0.5,
    )
    close([fell[1], wandered[1], other[1]], [-1 / 3, 1 / 6, 1 / 6], abs=1e-12)
    assert [fell[0], wandered[0], other[0]] == [0, 0, 0]


def test_turn_advantages_reject_a_discount_outside_0_1():
    for discount in (0, 1.5):
        with pytest.raises(ValueError, match=r"discount must be in \(0, 1\]"):
            turn_advantages([], "grpo", discount)

"""Advantages on the twins fixture (test/fixtures/twins/advantages.json), which test/rl.advantages.test.ts reads too."""

import math
from typing import Any

import pytest
from twins import load, snake

from trajflow_py.trainer.advantages import EpisodeTurns, compute_advantages, turn_advantages

TWINS = load("advantages")


def check(actual: Any, case: dict[str, Any]) -> None:
    if case.get("exact"):
        assert actual == case["expected"]
    else:
        assert actual == pytest.approx(case["expected"], abs=1e-6)


@pytest.mark.parametrize("case", TWINS["episode"], ids=lambda case: f"{case['estimator']} {case['rewards']}")
def test_episode_advantages(case):
    options = {} if "epsStd" not in case else {"eps_std": case["epsStd"]}
    check(compute_advantages(case["rewards"], case["estimator"], **options), case)


@pytest.mark.parametrize("case", TWINS["turn"], ids=lambda case: case["why"][:60])
def test_turn_advantages(case):
    episodes = [EpisodeTurns(**{snake(key): value for key, value in episode.items()}) for episode in case["episodes"]]
    advantages = turn_advantages(episodes, case["estimator"], case["discount"])
    assert [len(row) for row in advantages] == [len(row) for row in case["expected"]]
    if case.get("exact"):
        check(advantages, case)
    else:
        for row, want in zip(advantages, case["expected"], strict=True):
            assert row == pytest.approx(want, abs=1e-6)


def test_rejects_non_finite_rewards_and_unknown_estimators():
    with pytest.raises(ValueError, match="reward 1 is nan"):
        compute_advantages([1, math.nan], "grpo")
    with pytest.raises(ValueError, match="unknown advantage estimator 'ppo'"):
        compute_advantages([1, 0], "ppo")


def test_turn_advantages_reject_a_discount_outside_0_1():
    for discount in (0, 1.5):
        with pytest.raises(ValueError, match=r"discount must be in \(0, 1\]"):
            turn_advantages([], "grpo", discount)

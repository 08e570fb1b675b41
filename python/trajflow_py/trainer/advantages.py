"""
Group-relative advantages (the Python twin of src/rl/advantages.ts): every trajectory of a group
answers the same prompt, so the group's own rewards are the baseline (no value network). One
advantage per trajectory, shared by all of its tokens; optionally a per-turn one on top. Pure.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


def compute_advantages(rewards: Sequence[float], estimator: str, eps_std: float = 1e-6) -> list[float]:
    """
    One advantage per reward of a group. A group of one, or of equal rewards, has nothing to
    compare: zeros (exactly, where the mean of equal floats can differ from them in the last bit).
    """
    for i, r in enumerate(rewards):
        if not math.isfinite(r):
            raise ValueError(f"compute_advantages: reward {i} is {r}, expected a finite number")
    G = len(rewards)
    if G < 2 or all(r == rewards[0] for r in rewards):
        return [0.0 for _ in rewards]
    mean = sum(rewards) / G
    if estimator == "grpo":
        # GRPO: A_i = (r_i - mean(r)) / (std(r) + eps), std the population one: sqrt(sum (r - mean)^2 / G)
        std = math.sqrt(sum((r - mean) ** 2 for r in rewards) / G)
        return [(r - mean) / (std + eps_std) for r in rewards]
    if estimator == "rloo":
        # RLOO: A_i = r_i - (sum_{j != i} r_j) / (G - 1), the mean of the other G - 1 rewards
        return [r - (mean * G - r) / (G - 1) for r in rewards]
    if estimator == "drgrpo":
        # Dr. GRPO: A_i = r_i - mean(r), without GRPO's division by the std (its difficulty bias)
        return [r - mean for r in rewards]
    raise ValueError(f"unknown advantage estimator {estimator!r} (expected grpo, rloo or drgrpo)")


@dataclass(frozen=True)
class EpisodeTurns:
    """One trajectory of a group as per-turn credit sees it."""

    #: What the model was shown at each turn (the anchor state's key), in turn order.
    states: Sequence[str]
    reward: float
    #: The part of `reward` the environment paid for the outcome, arriving after the last turn
    #: and discounted; the rest (format credit) every turn keeps whole. None: all of `reward`.
    outcome_reward: float | None = None
    #: What each turn's own answer cost, by turn; neither discounted nor passed back.
    turn_penalties: Sequence[float] = ()


def turn_advantages(episodes: Sequence[EpisodeTurns], estimator: str, discount: float) -> list[list[float]]:
    """
    Per-turn advantages by anchor state (GiGPO, Feng et al. 2025). Every visit of a state gets a
    discounted return

        G_{i,t} = gamma^(T_i - 1 - t) * o_i + (r_i - o_i) - c_{i,t}

    (T_i turns; o_i the outcome part of the reward r_i; c_{i,t} the penalty of turn t's action),
    and the visits of one state are compared with each other by the episode-level estimator. A
    state visited once has no comparison: 0. One advantage per turn, per episode.
    """
    if not (0 < discount <= 1):
        raise ValueError(f"turn_advantages: discount must be in (0, 1], got {discount}")
    visits: dict[str, list[tuple[int, int, float]]] = {}
    for e, episode in enumerate(episodes):
        outcome = episode.reward if episode.outcome_reward is None else episode.outcome_reward
        T = len(episode.states)
        for t, state in enumerate(episode.states):
            penalty = episode.turn_penalties[t] if t < len(episode.turn_penalties) else 0.0
            ret = discount ** (T - 1 - t) * outcome + (episode.reward - outcome) - penalty
            visits.setdefault(state, []).append((e, t, ret))
    advantages = [[0.0 for _ in episode.states] for episode in episodes]
    for group in visits.values():
        for (e, t, _), advantage in zip(group, compute_advantages([ret for _, _, ret in group], estimator), strict=True):
            advantages[e][t] = advantage
    return advantages

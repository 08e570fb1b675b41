"""
The per-step record of a training run, one line of train/metrics.jsonl (the Python twin of
src/rl/stepMetrics.ts, same keys), plus the agreement of the trainer's logprobs with the
sampler's, which only a trainer apart from its inference servers needs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from torch import Tensor

from .inputs import GroupSummary
from .policy_trainer import TrainMetrics
from .records import TrajectoryTime
from .samples import TrainingSample


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs) if xs else 0.0


def js_round(x: float) -> int:
    """JavaScript's Math.round (halves up), not Python's round (halves to even)."""
    return math.floor(x + 0.5)


def _agreement(diffs: Sequence[float]) -> dict:
    """max |d|, mean |d| and the k3 estimate mean(exp(d) - 1 - d) of KL(behaviour || trainer); 0 for none."""
    return {
        "diffMax": max((abs(d) for d in diffs), default=0.0),
        "diffMean": _mean([abs(d) for d in diffs]),
        "mismatchKl": _mean([math.exp(d) - 1 - d for d in diffs]),
    }


def logprob_agreement(samples: Sequence[TrainingSample], before: Sequence[Tensor | None], base_version: int) -> dict:
    """
    How far the trainer's logprobs (at `base_version`, before the update) are from the behaviour
    logprobs the sampler recorded, with d = trainer_lp - behaviour_lp per trained token:

    - logprobTokensCompared, logprobDiffMax (max |d|), logprobDiffMean (mean |d|) and
      logprobMismatchKl (mean(exp(d) - 1 - d), k3 of KL(behaviour || trainer)) over the tokens the
      very weights being trained sampled (policy version == logprobComparedVersion): the two
      implementations' numerical disagreement alone (precision, kernels). All 0 with 0 tokens.
    - logprobMismatchByVersion: the same per version that sampled trained tokens of the step, every
      step: for an older version the difference adds what the policy moved since (what loss.tis
      weighs by).
    """
    diffs: dict[int, list[float]] = {}
    for sample, logprobs in zip(samples, before, strict=True):
        if logprobs is None:
            continue
        values = logprobs.tolist()
        for j, t in enumerate(sample.trained_targets()):
            diffs.setdefault(sample.policy_versions[t + 1], []).append(values[j] - sample.behaviour_logprobs[t + 1])
    same = _agreement(diffs.get(base_version, []))
    return {
        "logprobComparedVersion": base_version,
        "logprobTokensCompared": len(diffs.get(base_version, [])),
        "logprobDiffMax": same["diffMax"],
        "logprobDiffMean": same["diffMean"],
        "logprobMismatchKl": same["mismatchKl"],
        "logprobMismatchByVersion": [{"version": v, "tokens": len(diffs[v]), **_agreement(diffs[v])} for v in sorted(diffs)],
    }


@dataclass(frozen=True)
class Utilization:
    trainer_idle_fraction: float
    engine_busy_fraction: float | None
    env_busy_fraction: float | None


def _mean_time(times: Sequence[TrajectoryTime]) -> dict:
    def field(name: str) -> int:
        return js_round(_mean([getattr(t, name) for t in times]))

    return {
        "totalMs": field("total_ms"),
        "generationMs": field("generation_ms"),
        "environmentMs": field("environment_ms"),
        "waitingMs": field("waiting_ms"),
    }


def summarize_step(
    *,
    step: int,
    version: int,
    groups: Sequence[GroupSummary],
    groups_skipped: int,
    groups_corrupt: int,
    advantages: Sequence[float],
    train: TrainMetrics,
    token_versions: Sequence[int],
    base_version: int,
    learning_rate: float,
    wall_ms: float,
    utilization: Utilization,
    trajectory_times: Sequence[TrajectoryTime],
) -> dict:
    """One StepMetrics record (camelCase keys, in the TypeScript order)."""
    rewards = [r for g in groups for r in g.rewards]
    reward_mean = _mean(rewards)
    counts: dict[int, int] = {}
    for v in token_versions:
        counts[base_version - v] = counts.get(base_version - v, 0) + 1
    # JSON.stringify lists integer keys ascending; so does this.
    histogram = {str(staleness): counts[staleness] for staleness in sorted(counts)}
    return {
        **train.to_json(),
        "step": step,
        "version": version,
        "groups": len(groups),
        "groupIds": [g.group_id for g in groups],
        "groupsSkipped": groups_skipped,
        "groupsCorrupt": groups_corrupt,
        "trajectories": len(rewards),
        "rewardMean": reward_mean,
        "rewardStd": math.sqrt(_mean([(r - reward_mean) ** 2 for r in rewards])),
        "successRate": _mean([1.0 if solved else 0.0 for g in groups for solved in g.solved]),
        "advantageMean": _mean(advantages),
        "advantageAbsMean": _mean([abs(a) for a in advantages]),
        "stalenessHistogram": histogram,
        "stalenessMax": max([0, *counts]),
        "learningRate": learning_rate,
        "wallMs": wall_ms,
        "trainerIdleFraction": utilization.trainer_idle_fraction,
        **({} if utilization.engine_busy_fraction is None else {"engineBusyFraction": utilization.engine_busy_fraction}),
        **({} if utilization.env_busy_fraction is None else {"envBusyFraction": utilization.env_busy_fraction}),
        **({"trajectoryTime": _mean_time(trajectory_times)} if trajectory_times else {}),
    }

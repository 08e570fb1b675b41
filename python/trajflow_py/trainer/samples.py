"""
A training sample (one sequence, its behaviour logprobs, its advantage) and the checks the
TypeScript trainer makes before training on it (src/rl/loss.ts: sampleProblem), with its messages.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class TrainingSample:
    ids: list[int]
    #: 1 where the policy sampled the token (it is trained), 0 where trajflow wrote it.
    loss_mask: list[int]
    #: log p(ids[i]) under the sampling policy where loss_mask[i] is 1 (anything elsewhere).
    behaviour_logprobs: list[float | None]
    #: Policy version that sampled each masked-in token, -1 elsewhere.
    policy_versions: list[int]
    #: Shared by every token of the sequence.
    advantage: float

    def trained_targets(self) -> list[int]:
        """Target positions t (ids[t + 1] is trained), ascending: logits at t predict ids[t + 1]."""
        return [i - 1 for i, m in enumerate(self.loss_mask) if i > 0 and m == 1]


def masked_tokens(samples: Sequence[TrainingSample]) -> int:
    """Number of trained (mask 1) tokens."""
    return sum(sum(s.loss_mask) for s in samples)


def sample_problem(sample: TrainingSample, vocab_size: int, max_context: int) -> str | None:
    """Why `sample` cannot be trained on by a model of that vocabulary and context, or None."""
    ids, mask, behaviour = sample.ids, sample.loss_mask, sample.behaviour_logprobs
    if not (2 <= len(ids) <= max_context):
        return f"ids must hold 2..{max_context} tokens, got {len(ids)}"
    bad = next((i for i, t in enumerate(ids) if not 0 <= t < vocab_size), None)
    if bad is not None:
        return f"ids[{bad}] = {ids[bad]} is not a token id (0..{vocab_size - 1})"
    if len(mask) != len(ids):
        return f"lossMask has {len(mask)} entries for {len(ids)} ids"
    bad = next((i for i, m in enumerate(mask) if m not in (0, 1)), None)
    if bad is not None:
        return f"lossMask[{bad}] = {mask[bad]}, expected 0 or 1"
    if mask[0] != 0:
        return "lossMask[0] must be 0: the first token has no context to predict it from"
    if 1 not in mask:
        return "lossMask has no 1: nothing to train on"
    if len(behaviour) != len(ids):
        return f"behaviourLogprobs has {len(behaviour)} entries for {len(ids)} ids"
    bad = next((i for i, lp in enumerate(behaviour) if mask[i] == 1 and not (lp is not None and math.isfinite(lp) and lp <= 0)), None)
    if bad is not None:
        return f"behaviourLogprobs[{bad}] = {behaviour[bad]}, expected a finite logprob <= 0"
    if not math.isfinite(sample.advantage):
        return f"advantage is {sample.advantage}, expected a finite number"
    return None


def assert_training_samples(samples: Sequence[TrainingSample], vocab_size: int, max_context: int) -> None:
    """Raises, naming the first bad sample's index, unless every sample fits the model."""
    if not samples:
        raise ValueError("empty batch: nothing to train on")
    for index, sample in enumerate(samples):
        problem = sample_problem(sample, vocab_size, max_context)
        if problem:
            raise ValueError(f"sample {index}: {problem}")

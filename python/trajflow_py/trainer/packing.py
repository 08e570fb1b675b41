"""
Packed micro-batches: several sequences side by side in one row of one forward pass, up to a token
budget (`trainer.microBatchTokens`), with nothing padded.

Attention stays inside each sequence: the position ids restart at 0 where a sequence starts, and
the trainer's attention (`attention.py`) runs causal attention over each sequence's tokens alone,
between the row's segment bounds. So a sequence's logits in a pack are its logits alone, and one
pass does the matmuls of many short ones.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from .samples import TrainingSample


def fed_length(sample: TrainingSample) -> int:
    """Tokens a pass feeds for the sample: up to its last trained target (the logits after it are never read)."""
    return max(sample.trained_targets()) + 1


def pack_indices(samples: list[TrainingSample], indices: list[int], token_budget: int) -> list[list[int]]:
    """
    `indices` (of `samples`, in order) as consecutive packs of at most `token_budget` fed tokens;
    a sequence longer than the budget is a pack of its own. 0: every sequence alone.
    """
    if token_budget == 0:
        return [[i] for i in indices]
    packs: list[list[int]] = []
    used = token_budget  # start a new pack at the first sequence
    for i in indices:
        length = fed_length(samples[i])
        if used + length > token_budget:
            packs.append([])
            used = 0
        packs[-1].append(i)
        used += length
    return packs


@dataclass(frozen=True)
class PackedRow:
    """One forward pass's input, and where each sequence's trained targets sit in it."""

    input_ids: Tensor  # [1, L]
    position_ids: Tensor  # [1, L]
    #: 0, where each sequence ends, ..., L (for the trainer's attention).
    segment_bounds: tuple[int, ...]
    #: Positions in the row whose logits predict a trained token, every sequence's in order.
    target_positions: Tensor  # [K]
    #: The token each target position predicts.
    next_ids: Tensor  # [K]
    #: How many of the K targets each sequence has, in pack order.
    target_counts: list[int]


def packed_row(samples: list[TrainingSample], device: torch.device) -> PackedRow:
    ids: list[int] = []
    positions: list[int] = []
    targets: list[int] = []
    next_ids: list[int] = []
    counts: list[int] = []
    bounds = [0]
    for sample in samples:
        offset = len(ids)
        sample_targets = sample.trained_targets()
        length = max(sample_targets) + 1
        ids.extend(sample.ids[:length])
        positions.extend(range(length))
        targets.extend(offset + t for t in sample_targets)
        next_ids.extend(sample.ids[t + 1] for t in sample_targets)
        counts.append(len(sample_targets))
        bounds.append(len(ids))
    return PackedRow(
        input_ids=torch.tensor([ids], device=device),
        position_ids=torch.tensor([positions], device=device),
        segment_bounds=tuple(bounds),
        target_positions=torch.tensor(targets, device=device),
        next_ids=torch.tensor(next_ids, device=device),
        target_counts=counts,
    )


def pad_rows(rows: list[Tensor], value: float = 0.0) -> Tensor:
    """Per-sequence vectors as one [B, T] matrix, right-padded with `value`."""
    return torch.nn.utils.rnn.pad_sequence(rows, batch_first=True, padding_value=value)

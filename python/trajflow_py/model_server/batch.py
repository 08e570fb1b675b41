"""
The running batch's tensors: a left-padded KV cache shared by all rows, its attention mask, and
each row's next input token and position.

Layout: every row ends at the same cache column, shorter histories are padded on the left and
masked out. Positions are per row (a row's first real token is position 0 whatever its padding),
so rotary embeddings see exactly what they would for the row alone. Rows join (their prompts
prefilled as a group, then both sides left-padded to a common length) and leave (dropped by index,
then all-padding leading columns trimmed) between decode steps.

This module is the only one that touches transformers' cache objects (DynamicCache layers'
keys / values tensors, [batch, kv_heads, seq, head_dim]).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer


@dataclass
class CacheState:
    """The cache (grown in place by each forward pass) and its [batch, seq] mask (1 = real token)."""

    cache: DynamicCache
    mask: torch.Tensor

    @property
    def length(self) -> int:
        return self.mask.shape[1]

    @property
    def layers(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        return [_keys_and_values(layer, i) for i, layer in enumerate(self.cache.layers)]

    @staticmethod
    def from_tensors(layers: list[tuple[torch.Tensor, torch.Tensor]], mask: torch.Tensor) -> CacheState:
        return CacheState(DynamicCache(ddp_cache_data=layers), mask)


def _keys_and_values(layer: object, index: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A filled attention layer's keys and values; the batch knows no other kind (linear attention keeps no KV tensors)."""
    if not isinstance(layer, DynamicLayer) or layer.keys is None or layer.values is None:
        raise TypeError(f"cache layer {index} is a {type(layer).__name__} without keys and values: the model server batches attention KV caches only")
    return layer.keys, layer.values


def _left_pad(tensor: torch.Tensor, columns: int, dim: int) -> torch.Tensor:
    if columns == 0:
        return tensor
    shape = list(tensor.shape)
    shape[dim] = columns
    return torch.cat([tensor.new_zeros(shape), tensor], dim=dim)


def merge(a: CacheState, b: CacheState) -> CacheState:
    """Rows of `a` then rows of `b`, both left-padded to the longer of the two."""
    length = max(a.length, b.length)
    pad_a, pad_b = length - a.length, length - b.length
    layers = [
        (
            torch.cat([_left_pad(ka, pad_a, 2), _left_pad(kb, pad_b, 2)], dim=0),
            torch.cat([_left_pad(va, pad_a, 2), _left_pad(vb, pad_b, 2)], dim=0),
        )
        for (ka, va), (kb, vb) in zip(a.layers, b.layers, strict=True)
    ]
    mask = torch.cat([_left_pad(a.mask, pad_a, 1), _left_pad(b.mask, pad_b, 1)], dim=0)
    return CacheState.from_tensors(layers, mask)


def select_rows(state: CacheState, rows: list[int]) -> CacheState:
    """Keeps `rows` (in that order) and trims leading columns that are padding in all of them."""
    index = torch.tensor(rows, dtype=torch.long)
    mask = state.mask.index_select(0, index)
    real_columns = mask.any(dim=0).nonzero()
    start = int(real_columns[0]) if len(real_columns) else mask.shape[1]
    layers = [(k.index_select(0, index)[:, :, start:], v.index_select(0, index)[:, :, start:]) for k, v in state.layers]
    return CacheState.from_tensors(layers, mask[:, start:].contiguous())


@torch.inference_mode()
def prefill(model: torch.nn.Module, prompts: list[list[int]], pad_id: int, forward_kwargs: dict[str, Any] | None = None) -> tuple[torch.Tensor, CacheState]:
    """Runs the prompts as one left-padded forward pass; returns each row's last logits [rows, vocab].

    forward_kwargs go to the model as they are (the rows' LoRA adapters).
    """
    length = max(len(p) for p in prompts)
    ids = torch.tensor([[pad_id] * (length - len(p)) + p for p in prompts], dtype=torch.long)
    mask = torch.tensor([[0] * (length - len(p)) + [1] * len(p) for p in prompts], dtype=torch.long)
    # Padding gets position 0: it is masked out, and a real row's positions start at 0 regardless.
    positions = (mask.cumsum(dim=1) - 1).clamp(min=0)
    cache = DynamicCache()
    out = model(
        input_ids=ids,
        attention_mask=mask,
        position_ids=positions,
        past_key_values=cache,
        use_cache=True,
        logits_to_keep=1,
        **(forward_kwargs or {}),
    )
    return out.logits[:, -1, :].float(), CacheState(out.past_key_values, mask)


@torch.inference_mode()
def decode_step(
    model: torch.nn.Module, state: CacheState, tokens: list[int], positions: list[int], forward_kwargs: dict[str, Any] | None = None
) -> torch.Tensor:
    """Feeds one token per row at its position, growing `state` in place; returns the next logits [rows, vocab]."""
    rows = len(tokens)
    state.mask = torch.cat([state.mask, torch.ones(rows, 1, dtype=state.mask.dtype)], dim=1)
    out = model(
        input_ids=torch.tensor(tokens, dtype=torch.long)[:, None],
        attention_mask=state.mask,
        position_ids=torch.tensor(positions, dtype=torch.long)[:, None],
        past_key_values=state.cache,
        use_cache=True,
        **(forward_kwargs or {}),
    )
    logits: torch.Tensor = out.logits
    return logits[:, -1, :].float()

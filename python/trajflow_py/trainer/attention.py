"""
The trainer's attention: causal attention inside each sequence of a packed row, one sequence at a
time, so a pack costs its sequences' attention and nothing more.

transformers' own `sdpa` attention reads restarting position ids as packed sequences and builds a
block-diagonal mask over the whole row, then computes attention over the row's full square: a
4096-token pack of 16 sequences of 256 does 16x the attention of its sequences, and the mask alone
is L x L. Here the row's sequence boundaries (`segment_bounds`, passed to the model's forward and
on to each attention layer) split it, and each sequence runs PyTorch's fused causal attention on
its own tokens. With no boundaries the row is one sequence.

Every trainer model is loaded with this implementation (`load_model`): the trainer only runs whole
sequences (no KV cache, no padding), which is all this supports; anything else is refused loudly
rather than attended wrongly.
"""

from __future__ import annotations

from itertools import pairwise

import torch
from torch import Tensor
from transformers import AttentionInterface

#: The name models are loaded with (`attn_implementation`). transformers builds no attention mask
#: for a name it has no mask function for.
SEGMENT_ATTENTION = "trajflow_segments"


def segment_attention(
    module: torch.nn.Module,
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attention_mask: Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    segment_bounds: tuple[int, ...] | None = None,
    **_: object,
) -> tuple[Tensor, None]:
    """
    query [B, H, L, D], key and value [B, H_kv, L, D] (grouped heads allowed) -> output [B, L, H, D].
    `segment_bounds`: 0, the end of each sequence, ..., L.
    """
    length = query.shape[2]
    if attention_mask is not None or key.shape[2] != length:
        raise ValueError(
            f"{SEGMENT_ATTENTION} attention runs whole unpadded sequences (query {length} tokens, key {key.shape[2]}, "
            f"mask {'given' if attention_mask is not None else 'none'}): load the model with attn_implementation='sdpa' to generate or pad"
        )
    bounds = (0, length) if segment_bounds is None else segment_bounds
    if bounds[0] != 0 or bounds[-1] != length:
        raise ValueError(f"segment bounds {bounds[0]}..{bounds[-1]} do not span the row's {length} tokens")
    outputs = [
        torch.nn.functional.scaled_dot_product_attention(
            query[:, :, start:end],
            key[:, :, start:end],
            value[:, :, start:end],
            dropout_p=dropout,
            is_causal=True,
            scale=scaling,
            enable_gqa=True,
        )
        for start, end in pairwise(bounds)
    ]
    output = outputs[0] if len(outputs) == 1 else torch.cat(outputs, dim=2)
    return output.transpose(1, 2).contiguous(), None


AttentionInterface.register(SEGMENT_ATTENTION, segment_attention)

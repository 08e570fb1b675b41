"""Loading the served model and tokenizer from a Hugging Face directory."""

from __future__ import annotations

from typing import Any

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel

from . import batch as kv

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def load_model(model_dir: str, dtype: str) -> tuple[PreTrainedModel, Any]:
    # sdpa: the fast attention path on CPU; checked to give finite values on left-padded rows.
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=DTYPES[dtype], attn_implementation="sdpa")
    model.eval()
    model.requires_grad_(False)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    return model, tokenizer


def _ids(value: Any) -> set[int]:
    if value is None:
        return set()
    if isinstance(value, int):
        return {value}
    return {int(v) for v in value}


def eos_token_ids(model: torch.nn.Module, tokenizer: Any) -> frozenset[int]:
    """Every id that ends a completion by default: the config's, generation config's and tokenizer's EOS."""
    ids = _ids(getattr(model.config, "eos_token_id", None)) | _ids(getattr(tokenizer, "eos_token_id", None))
    generation_config = getattr(model, "generation_config", None)
    if generation_config is not None:
        ids |= _ids(getattr(generation_config, "eos_token_id", None))
    return frozenset(ids)


def warm_up(model: torch.nn.Module) -> None:
    """One tiny prefill + decode step, so the first request does not pay torch's lazy setup."""
    with torch.inference_mode():
        _, state = kv.prefill(model, [[0, 0], [0]], pad_id=0)
        kv.decode_step(model, state, [0, 0], [2, 1])

"""
LoRA (`trainer.lora`, with peft): the base model (`model.path`) stays frozen and a low-rank
adapter trains beside it, W x + (alpha / r) B A x for each adapted matrix W.

Every version of a LoRA run, version 0 included, is published as the adapter alone (peft's
`adapter_config.json` + `adapter_model.safetensors`, float32): the servers keep the base model and
load each version as a runtime LoRA adapter. Version 0's B is zero, so it is the base model exactly
(and the KL penalty's reference is the model with its adapter switched off).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from peft import LoraConfig, PeftModel, get_peft_model
from torch import Tensor
from transformers import PreTrainedModel

from .inputs import LoraSettings
from .policy import copy_non_weight_files, load_model

#: The file that makes a checkpoint folder an adapter (the inference side tells by it too).
ADAPTER_CONFIG_FILE = "adapter_config.json"
#: The seed of version 0's A matrices: the same run starts from the same adapter.
INITIAL_ADAPTER_SEED = 0


def is_adapter(checkpoint: Path) -> bool:
    return (checkpoint / ADAPTER_CONFIG_FILE).is_file()


def peft_config(lora: LoraSettings) -> LoraConfig:
    return LoraConfig(
        r=lora.rank, lora_alpha=lora.alpha, target_modules=list(lora.target_modules), lora_dropout=lora.dropout, bias="none", task_type="CAUSAL_LM"
    )


def initial_adapter(base_model: Path, lora: LoraSettings) -> PeftModel:
    """The base model with a fresh adapter: A random (seeded), B zero."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(INITIAL_ADAPTER_SEED)
        return get_peft_model(load_model(base_model), peft_config(lora))


def load_adapter(checkpoint: Path, base_model: Path) -> PeftModel:
    """The base model with a checkpoint's adapter, trainable (`checkpoint_problem` checked it first)."""
    model = PeftModel.from_pretrained(load_model(base_model), checkpoint, is_trainable=True)
    model.eval()
    return model


def checkpoint_problem(checkpoint: Path, lora: LoraSettings | None) -> str | None:
    """Why the run cannot train on from `checkpoint` as `lora` says (full weights or an adapter, and which adapter), or None."""
    if not is_adapter(checkpoint):
        return None if lora is None else f"{checkpoint} holds full weights, but the run's trainer.lora is set: a run keeps the way it started training"
    if lora is None:
        return f"{checkpoint} holds a LoRA adapter, but the run's trainer.lora is not set: a run keeps the way it started training"
    saved = json.loads((checkpoint / ADAPTER_CONFIG_FILE).read_text(encoding="utf-8"))
    held = (saved.get("r"), saved.get("lora_alpha"), sorted(saved.get("target_modules") or ()))
    if held != (lora.rank, lora.alpha, sorted(lora.target_modules)):
        return (
            f"{checkpoint} holds an adapter of rank {held[0]}, alpha {held[1]}, modules {held[2]}; trainer.lora says rank {lora.rank}, "
            f"alpha {lora.alpha}, modules {sorted(lora.target_modules)}: a run keeps the adapter it started with"
        )
    return None


def adapter_state(model: torch.nn.Module) -> dict[str, Tensor]:
    """The trainable (adapter) parameters, whole on every rank (each sharded one gathered: every rank must call this)."""
    state: dict[str, Tensor] = {}
    for name, parameter in model.named_parameters():
        if parameter.requires_grad:
            full_tensor: Any = getattr(parameter, "full_tensor", None)
            state[name] = (full_tensor() if full_tensor is not None else parameter).detach().float().cpu()
    return state


def save_adapter(model: PreTrainedModel | PeftModel, state: dict[str, Tensor], base: Path, dest: Path) -> None:
    """Writes the adapter servers load into `dest` (peft's files), and `base`'s tokenizer and chat template."""
    peft_model: Any = model
    peft_model.save_pretrained(dest, state_dict=state, safe_serialization=True)
    copy_non_weight_files(base, dest)


@contextmanager
def adapter_dropout(model: torch.nn.Module, active: bool) -> Iterator[None]:
    """The adapter's dropout on during the block (the rest of the model stays in eval mode)."""
    if not active:
        yield
        return
    dropouts = [module for name, module in model.named_modules() if name.rsplit(".", 1)[-1] == "lora_dropout"]
    for module in dropouts:
        module.train()
    try:
        yield
    finally:
        for module in dropouts:
            module.eval()

"""
The policy as a Hugging Face causal LM: loading a checkpoint directory, scoring tokens, and
writing the published weights of a version (in its precision, with the base's tokenizer and chat template).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import torch
import torch.utils.checkpoint
from torch import Tensor
from transformers import AutoModelForCausalLM, PreTrainedModel

from .attention import SEGMENT_ATTENTION
from .inputs import Precision
from .packing import PackedRow

DTYPES: dict[str, torch.dtype] = {"float32": torch.float32, "bfloat16": torch.bfloat16}
#: What a resume reads beside the published weights, written by torch.distributed.checkpoint (one
#: file per rank, readable by any number of ranks): AdamW's state, and with bfloat16 the float32
#: master weights the published bfloat16 ones round. Version 0 has none: a fresh optimizer.
TRAINER_STATE_DIR = "trainer-state"
#: Files of a base checkpoint a new one must not inherit: the weights (save_pretrained writes the
#: new ones, maybe sharded differently) and the optimizer state.
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf", ".index.json")


def default_device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def load_model(directory: Path) -> PreTrainedModel:
    """
    A checkpoint's model on the CPU with float32 parameters (the master weights, whatever the
    published precision: bfloat16 only computes, see `computing`), in eval mode, attending inside
    each packed sequence (`attention.py`).
    """
    model = AutoModelForCausalLM.from_pretrained(directory, dtype=torch.float32, attn_implementation=SEGMENT_ATTENTION)
    # Eval mode while training too: dropout would make two passes over the same tokens disagree,
    # and PPO's ratio compares this policy's logprobs with the sampler's.
    model.eval()
    return model


def computing(precision: Precision, device: torch.device) -> AbstractContextManager:
    """
    Where forward passes run: with bfloat16, matmuls in bfloat16 (autocast) on float32 parameters,
    so gradients and AdamW updates stay float32 (a 1e-5 step of a bfloat16 weight would round away).
    """
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=precision == "bfloat16")


def checkpoint_activations(model: torch.nn.Module, layers: list[torch.nn.Module]) -> None:
    """
    Recomputes each layer's activations in the backward pass instead of keeping them: memory of one
    layer's activations instead of all, for about one more forward pass. (transformers' own switch
    acts only in training mode, and the policy trains in eval mode.)
    """
    for layer in layers:
        forward = layer.forward

        def recomputed(*args: Any, _forward: Callable[..., Any] = forward, **kwargs: Any) -> Any:
            if not torch.is_grad_enabled():
                return _forward(*args, **kwargs)
            return torch.utils.checkpoint.checkpoint(_forward, *args, use_reentrant=False, **kwargs)

        layer.forward = recomputed


def model_limits(model: PreTrainedModel) -> tuple[int, int]:
    """(vocabulary size, longest context) a sequence must fit."""
    embeddings = model.get_input_embeddings()
    if not isinstance(embeddings, torch.nn.Embedding):
        raise TypeError(f"the model's input embeddings are a {type(embeddings).__name__}, not an Embedding: cannot tell its vocabulary size")
    return embeddings.num_embeddings, int(getattr(model.config, "max_position_embeddings", 1 << 31))


def row_logprobs(model: torch.nn.Module, row: PackedRow, temperature: float) -> list[Tensor]:
    """
    log p(next id | the tokens before, in its own sequence) at each target of a packed row, at
    `temperature`, in float32, one vector per sequence:

        logprob = log_softmax(logits[t] / T)[ids[t + 1]]

    as the inference servers report it (after temperature, before top-p). Differentiable unless
    called under torch.no_grad(). Logits are projected at the target positions only.
    """
    output = model(
        input_ids=row.input_ids,
        position_ids=row.position_ids,
        segment_bounds=row.segment_bounds,
        logits_to_keep=row.target_positions,
        use_cache=False,
    )
    logprobs = torch.log_softmax(output.logits[0].float() / temperature, dim=-1)  # [K, V]
    picked = logprobs.gather(1, row.next_ids.unsqueeze(1)).squeeze(1)
    return list(picked.split(row.target_counts))


def copy_model_dir(source: Path, dest: Path) -> None:
    """Every file of a model directory (weights, config, tokenizer, chat template), contents only."""
    for file in sorted(source.rglob("*")):
        if file.is_file():
            target = dest / file.relative_to(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            # copyfile, not copy2: the copy gets this process's default mode, readable by servers.
            shutil.copyfile(file, target)


def save_published(model: PreTrainedModel, state_dict: dict[str, Tensor], precision: Precision, base: Path, dest: Path) -> None:
    """
    Writes the weights servers load into `dest`: `state_dict` (full, unsharded) in `precision` by
    save_pretrained (safetensors, config, generation config), and every other file of the base
    checkpoint `base` (tokenizer, chat template).
    """
    dtype = DTYPES[precision]
    model.save_pretrained(dest, state_dict={name: tensor.to(dtype) for name, tensor in state_dict.items()}, safe_serialization=True)
    # save_pretrained wrote the dtype of the parameters in memory (the float32 masters) into the
    # config: servers must read the dtype of the weights in the files.
    model.config.dtype = precision
    model.config.save_pretrained(dest)
    copy_non_weight_files(base, dest)


def copy_non_weight_files(base: Path, dest: Path) -> None:
    """Every file of checkpoint `base` that is not weights (tokenizer, chat template) and that `dest` lacks."""
    written = {p.name for p in dest.iterdir()}
    for file in sorted(base.iterdir()):
        if file.is_file() and file.name not in written and not file.name.endswith(WEIGHT_SUFFIXES):
            shutil.copyfile(file, dest / file.name)


def drop_trainer_state(checkpoint: Path) -> None:
    """Removes a checkpoint's optimizer state and master weights, once no step can resume from that version."""
    shutil.rmtree(checkpoint / TRAINER_STATE_DIR, ignore_errors=True)

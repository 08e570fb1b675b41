"""
Reading a Hugging Face model directory's safetensors into tensors that fit the running model.

Everything is read and checked before anything is copied: a directory with a missing tensor, an
unexpected one or a wrong shape is refused as a whole, so a bad update never leaves the server
with half-new weights.
"""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import load_file


class WeightLoadError(ValueError):
    """The directory cannot replace the running model's weights; the message says why."""


def read_weights(model_dir: str, model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """All parameters for `model` from the *.safetensors files in `model_dir`, checked for fit."""
    directory = Path(model_dir)
    if not directory.is_dir():
        raise WeightLoadError(f"{model_dir} is not a directory")
    files = sorted(directory.glob("*.safetensors"))
    if not files:
        raise WeightLoadError(f"no *.safetensors file in {model_dir}")

    loaded: dict[str, torch.Tensor] = {}
    for file in files:
        try:
            loaded.update(load_file(str(file), device="cpu"))
        except Exception as error:  # safetensors raises several types for a damaged file
            raise WeightLoadError(f"cannot read {file}: {error}") from error

    # named_parameters lists a tied tensor once (lm_head shares the embedding), so these are the
    # tensors that must come from the directory; state_dict names every alias a file may also carry.
    required = base_parameters(model)
    aliases = _base_names(model.state_dict())
    unexpected = sorted(name for name in loaded if name not in aliases)
    if unexpected:
        raise WeightLoadError(f"{model_dir} has tensors the running model does not: {', '.join(unexpected[:5])}")
    missing = sorted(name for name in required if name not in loaded)
    if missing:
        raise WeightLoadError(f"{model_dir} lacks tensors of the running model: {', '.join(missing[:5])}")
    for name, tensor in loaded.items():
        expected = aliases[name].shape
        if tensor.shape != expected:
            raise WeightLoadError(f"{name} has shape {list(tensor.shape)} in {model_dir}, the running model {list(expected)}")
        if not tensor.dtype.is_floating_point:
            raise WeightLoadError(f"{name} is {tensor.dtype} in {model_dir}, not a floating-point tensor")
    return {name: loaded[name] for name in required}


@torch.no_grad()
def copy_weights(model: torch.nn.Module, weights: dict[str, torch.Tensor]) -> None:
    """Overwrites the model's parameters in place (converting dtype); call between forward passes."""
    parameters = base_parameters(model)
    for name, tensor in weights.items():
        parameters[name].copy_(tensor)


def base_parameters(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The model's own parameters by their checkpoint names, also while peft LoRA adapters are injected."""
    return _base_names(dict(model.named_parameters()))


def _base_names(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Drops peft's adapter tensors (lora_A, lora_B, ...) and maps a wrapped layer's
    "q_proj.base_layer.weight" back to the base model's "q_proj.weight"."""
    named = {}
    for name, tensor in tensors.items():
        parts = name.split(".")
        if any(part.startswith("lora_") for part in parts):
            continue
        named[".".join(part for part in parts if part != "base_layer")] = tensor
    return named

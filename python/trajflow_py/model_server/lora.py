"""
The served model's runtime LoRA adapters, through peft: loading an adapter directory, deleting it,
and the keyword that makes one forward pass run each row under its own adapter.

peft injects adapters into the base model in place (a targeted Linear becomes a LoRA layer holding
the original as its base layer), so every method here mutates the model: only the scheduler thread
may call them, between forward passes. Adapters get internal names ("adapter0", "adapter1", ...)
rather than the clients' names: peft keys modules by adapter name, where a "." or a clash with its
own names ("__base__", "default") would break.

An unloaded adapter's matrices stay as a spare while other adapters are loaded: the next adapter of
the same shape (a training run's next version) is copied into them, instead of peft building an
adapter's modules again, which costs more than the copy by far. The copy goes straight from the
file's tensors into the spare's parameters (the file keys peft would save them under are mapped
once, when the adapter is first built): peft's own state-dict load walks every module of the model
on each call, which on a small model costs more than reading the adapter. Unloading the last
adapter takes every LoRA layer out.
"""

from __future__ import annotations

import json
from itertools import count
from pathlib import Path
from typing import Any

import torch
from peft import LoraConfig, PeftConfig, PeftModel
from peft.utils import get_peft_model_state_dict, load_peft_weights, set_peft_model_state_dict

#: peft's marker for "no adapter" in a mixed batch's adapter_names.
BASE_ROW = "__base__"
#: LoRA config fields that do not change what an adapter's matrices compute (where it was made, how it was trained).
_SHAPE_IRRELEVANT = frozenset({"base_model_name_or_path", "revision", "inference_mode", "peft_version", "lora_dropout", "runtime_config"})


def adapter_shape(config: PeftConfig) -> dict[str, Any]:
    """What two adapters must share for one's matrices to hold the other's weights and compute them alike."""
    return {key: value for key, value in config.to_dict().items() if key not in _SHAPE_IRRELEVANT}


class AdapterError(ValueError):
    """A LoRA adapter load or unload that cannot be done; the message says why (naming the directory for a load)."""


class LoraModel:
    """The base model plus the adapters loaded into it; the peft wrapper exists while any adapter is loaded."""

    def __init__(self, base: torch.nn.Module):
        self.base = base
        self._peft: PeftModel | None = None
        self._names = count()
        #: Unloaded adapters' internal names, with their shapes: matrices ready for the next load.
        self._spares: list[tuple[dict[str, Any], str]] = []
        #: Per adapter: its parameters under the keys its files name them by (None where they cannot be mapped so).
        self._file_keys: dict[str, dict[str, torch.Tensor] | None] = {}

    @property
    def runnable(self) -> torch.nn.Module:
        """The module to call for a forward pass (with batch_kwargs)."""
        return self._peft if self._peft is not None else self.base

    def batch_kwargs(self, adapters: list[str | None]) -> dict[str, Any]:
        """Forward kwargs running row i under adapters[i] (None = the base model)."""
        if self._peft is None:
            if any(adapters):
                raise RuntimeError(f"rows name adapters {sorted({a for a in adapters if a})} but none is loaded")
            return {}
        # Passed even when every row is a base row: without it peft would apply its active adapter.
        return {"adapter_names": [a or BASE_ROW for a in adapters]}

    def load(self, directory: str) -> str:
        """Loads a peft LoRA adapter directory; returns its internal name. On failure the model serves as before."""
        config = read_adapter_config(directory)
        shape = adapter_shape(config)
        spare = next((name for spare_shape, name in self._spares if spare_shape == shape), None)
        if spare is not None:
            self._spares = [(s, n) for s, n in self._spares if n != spare]
            return self._refill(spare, directory)
        name = f"adapter{next(self._names)}"
        created = self._peft is None
        try:
            if self._peft is None:
                self._peft = PeftModel(self.base, config, adapter_name=name)
            # Built on the meta device and filled from the files: no random initialisation to overwrite.
            result = self._peft.load_adapter(directory, adapter_name=name, low_cpu_mem_usage=True)
        except Exception as error:
            self._discard(name, created)
            raise AdapterError(f"{directory}: not a LoRA adapter of the served model: {error}") from error
        # load_adapter lists the adapter's own parameters the files lacked (left at their random / zero
        # initialisation) and tensors it could not place: either way the adapter would not be the one trained.
        missing, unexpected = list(result.missing_keys), list(result.unexpected_keys)
        if missing:
            self._discard(name, created)
            raise AdapterError(f"{directory}: lacks {len(missing)} tensors of its adapter ({', '.join(missing[:3])})")
        if unexpected:
            self._discard(name, created)
            raise AdapterError(f"{directory}: has {len(unexpected)} tensors its adapter config does not place ({', '.join(unexpected[:3])})")
        self._file_keys[name] = self._parameters_by_file_key(name)
        return name

    def delete(self, name: str) -> None:
        assert self._peft is not None, f"no adapter is loaded, cannot delete {name}"
        spares = {spare for _, spare in self._spares}
        if set(self._peft.peft_config) - spares == {name}:
            # The last one in use: take every LoRA layer out (spares too) and serve the plain base model again.
            self._peft.unload()
            self._peft = None
            self._spares = []
            self._file_keys = {}
        else:
            self._spares.append((adapter_shape(self._peft.peft_config[name]), name))

    def _refill(self, spare: str, directory: str) -> str:
        """Copies an adapter directory's weights into a spare's matrices; on failure the spare is deleted (nothing else changed)."""
        assert self._peft is not None
        try:
            weights = load_peft_weights(directory, device="cpu")
            if self._copy_by_file_key(spare, weights):
                return spare
            result: Any = set_peft_model_state_dict(self._peft, weights, adapter_name=spare)
            # As load_adapter does: the missing keys that matter are the spare's own LoRA matrices.
            missing = [key for key in result.missing_keys if "lora_" in key and f".{spare}." in key]
            unexpected = list(result.unexpected_keys)
        except Exception as error:
            self._delete(spare)
            raise AdapterError(f"{directory}: not a LoRA adapter of the served model: {error}") from error
        if missing or unexpected:
            self._delete(spare)
            what = (
                f"lacks {len(missing)} tensors of its adapter ({', '.join(missing[:3])})"
                if missing
                else f"has {len(unexpected)} tensors its adapter config does not place"
            )
            raise AdapterError(f"{directory}: {what}")
        return spare

    def _parameters_by_file_key(self, name: str) -> dict[str, torch.Tensor] | None:
        """Adapter `name`'s parameters under the keys peft saves them by, or None unless each is a parameter itself (not a copy)."""
        assert self._peft is not None
        by_key = get_peft_model_state_dict(self._peft, adapter_name=name)
        parameters = {parameter.data_ptr() for parameter in self._peft.parameters()}
        return by_key if all(tensor.data_ptr() in parameters for tensor in by_key.values()) else None

    def _copy_by_file_key(self, spare: str, weights: dict[str, torch.Tensor]) -> bool:
        """Copies `weights` into the spare's parameters when the file names exactly those, shape for shape; False where peft must place them."""
        targets = self._file_keys.get(spare)
        if targets is None or targets.keys() != weights.keys():
            return False
        if any(targets[key].shape != tensor.shape for key, tensor in weights.items()):
            return False
        with torch.no_grad():
            for key, tensor in weights.items():
                targets[key].copy_(tensor)
        return True

    def _delete(self, name: str) -> None:
        assert self._peft is not None
        self._peft.delete_adapter(name)
        self._file_keys.pop(name, None)

    def _discard(self, name: str, created: bool) -> None:
        """Removes what a failed load left behind."""
        if self._peft is None:
            return
        if created:
            self._peft.unload()
            self._peft = None
        elif name in self._peft.peft_config:
            self._delete(name)


def read_adapter_config(directory: str) -> LoraConfig:
    """The directory's LoRA config, or AdapterError saying what is wrong with it."""
    path = Path(directory)
    if not path.is_dir():
        raise AdapterError(f"{directory} is not a directory")
    config_file = path / "adapter_config.json"
    if not config_file.is_file():
        raise AdapterError(f"{directory} has no adapter_config.json: not a peft adapter directory")
    try:
        peft_type = json.loads(config_file.read_text()).get("peft_type")
    except (OSError, ValueError, AttributeError) as error:
        raise AdapterError(f"{config_file} is not a readable JSON object: {error}") from error
    if peft_type != "LORA":
        raise AdapterError(f"{config_file}: peft_type is {peft_type!r}; only LORA adapters are served")
    if not any(path.glob("adapter_model.*")):
        raise AdapterError(f"{directory} has no adapter_model.safetensors (or .bin)")
    try:
        config: LoraConfig = LoraConfig.from_pretrained(directory)
    except Exception as error:  # peft / dataclass validation raise several types
        raise AdapterError(f"{config_file}: invalid LoRA config: {error}") from error
    config.inference_mode = True
    return config

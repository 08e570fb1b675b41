"""
The policy as a Hugging Face causal LM: loading a checkpoint directory, scoring tokens, and
writing a checkpoint directory (weights, the base's tokenizer and chat template, optimizer state).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import torch
from torch import Tensor
from transformers import AutoModelForCausalLM, PreTrainedModel

from .inputs import Precision

DTYPES: dict[str, torch.dtype] = {"float32": torch.float32, "bfloat16": torch.bfloat16}
#: AdamW's state beside the weights of a checkpoint (version 0 has none: a fresh optimizer).
OPTIMIZER_FILE = "optimizer.pt"
#: Files of a base checkpoint a new one must not inherit: the weights (save_pretrained writes the
#: new ones, maybe sharded differently) and the optimizer state.
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf", ".index.json")


def default_device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def load_model(directory: Path, precision: Precision, device: torch.device) -> PreTrainedModel:
    """A checkpoint's model with its parameters in `precision`, in eval mode."""
    model = AutoModelForCausalLM.from_pretrained(directory, dtype=DTYPES[precision])
    # Eval mode while training too: dropout would make two passes over the same tokens disagree,
    # and PPO's ratio compares this policy's logprobs with the sampler's.
    model.eval()
    # transformers wraps PreTrainedModel.to with functools.wraps, which mypy reads as an unbound method.
    model.to(device)  # type: ignore[arg-type]
    return model


def model_limits(model: PreTrainedModel) -> tuple[int, int]:
    """(vocabulary size, longest context) a sequence must fit."""
    embeddings = model.get_input_embeddings()
    if not isinstance(embeddings, torch.nn.Embedding):
        raise TypeError(f"the model's input embeddings are a {type(embeddings).__name__}, not an Embedding: cannot tell its vocabulary size")
    return embeddings.num_embeddings, int(getattr(model.config, "max_position_embeddings", 1 << 31))


def target_logprobs(model: PreTrainedModel, ids: list[int], targets: list[int], temperature: float) -> Tensor:
    """
    log p(ids[t + 1] | ids[<= t]) at each target position t, at `temperature`, in float32 ([len(targets)]):

        logprob = log_softmax(logits[t] / T)[ids[t + 1]]

    as the inference servers report it (after temperature, before top-p). Differentiable unless
    called under torch.no_grad(). Logits are projected at the target positions only.
    """
    device = model.device
    # Causal: the logits at t read ids[<= t] alone, so the tokens after the last target are not fed.
    input_ids = torch.tensor([ids[: max(targets) + 1]], device=device)
    positions = torch.tensor(targets, device=device)
    logits = model(input_ids=input_ids, logits_to_keep=positions, use_cache=False).logits[0]  # [k, V]
    logprobs = torch.log_softmax(logits.float() / temperature, dim=-1)
    next_ids = torch.tensor([ids[t + 1] for t in targets], device=device)
    return logprobs.gather(1, next_ids.unsqueeze(1)).squeeze(1)


def copy_model_dir(source: Path, dest: Path) -> None:
    """Every file of a model directory (weights, config, tokenizer, chat template), contents only."""
    for file in sorted(source.rglob("*")):
        if file.is_file():
            target = dest / file.relative_to(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            # copyfile, not copy2: the copy gets this process's default mode, readable by servers.
            shutil.copyfile(file, target)


def save_checkpoint(model: PreTrainedModel, optimizer: torch.optim.Optimizer | None, base: Path, dest: Path) -> None:
    """
    Writes a checkpoint directory: the weights by save_pretrained (safetensors, config,
    generation config), every other file of the base checkpoint `base` (tokenizer, chat
    template), and the optimizer state.
    """
    model.save_pretrained(dest, safe_serialization=True)
    written = {p.name for p in dest.iterdir()}
    for file in sorted(base.iterdir()):
        if file.is_file() and file.name not in written and not file.name.endswith(WEIGHT_SUFFIXES):
            shutil.copyfile(file, dest / file.name)
    if optimizer is not None:
        torch.save(optimizer.state_dict(), dest / OPTIMIZER_FILE)


def drop_optimizer_state(checkpoint: Path) -> None:
    """Removes a checkpoint's optimizer state, once no step can resume from that version."""
    (checkpoint / OPTIMIZER_FILE).unlink(missing_ok=True)

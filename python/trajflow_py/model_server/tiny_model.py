"""
A tiny randomly initialised llama (two layers, hidden size 64) saved as a Hugging Face directory
with a real tokenizer copied beside it: a real model for the server that loads in a second and
decodes in milliseconds, for fast tests. Its weights are seeded, so it is the same model each time.

    python -m trajflow_py.model_server.tiny_model OUT_DIR [--tokenizer-from SMOLLM2_DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
from pathlib import Path

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja")


def make_tiny_model(out_dir: str | Path, tokenizer_dir: str | Path, seed: int = 0) -> Path:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        # Wide initialisation: the default 0.02 gives near-uniform next-token distributions, where
        # tests of sampling and stop tokens would say little.
        initializer_range=0.3,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config).eval()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    for name in TOKENIZER_FILES:
        if (Path(tokenizer_dir) / name).exists():
            shutil.copy(Path(tokenizer_dir) / name, out / name)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir")
    default_tokenizer = Path(__file__).resolve().parents[3] / ".models" / "smollm2-135m-instruct"
    parser.add_argument("--tokenizer-from", default=str(default_tokenizer))
    args = parser.parse_args()
    print(make_tiny_model(args.out_dir, args.tokenizer_from))


if __name__ == "__main__":
    main()

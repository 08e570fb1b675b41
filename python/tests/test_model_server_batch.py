"""
The left-padded KV-cache batch against plain full forward passes, on a tiny random llama: rows
joining with different history lengths, rows leaving, and decoding on, must give each row the
logits it would get alone.
"""

from pathlib import Path

import pytest
import torch

from trajflow_py.model_server import batch as kv
from trajflow_py.model_server.loading import load_model
from trajflow_py.model_server.tiny_model import make_tiny_model

SMOLLM2 = Path(__file__).resolve().parents[2] / ".models" / "smollm2-135m-instruct"
pytestmark = pytest.mark.skipif(not (SMOLLM2 / "tokenizer.json").exists(), reason="needs the SmolLM2 tokenizer (scripts/setup.sh)")


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    directory = make_tiny_model(tmp_path_factory.mktemp("tiny"), SMOLLM2)
    loaded, _ = load_model(str(directory), "float32")
    return loaded


def _alone(model, ids: list[int]) -> torch.Tensor:
    with torch.inference_mode():
        logits: torch.Tensor = model(input_ids=torch.tensor([ids])).logits
        return logits[0, -1].float()


def test_prefill_of_unequal_prompts_matches_each_prompt_alone(model):
    prompts = [[5, 6, 7, 8, 9, 10, 11], [300], [40, 41, 42]]
    logits, state = kv.prefill(model, prompts, pad_id=0)
    assert state.mask.tolist() == [[1] * 7, [0] * 6 + [1], [0] * 4 + [1] * 3]
    for row, prompt in enumerate(prompts):
        torch.testing.assert_close(logits[row], _alone(model, prompt), atol=1e-4, rtol=0)


def test_join_leave_and_decode_match_each_history_alone(model):
    histories = {"a": [5, 6, 7, 8, 9, 10, 11, 12, 13], "b": [300, 301]}
    _, state_a = kv.prefill(model, [histories["a"]], pad_id=0)
    _, state_b = kv.prefill(model, [histories["b"]], pad_id=0)
    # a decodes twice alone, then b (shorter) joins; later c (longer than both) joins too.
    with torch.inference_mode():
        for token in (20, 21):
            kv.decode_step(model, state_a, [token], [len(histories["a"])])
            histories["a"].append(token)
        state = kv.merge(state_a, state_b)
        histories["c"] = list(range(100, 125))
        _, state_c = kv.prefill(model, [histories["c"]], pad_id=0)
        state = kv.merge(state, state_c)
        order = ["a", "b", "c"]
        for step in range(3):
            tokens = [1000 + step + i for i in range(len(order))]
            logits = kv.decode_step(model, state, tokens, [len(histories[name]) for name in order])
            for row, name in enumerate(order):
                histories[name].append(tokens[row])
                torch.testing.assert_close(logits[row], _alone(model, histories[name]), atol=1e-4, rtol=0)
            if step == 0:
                # c leaves first, then a: the leading all-padding columns are trimmed away.
                state, order = kv.select_rows(state, [0, 1]), ["a", "b"]
                assert state.length == len(histories["a"])
            elif step == 1:
                state, order = kv.select_rows(state, [1]), ["b"]
                assert state.length == len(histories["b"])
                assert bool(state.mask.all())

"""
The model server on the real SmolLM2-135M-Instruct: the numerical properties trajflow relies on.

- Reported logprobs equal log_softmax(logits / T) from an independent full forward pass (the
  trainer recomputes exactly this).
- A request gets the same tokens (and logprobs within float noise) alone or batched with others,
  including when it joins a batch that is already decoding (padding / position bugs show here).
- The model's EOS ends a completion and is kept in output_ids.
"""

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

from trajflow_py.model_server.client import running_server

SMOLLM2 = Path(__file__).resolve().parents[2] / ".models" / "smollm2-135m-instruct"
pytestmark = pytest.mark.skipif(not (SMOLLM2 / "model.safetensors").exists(), reason="needs SmolLM2 (scripts/setup.sh)")

QUESTIONS = [
    "What is 12 + 30?",
    "Name a colour.",
    "Write one sentence about the sea, the wind and the old lighthouse keeper who lived alone on the rocks.",
    "Hi",
]


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(SMOLLM2)


@pytest.fixture(scope="module")
def prompts(tokenizer) -> list[list[int]]:
    chats = [[{"role": "user", "content": question}] for question in QUESTIONS]
    texts = [tokenizer.apply_chat_template(chat, add_generation_prompt=True, tokenize=False) for chat in chats]
    return [list(tokenizer(text)["input_ids"]) for text in texts]


@pytest.fixture(scope="module")
def client():
    with running_server(SMOLLM2, "--max-batch", "8") as process:
        yield process.client


@pytest.fixture(scope="module")
def reference_model():
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(SMOLLM2, dtype=torch.float32).eval()


def _logprobs(response: dict) -> list[float]:
    return [entry[0] for entry in response["meta_info"]["output_token_logprobs"]]


def test_logprobs_equal_log_softmax_of_an_independent_forward_pass(client, prompts, reference_model):
    for prompt, (temperature, top_p, seed) in zip(prompts[:2], [(0.7, 0.9, 1), (1.0, 1.0, 2)], strict=True):
        out = client.generate(prompt, max_new_tokens=16, temperature=temperature, top_p=top_p, sampling_seed=seed, no_stop_trim=True)
        ids = out["output_ids"]
        with torch.no_grad():
            logits = reference_model(input_ids=torch.tensor([prompt + ids[:-1]])).logits[0, len(prompt) - 1 :].float()
        expected = torch.log_softmax(logits / temperature, dim=-1)[torch.arange(len(ids)), torch.tensor(ids)]
        assert _logprobs(out) == pytest.approx(expected.tolist(), abs=1e-4)


def test_batched_results_equal_single_results(client, prompts):
    # Two long requests start together; two short ones join while they are decoding.
    plan = [(prompts[0], 24, 10), (prompts[2], 24, 11), (prompts[1], 8, 12), (prompts[3], 8, 13)]

    def run(prompt, tokens, seed):
        return client.generate(prompt, max_new_tokens=tokens, temperature=1.0, top_p=0.95, sampling_seed=seed, ignore_eos=True)

    alone = [run(*item) for item in plan]
    with ThreadPoolExecutor(len(plan)) as pool:
        first = [pool.submit(run, *item) for item in plan[:2]]
        time.sleep(1.0)
        assert not any(f.done() for f in first), "the first requests should still be decoding"
        joined = [pool.submit(run, *item) for item in plan[2:]]
        together = [f.result(timeout=120) for f in first + joined]

    for single, batched in zip(alone, together, strict=True):
        assert batched["output_ids"] == single["output_ids"]
        assert _logprobs(batched) == pytest.approx(_logprobs(single), abs=1e-4)


def test_eos_ends_the_completion_and_is_kept(client, prompts):
    out = client.generate(prompts[0], max_new_tokens=48, temperature=0.0, no_stop_trim=True)
    assert out["meta_info"]["finish_reason"] == {"type": "stop", "matched": 2}
    assert out["output_ids"][-1] == 2
    assert "<|im_end|>" not in out["text"]  # skip_special_tokens, as SGLang's default

"""
The supervised warm-up before RL (trainer/warmup.py): demonstrations rendered with the model's own
chat template, only assistant messages learned, bad files refused by line; a few steps lower the
loss on what they teach.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from temporalio.exceptions import ApplicationError
from transformers import AutoTokenizer

from test_trainer_support import tiny_model_dir
from trajflow_py.trainer.inputs import WarmupSettings
from trajflow_py.trainer.log import Logger
from trajflow_py.trainer.policy import load_model
from trajflow_py.trainer.warmup import Demonstration, DemoSequence, demo_sequence, read_demonstrations, warm_up

SMOLLM2 = Path(__file__).resolve().parents[2] / ".models" / "smollm2-135m-instruct"

CALL = '<tool_call>{"name":"calculator","arguments":{"expression":"123 * 456"}}</tool_call>'
DEMO = {
    "messages": [
        {"role": "system", "content": "Compute the answer. Use the calculator tool."},
        {"role": "user", "content": "What is 123 * 456?"},
        {"role": "assistant", "content": CALL},
        {"role": "tool", "content": "56088"},
        {"role": "assistant", "content": "56088"},
    ]
}


@pytest.mark.skipif(not SMOLLM2.exists(), reason="SmolLM2 is made by scripts/setup.sh")
def test_only_the_assistant_messages_are_learned_in_the_templates_own_rendering():
    tokenizer = AutoTokenizer.from_pretrained(SMOLLM2)
    sequence = demo_sequence(tokenizer, Demonstration.model_validate(DEMO))
    whole = tokenizer.apply_chat_template(DEMO["messages"], tokenize=False)
    assert sequence.ids == tokenizer(whole, add_special_tokens=False)["input_ids"]
    learned = [token for token, bit in zip(sequence.ids, sequence.learned, strict=True) if bit]
    # Each answer with the template's end of turn, which teaches the model to stop; no header, no prompt.
    assert tokenizer.decode(learned) == f"{CALL}<|im_end|>\n56088<|im_end|>\n"


def test_a_bad_line_is_refused_by_its_number(tmp_path: Path):
    file = tmp_path / "demos.jsonl"
    file.write_text(json.dumps(DEMO) + "\n" + json.dumps({"messages": [{"role": "user", "content": "hi"}]}) + "\n")
    with pytest.raises(ApplicationError, match="line 2: no assistant message to learn"):
        read_demonstrations(file)
    file.write_text(json.dumps(DEMO) + "\n\n{not json\n")
    with pytest.raises(ApplicationError, match="line 3: not JSON"):
        read_demonstrations(file)
    file.write_text(json.dumps({"messages": [{"role": "user"}]}) + "\n")
    with pytest.raises(ApplicationError, match="line 1: .*content"):
        read_demonstrations(file)
    file.write_text(json.dumps(DEMO) + "\n\n" + json.dumps(DEMO) + "\n")
    assert len(read_demonstrations(file)) == 2


def test_warm_up_steps_lower_the_loss_of_the_learned_tokens(tmp_path: Path):
    model = load_model(tiny_model_dir(tmp_path / "model"))
    torch.manual_seed(0)
    prompt, answer = torch.randint(0, 64, (12,)).tolist(), torch.randint(0, 64, (6,)).tolist()
    sequences = [DemoSequence(prompt + answer, [0] * len(prompt) + [1] * len(answer))]
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    settings = WarmupSettings(demonstrations="unused", steps=8, batch_size=2, learning_rate=1e-2)
    losses = warm_up(model, sequences, settings, Logger("test"))
    assert len(losses) == 8
    assert losses[-1] < losses[0] / 2
    assert any(not torch.equal(before[name], p) for name, p in model.named_parameters())

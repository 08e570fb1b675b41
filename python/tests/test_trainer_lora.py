"""
trainStep and preparePolicy with trainer.lora on the tiny Llama: every version is a peft adapter
of the base model, only the adapter trains, and a resume restores it exactly.
"""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from peft import PeftModel
from safetensors.torch import load_file
from temporalio.exceptions import ApplicationError
from test_trainer_step import RUN, activities_for, checkpoint, prepare_input, sampled_store, step_input
from transformers import AutoModelForCausalLM

from test_trainer_support import full_logprobs

LORA = {"rank": 4, "alpha": 8, "targetModules": ["q_proj", "v_proj"], "dropout": 0.0}
IDS = [5, 6, 7, 8, 9, 10, 11, 12]


def adapter_logprobs(model_dir, adapter_dir) -> list[float]:
    """The logprobs of IDS under the base model with the published adapter, loaded as a server would (peft, not the trainer)."""
    model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32), adapter_dir)
    return full_logprobs(model.eval(), IDS)


def test_version_0_is_an_adapter_that_changes_nothing_and_a_step_trains_only_the_adapter(data_dir, model_dir):
    activities = activities_for(data_dir, model_dir)
    activities.prepare_policy(prepare_input(lora=LORA))
    v0 = checkpoint(data_dir, 0)
    assert (v0 / "adapter_config.json").is_file()
    assert not (v0 / "model.safetensors").exists()
    assert json.loads((v0 / "adapter_config.json").read_text())["base_model_name_or_path"] == str(model_dir)
    base = full_logprobs(AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32), IDS)
    assert adapter_logprobs(model_dir, v0) == pytest.approx(base, abs=1e-6)

    groups = sampled_store(data_dir, model_dir)
    metrics = activities.train_step(step_input(0, groups, lora=LORA))["metrics"]
    v1 = checkpoint(data_dir, 1)
    before, after = load_file(v0 / "adapter_model.safetensors"), load_file(v1 / "adapter_model.safetensors")
    assert sorted(before) == sorted(after)
    assert all("lora_A" in name or "lora_B" in name for name in after)
    assert all(tensor.dtype == torch.float32 for tensor in after.values())
    assert any(not torch.equal(before[name], after[name]) for name in before)
    assert not (v1 / "model.safetensors").exists()
    # The adapter moved the policy; the step's own check of the sampler's logprobs saw the base's.
    assert max(abs(a - b) for a, b in zip(adapter_logprobs(model_dir, v1), base, strict=True)) > 1e-6
    assert metrics["logprobDiffMax"] < 1e-4


@pytest.mark.parametrize("precision", ["float32", "bfloat16"])
def test_a_restored_adapter_trains_as_the_held_one(data_dir, model_dir, tmp_path, precision):
    held = activities_for(data_dir, model_dir)
    held.prepare_policy(prepare_input(lora=LORA))
    groups = sampled_store(data_dir, model_dir)
    held.train_step(step_input(0, groups, lora=LORA, precision=precision))
    copy = tmp_path / "copy"
    shutil.copytree(data_dir, copy)
    held.train_step(step_input(1, groups, lora=LORA, precision=precision))
    activities_for(copy, model_dir).train_step(step_input(1, groups, lora=LORA, precision=precision))
    in_memory = load_file(checkpoint(data_dir, 2) / "adapter_model.safetensors")
    restored = load_file(copy / "runs" / RUN / "checkpoints" / "v000002" / "adapter_model.safetensors")
    for name, tensor in in_memory.items():
        torch.testing.assert_close(restored[name], tensor, atol=1e-7, rtol=0, msg=name)


def test_the_kl_reference_is_the_base_model_and_a_changed_adapter_setting_is_refused(data_dir, model_dir):
    activities = activities_for(data_dir, model_dir)
    activities.prepare_policy(prepare_input(lora=LORA))
    groups = sampled_store(data_dir, model_dir)
    loss = {"epsilon": 0.2, "epsilonHigh": 0.28, "beta": 0.1, "kl": "k3", "aggregation": "token-mean"}
    metrics = activities.train_step(step_input(0, groups, lora=LORA, loss=loss))["metrics"]
    # Version 0's adapter is zero: the policy being trained is the reference at step 0.
    assert metrics["refKl"] == pytest.approx(0, abs=1e-9)

    other = activities_for(data_dir, model_dir)  # nothing held: it loads v1 from disk
    with pytest.raises(ApplicationError, match=r"holds an adapter of rank 4.*trainer\.lora says rank 8"):
        other.train_step(step_input(1, groups, lora={**LORA, "rank": 8}))
    with pytest.raises(ApplicationError, match=r"holds a LoRA adapter, but the run's trainer\.lora is not set"):
        other.train_step(step_input(1, groups))

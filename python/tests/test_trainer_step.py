"""
trainStep and preparePolicy on a tiny random Llama and a hand-made store: the activity functions
called directly (no Temporal server).
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from temporalio.exceptions import ApplicationError
from transformers import AutoModelForCausalLM

from test_trainer_support import (
    COMPATIBILITY,
    TEMPERATURE,
    full_logprobs,
    group_json,
    settings_json,
    trainer_config,
    turn_json,
    write_trajectory,
)
from trajflow_py.trainer.activities import TrainerActivities
from trajflow_py.trainer.failures import CORRUPT_STORED_FILE
from trajflow_py.trainer.files import MANIFEST_FILE, write_json_atomically
from trajflow_py.trainer.log import Logger
from trajflow_py.trainer.settings import WorkerSettings

RUN = "run-1"


def activities_for(data_dir: Path, model_dir: Path) -> TrainerActivities:
    settings = WorkerSettings.model_validate(settings_json(data_dir, model_dir))
    return TrainerActivities(settings, Logger("test"))


def strict_json(text: str):
    """JSON as JavaScript's JSON.parse takes it: no NaN, no Infinity."""

    def refuse(constant):
        raise ValueError(f"{constant} in JSON")

    return json.loads(text, parse_constant=refuse)


def prepare_input(**trainer) -> dict:
    return {"runId": RUN, "trainer": trainer_config(**trainer), "temperature": TEMPERATURE, "compatibility": COMPATIBILITY, "env": {}, "agent": {}}


def step_input(step: int, groups: list[dict], **trainer) -> dict:
    return {
        "runId": RUN,
        "step": step,
        "baseVersion": step,
        "groups": groups,
        "trainer": trainer_config(**trainer),
        "temperature": TEMPERATURE,
        "runStartedAt": 0,
        "compatibility": COMPATIBILITY,
    }


def sampled_store(data_dir: Path, version_dir: Path, version: int = 0, shift=0.0, versions=None) -> list[dict]:
    """
    One group of two trajectories whose completions were "sampled" by `version_dir` at `version`:
    behaviour logprobs from a separate full forward pass of that model (minus `shift`).
    Trajectory a (reward 1, solved) has two turns in one context; b (reward 0) has one.
    """
    model = AutoModelForCausalLM.from_pretrained(version_dir, dtype=torch.float32)
    plans = {"a": ([[5, 6, 7], [11, 12]], [[8, 9, 10], [13, 14]], 1.0), "b": ([[5, 6, 7]], [[20, 21, 22, 23]], 0.0)}
    for trajectory_id, (deltas, completions, reward) in plans.items():
        ids: list[int] = []
        turns = []
        for turn, (delta, completion) in enumerate(zip(deltas, completions, strict=True)):
            start = len(ids) + len(delta)
            ids += delta + completion
            logprobs = full_logprobs(model, ids)[start - 1 : start - 1 + len(completion)]
            token_versions = versions(trajectory_id, turn, len(completion)) if versions else [version] * len(completion)
            turns.append(turn_json(trajectory_id, turn, delta, completion, [lp - shift for lp in logprobs], token_versions))
        write_trajectory(data_dir, RUN, trajectory_id, turns, reward)
    return [group_json("g0", ["a", "b"], [1.0, 0.0], [True, False])]


def checkpoint(data_dir: Path, version: int) -> Path:
    return data_dir / "runs" / RUN / "checkpoints" / f"v{version:06d}"


def test_prepare_publishes_version_0_as_a_copy_of_the_model(data_dir, model_dir):
    activities = activities_for(data_dir, model_dir)
    assert activities.prepare_policy(prepare_input()) == {"version": 0, "step": 0}
    v0 = checkpoint(data_dir, 0)
    assert sorted(p.name for p in v0.iterdir()) == sorted([MANIFEST_FILE, *(p.name for p in model_dir.iterdir())])
    assert (v0 / "model.safetensors").read_bytes() == (model_dir / "model.safetensors").read_bytes()
    assert not any(p.name.endswith(".partial") for p in v0.parent.iterdir())
    # With checkpoints published, it reports the latest (a resumed run).
    shutil.copytree(v0, checkpoint(data_dir, 3))
    assert activities.prepare_policy(prepare_input()) == {"version": 3, "step": 3}
    # Its data goes on after the last group the last step took (more than batchGroups with replacement).
    last = {"version": 3, "metrics": {"groupIds": [f"{RUN}.g00007", f"{RUN}.g00009", f"{RUN}.g00008"]}}
    write_json_atomically(data_dir / "runs" / RUN / "train" / "step-000002.json", last)
    assert activities.prepare_policy(prepare_input()) == {"version": 3, "step": 3, "nextGroupIndex": 10}


def test_train_step_publishes_v1_records_metrics_and_is_idempotent(data_dir, model_dir):
    activities = activities_for(data_dir, model_dir)
    activities.prepare_policy(prepare_input())
    groups = sampled_store(data_dir, checkpoint(data_dir, 0))
    output = activities.train_step(step_input(0, groups))

    assert output["version"] == 1
    v1 = checkpoint(data_dir, 1)
    for name in ("config.json", "model.safetensors", "tokenizer.json", "chat_template.jinja", "trainer-state/.metadata"):
        assert (v1 / name).is_file(), name
    trained = AutoModelForCausalLM.from_pretrained(v1)
    before, after = load_file(checkpoint(data_dir, 0) / "model.safetensors"), load_file(v1 / "model.safetensors")
    assert any(not torch.equal(before[name], after[name]) for name in before)
    assert sum(p.numel() for p in trained.parameters()) > 0

    run = data_dir / "runs" / RUN / "train"
    lines = (run / "metrics.jsonl").read_text().splitlines()
    assert len(lines) == 1
    # Sealed records (trajflow_py/trainer/files.py): the record is the body.
    metrics = strict_json(lines[0])["body"]
    assert strict_json((run / "step-000000.json").read_text())["body"] == output == {"version": 1, "metrics": metrics}
    assert metrics["step"] == 0
    assert metrics["groups"] == 1
    assert metrics["groupIds"] == ["g0"]
    assert metrics["trajectories"] == 2
    assert metrics["tokens"] == 9
    assert metrics["sequences"] == 2
    assert metrics["stalenessHistogram"] == {"0": 9}
    assert metrics["stalenessMax"] == 0
    # The step's rate as the workflow handed it (trainer.learningRateSchedule moves it there).
    assert metrics["learningRate"] == 1e-3
    assert metrics["successRate"] == 0.5
    assert metrics["rewardMean"] == 0.5
    assert metrics["trajectoryTime"] == {"totalMs": 10, "generationMs": 6, "environmentMs": 3, "waitingMs": 1}
    assert metrics["elapsedS"] > 0
    assert "refKl" not in metrics
    # Sampled by the very weights trained, in a separate pass: the trainer's logprobs agree.
    assert metrics["logprobTokensCompared"] == 9
    assert metrics["logprobDiffMax"] < 1e-5
    assert metrics["logprobMismatchKl"] < 1e-9
    assert metrics["clipFraction"] == 0
    assert metrics["gradNorm"] > 0

    # A retry finds the result and returns it without training (no second metrics line, no v2).
    assert activities.train_step(step_input(0, groups)) == output
    assert len((run / "metrics.jsonl").read_text().splitlines()) == 1
    assert not checkpoint(data_dir, 2).exists()


def test_a_corrupt_checkpoint_fails_the_step_for_good_naming_the_file(data_dir, model_dir):
    # (A corrupt turn or summary skips its group instead: test_trainer_corrupt_group.py.)
    activities = activities_for(data_dir, model_dir)
    activities.prepare_policy(prepare_input())
    groups = sampled_store(data_dir, checkpoint(data_dir, 0))
    weights = checkpoint(data_dir, 0) / "model.safetensors"
    intact = weights.read_bytes()
    weights.write_bytes(intact[:-1] + bytes([intact[-1] ^ 1]))
    with pytest.raises(ApplicationError) as refused:
        activities.train_step(step_input(0, groups))
    assert refused.value.type == CORRUPT_STORED_FILE
    assert refused.value.non_retryable
    assert f"corrupt checkpoint {checkpoint(data_dir, 0)}: model.safetensors: checksum mismatch" in refused.value.message
    assert not checkpoint(data_dir, 1).exists()


def test_the_update_follows_the_advantages(data_dir, model_dir):
    activities = activities_for(data_dir, model_dir)
    activities.prepare_policy(prepare_input())
    groups = sampled_store(data_dir, checkpoint(data_dir, 0))
    activities.train_step(step_input(0, groups, learningRate=1e-2))
    v0 = AutoModelForCausalLM.from_pretrained(checkpoint(data_dir, 0))
    v1 = AutoModelForCausalLM.from_pretrained(checkpoint(data_dir, 1))
    # a (reward 1) sampled [8, 9, 10] after [5, 6, 7]; b (reward 0) sampled [20, 21, 22, 23].
    good, bad = [5, 6, 7, 8, 9, 10], [5, 6, 7, 20, 21, 22, 23]
    assert sum(full_logprobs(v1, good)[2:]) > sum(full_logprobs(v0, good)[2:])
    assert sum(full_logprobs(v1, bad)[2:]) < sum(full_logprobs(v0, bad)[2:])


def test_each_step_trains_at_the_rate_its_input_gives(data_dir, model_dir):
    # The trainer stays in memory from one step to the next, where a schedule changes the rate.
    activities = activities_for(data_dir, model_dir)
    activities.prepare_policy(prepare_input())
    groups = sampled_store(data_dir, checkpoint(data_dir, 0))
    activities.train_step(step_input(0, groups, learningRate=1e-2))
    metrics = activities.train_step(step_input(1, groups, learningRate=1e-9))["metrics"]
    assert metrics["tokens"] > 0
    assert metrics["learningRate"] == 1e-9
    v1, v2 = load_file(checkpoint(data_dir, 1) / "model.safetensors"), load_file(checkpoint(data_dir, 2) / "model.safetensors")
    assert max((v2[k].float() - v1[k].float()).abs().max().item() for k in v1) < 1e-6


def test_agreement_reads_tokens_of_the_base_version_and_every_version_apart(data_dir, model_dir):
    activities = activities_for(data_dir, model_dir)
    activities.prepare_policy(prepare_input())
    # Behaviour logprobs 0.1 below the model's; b's tokens claim version 7: not in the base version's.
    versions = lambda trajectory, turn, n: [0] * n if trajectory == "a" else [7] * n  # noqa: E731
    groups = sampled_store(data_dir, checkpoint(data_dir, 0), shift=0.1, versions=versions)
    metrics = activities.train_step(step_input(0, groups))["metrics"]
    assert metrics["logprobComparedVersion"] == 0
    assert metrics["logprobTokensCompared"] == 5
    assert metrics["logprobDiffMean"] == pytest.approx(0.1, abs=1e-5)
    assert metrics["logprobDiffMax"] == pytest.approx(0.1, abs=1e-5)
    # d = trainer - behaviour = 0.1: k3 = exp(0.1) - 1 - 0.1
    assert metrics["logprobMismatchKl"] == pytest.approx(math.exp(0.1) - 1.1, rel=1e-3)
    assert metrics["stalenessHistogram"] == {"-7": 4, "0": 5}
    by_version = metrics["logprobMismatchByVersion"]
    assert [(row["version"], row["tokens"]) for row in by_version] == [(0, 5), (7, 4)]
    for row in by_version:
        assert row["diffMean"] == pytest.approx(0.1, abs=1e-5)
        assert row["diffMax"] == pytest.approx(0.1, abs=1e-5)
        assert row["mismatchKl"] == pytest.approx(math.exp(0.1) - 1.1, rel=1e-3)


def test_agreement_is_reported_on_a_step_whose_tokens_an_older_version_sampled(data_dir, model_dir):
    activities = activities_for(data_dir, model_dir)
    activities.prepare_policy(prepare_input())
    groups = sampled_store(data_dir, checkpoint(data_dir, 0))
    activities.train_step(step_input(0, groups, learningRate=1e-2))
    # Step 1 trains v1 on tokens v0 sampled: none of the base version, all of them compared as v0's.
    metrics = activities.train_step(step_input(1, groups, learningRate=1e-2))["metrics"]
    assert metrics["logprobComparedVersion"] == 1
    assert metrics["logprobTokensCompared"] == 0
    assert metrics["logprobDiffMax"] == 0
    [row] = metrics["logprobMismatchByVersion"]
    assert row["version"] == 0
    assert row["tokens"] == 9
    # What v1 moved from v0, measured: v1's logprobs of the tokens against v0's.
    v1 = AutoModelForCausalLM.from_pretrained(checkpoint(data_dir, 1))
    v0 = AutoModelForCausalLM.from_pretrained(checkpoint(data_dir, 0))
    good = [5, 6, 7, 8, 9, 10]
    moved = max(abs(a - b) for a, b in zip(full_logprobs(v1, good)[2:], full_logprobs(v0, good)[2:], strict=True))
    assert 1e-4 < moved <= row["diffMax"] + 1e-5


def test_tis_weighs_the_loss_by_the_capped_behaviour_ratio(data_dir, model_dir):
    # Behaviour logprobs 0.1 below the trainer's: every token's behaviour ratio is e^0.1.
    # GRPO gives a (5 tokens) +1 and b (4 tokens) -1, so the token-mean loss is -w / 9 at the first
    # minibatch (the trainer's ratio to itself is 1).
    def loss_with(tis, tmp):
        data = tmp / "data"
        activities = activities_for(data, model_dir)
        activities.prepare_policy(prepare_input())
        groups = sampled_store(data, checkpoint(data, 0), shift=0.1)
        loss = {"epsilon": 0.2, "epsilonHigh": 0.28, "beta": 0, "kl": "k3", "aggregation": "token-mean", **tis}
        return activities.train_step(step_input(0, groups, loss=loss))["metrics"], data

    plain, plain_dir = loss_with({}, data_dir / "plain")
    uncapped, uncapped_dir = loss_with({"tis": {"cap": 2.0}}, data_dir / "uncapped")
    capped, _ = loss_with({"tis": {"cap": 1.05}}, data_dir / "capped")
    assert "tisWeightMean" not in plain
    assert uncapped["tisWeightMean"] == pytest.approx(math.exp(0.1), abs=1e-4)
    assert uncapped["tisCappedFraction"] == 0
    assert uncapped["loss"] == pytest.approx(-math.exp(0.1) / 9, abs=1e-4)
    assert capped["tisWeightMean"] == pytest.approx(1.05, abs=1e-6)
    assert capped["tisCappedFraction"] == 1
    assert capped["loss"] == pytest.approx(-1.05 / 9, abs=1e-4)
    # Below the cap, the weight and the ratio to the sampler are the same correction: the same update.
    assert plain["loss"] == pytest.approx(uncapped["loss"], abs=1e-5)
    plain_v1, tis_v1 = load_file(checkpoint(plain_dir, 1) / "model.safetensors"), load_file(checkpoint(uncapped_dir, 1) / "model.safetensors")
    assert all(torch.allclose(plain_v1[k], tis_v1[k], atol=1e-6) for k in plain_v1)


def test_agreement_is_measured_before_the_update_with_several_minibatches(data_dir, model_dir):
    activities = activities_for(data_dir, model_dir)
    activities.prepare_policy(prepare_input())
    groups = sampled_store(data_dir, checkpoint(data_dir, 0))
    metrics = activities.train_step(step_input(0, groups, optimizerStepsPerBatch=2, learningRate=5e-2))["metrics"]
    assert metrics["logprobTokensCompared"] == 9
    assert metrics["logprobDiffMax"] < 1e-5
    # The second minibatch trained on moved weights: its ratios are off 1 (that is measured too).
    assert metrics["approxKl"] > 1e-6


@pytest.mark.parametrize("precision", ["float32", "bfloat16"])
def test_held_trainer_and_a_restored_one_publish_the_same_next_version(data_dir, model_dir, tmp_path, precision):
    """With bfloat16, v1's published weights are rounded: only its float32 master weights restore the held trainer."""
    held = activities_for(data_dir, model_dir)
    held.prepare_policy(prepare_input())
    groups = sampled_store(data_dir, checkpoint(data_dir, 0))
    held.train_step(step_input(0, groups, precision=precision))
    copy = tmp_path / "copy"
    shutil.copytree(data_dir, copy)
    held.train_step(step_input(1, groups, precision=precision))  # from the weights and AdamW state in memory
    activities_for(copy, model_dir).train_step(step_input(1, groups, precision=precision))  # from checkpoint v1 and its trainer state
    in_memory = load_file(checkpoint(data_dir, 2) / "model.safetensors")
    restored = load_file(copy / "runs" / RUN / "checkpoints" / "v000002" / "model.safetensors")
    for name, tensor in in_memory.items():
        assert torch.allclose(tensor, restored[name], atol=1e-6), name
    # A fresh AdamW at v1 would take a different second step: the saved state matters.
    assert any(not torch.equal(tensor, load_file(checkpoint(data_dir, 1) / "model.safetensors")[name]) for name, tensor in in_memory.items())


def test_a_step_with_every_group_skipped_publishes_the_same_weights(data_dir, model_dir):
    activities = activities_for(data_dir, model_dir)
    activities.prepare_policy(prepare_input())
    sampled_store(data_dir, checkpoint(data_dir, 0))
    solved = [group_json("g0", ["a", "b"], [1.0, 1.0], [True, True])]
    output = activities.train_step(step_input(0, solved, groupFilter="mixed-outcomes"))
    metrics = output["metrics"]
    assert output["version"] == 1
    assert metrics["groupsSkipped"] == 1
    assert metrics["tokens"] == 0
    assert metrics["loss"] == 0
    assert metrics["logprobTokensCompared"] == 0
    assert metrics["logprobDiffMax"] == 0
    assert metrics["logprobMismatchByVersion"] == []
    assert "trajectoryTime" not in metrics
    assert metrics["trajectories"] == 2
    before, after = load_file(checkpoint(data_dir, 0) / "model.safetensors"), load_file(checkpoint(data_dir, 1) / "model.safetensors")
    assert before.keys() == after.keys()
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_a_batch_without_an_advantage_takes_no_optimizer_step(data_dir, model_dir):
    activities = activities_for(data_dir, model_dir)
    activities.prepare_policy(prepare_input())
    groups = sampled_store(data_dir, checkpoint(data_dir, 0))
    activities.train_step(step_input(0, groups, learningRate=1e-2))
    # Every episode solved: AdamW's momentum from step 0 would still move the weights.
    solved = [group_json("g0", ["a", "b"], [1.0, 1.0], [True, True])]
    metrics = activities.train_step(step_input(1, solved, learningRate=1e-2))["metrics"]
    assert metrics["tokens"] == 0
    assert metrics["loss"] == 0
    assert metrics["groupsSkipped"] == 0
    # Its tokens are still compared with the sampler's (v0's, from v1).
    assert [(row["version"], row["tokens"]) for row in metrics["logprobMismatchByVersion"]] == [(0, 9)]
    before, after = load_file(checkpoint(data_dir, 1) / "model.safetensors"), load_file(checkpoint(data_dir, 2) / "model.safetensors")
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_kl_penalty_reports_ref_kl_and_bfloat16_publishes_bfloat16(data_dir, model_dir):
    activities = activities_for(data_dir, model_dir)
    activities.prepare_policy(prepare_input())
    groups = sampled_store(data_dir, checkpoint(data_dir, 0))
    loss = {"epsilon": 0.2, "epsilonHigh": 0.28, "beta": 0.1, "kl": "k3", "aggregation": "sequence-mean-token-mean"}
    metrics = activities.train_step(step_input(0, groups, loss=loss, precision="bfloat16"))["metrics"]
    # The reference is v0 itself, in the same precision: no divergence yet.
    assert metrics["refKl"] == pytest.approx(0, abs=1e-6)
    # bfloat16 logprobs are further from the float32 sampler's, but still close.
    assert 0 < metrics["logprobDiffMax"] < 0.5
    assert json.loads((checkpoint(data_dir, 1) / "config.json").read_text())["dtype"] == "bfloat16"
    assert all(t.dtype == torch.bfloat16 for t in load_file(checkpoint(data_dir, 1) / "model.safetensors").values())


def test_a_worker_of_another_build_refuses_retryably(data_dir, model_dir):
    activities = activities_for(data_dir, model_dir)
    other = {**step_input(0, []), "compatibility": {**COMPATIBILITY, "code": "build-2"}}
    with pytest.raises(ApplicationError) as refused:
        activities.train_step(other)
    assert refused.value.type == "WorkerMismatch"
    assert not refused.value.non_retryable
    assert "refuses run run-1: code differs (run build-2, worker build-1)" in refused.value.message


def test_format_warmup_and_malformed_inputs_are_refused_for_good(data_dir, model_dir):
    activities = activities_for(data_dir, model_dir)
    with pytest.raises(ApplicationError) as warmup:
        activities.prepare_policy(prepare_input(formatWarmupSteps=3))
    assert warmup.value.type == "InvalidConfig"
    assert warmup.value.non_retryable
    bad = step_input(0, [])
    bad["trainer"]["loss"]["epsilon"] = 1.5
    with pytest.raises(ApplicationError) as malformed:
        activities.train_step(bad)
    assert malformed.value.type == "InvalidConfig"
    assert "trainer.loss.epsilon" in malformed.value.message
    assert not checkpoint(data_dir, 0).exists()

"""
The trainer on 2 gloo ranks (torchrun, FSDP2) against one process, on the tiny Llama and a
hand-made store: the same weights after a step, and a run resumes on 1 process from the optimizer
state 2 ranks wrote (torch.distributed.checkpoint reshards it).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from test_trainer_step import RUN, activities_for, checkpoint, prepare_input, sampled_store, step_input

TESTS = Path(__file__).parent


def train_on_ranks(processes: int, data_dir: Path, model_dir: Path, steps: list[dict]) -> None:
    steps_file = data_dir.parent / f"steps-{processes}.json"
    steps_file.write_text(json.dumps(steps))
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={processes}"]
    command += [str(TESTS / "distributed_steps.py"), str(data_dir), str(model_dir), str(steps_file)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS.parent), str(TESTS)]), "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, (done.stdout + done.stderr)[-6000:]


def assert_same_weights(a: Path, b: Path) -> None:
    """The published weights, full or the LoRA adapter."""
    name = "adapter_model.safetensors" if (a / "adapter_model.safetensors").exists() else "model.safetensors"
    left, right = load_file(a / name), load_file(b / name)
    assert left.keys() == right.keys()
    for name, tensor in left.items():
        torch.testing.assert_close(right[name], tensor, atol=2e-6, rtol=1e-4, msg=name)


@pytest.mark.parametrize("lora", [None, {"rank": 4, "alpha": 8, "targetModules": ["q_proj", "v_proj"], "dropout": 0.0}], ids=["full", "lora"])
def test_two_ranks_train_as_one_process_and_a_resume_on_one_reads_their_state(data_dir, model_dir, tmp_path, lora):
    single = activities_for(data_dir, model_dir)
    single.prepare_policy(prepare_input(lora=lora))
    groups = sampled_store(data_dir, model_dir)  # version 0 is the base model, full copy or zero adapter
    ranked = tmp_path / "ranked" / "data"
    shutil.copytree(data_dir, ranked)
    # Packs of one sequence: the two ranks each run one of the two trajectories.
    steps = [step_input(step, groups, microBatchTokens=1, lora=lora) for step in (0, 1)]

    single.train_step(steps[0])
    single.train_step(steps[1])
    train_on_ranks(2, ranked, model_dir, steps[:1])
    ranked_checkpoint = ranked / "runs" / RUN / "checkpoints"
    # Each rank wrote its slice of the optimizer state; the leader alone the published weights.
    assert sorted(p.name for p in (ranked_checkpoint / "v000001" / "trainer-state").glob("*.distcp")) == ["__0_0.distcp", "__1_0.distcp"]
    assert_same_weights(checkpoint(data_dir, 1), ranked_checkpoint / "v000001")
    metrics = json.loads((ranked / "runs" / RUN / "train" / "step-000000.json").read_text())["body"]["metrics"]
    expected = json.loads((data_dir / "runs" / RUN / "train" / "step-000000.json").read_text())["body"]["metrics"]
    assert metrics["tokens"] == expected["tokens"] == 9
    assert metrics["sequences"] == 2
    # AdamW hides a gradient's scale from the weights; the norm and the loss show it.
    for name in ("gradNorm", "loss", "approxKl", "logprobDiffMax"):
        assert metrics[name] == pytest.approx(expected[name], rel=1e-5, abs=1e-6), name

    # Step 1 on one process from the 2 ranks' v1: AdamW's moments come back resharded.
    activities_for(ranked, model_dir).train_step(steps[1])
    assert_same_weights(checkpoint(data_dir, 2), ranked_checkpoint / "v000002")


def test_ranks_that_torchrun_starts_again_meet_again():
    """torchrun keeps its store across restarts; the ranks of an attempt must not read the addresses of the last one's."""
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2", "--max-restarts=1", str(TESTS / "ranks_meet_again.py")]
    env = {**os.environ, "PYTHONPATH": str(TESTS.parent), "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    lines = sorted(line for line in done.stdout.splitlines() if line.startswith("attempt"))
    assert lines == [f"attempt {attempt} rank {rank} summed 2" for attempt in (0, 1) for rank in (0, 1)]

"""
A train step whose batch holds a group with a corrupt stored file (a turn or a trajectory summary),
on a tiny random Llama and a hand-made store: that group is skipped, logged at error level with
the file and the reason, and counted as groupsCorrupt; the rest of the batch trains as usual.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from test_trainer_support import COMPATIBILITY, TEMPERATURE, group_json, settings_json, trainer_config, turn_json, write_trajectory
from trajflow_py.trainer.activities import TrainerActivities
from trajflow_py.trainer.log import Logger
from trajflow_py.trainer.settings import WorkerSettings

RUN = "run-1"
CORRUPT_GROUP_MESSAGE = "skipping a group with a corrupt stored file: it is not trained"


@pytest.fixture
def activities(tmp_path, model_dir) -> TrainerActivities:
    """The trainer activities on a fresh data directory, with version 0 of the run published."""
    settings = WorkerSettings.model_validate(settings_json(tmp_path / "data", model_dir))
    activities = TrainerActivities(settings, Logger("test"))
    prepare = {"runId": RUN, "trainer": trainer_config(), "temperature": TEMPERATURE, "compatibility": COMPATIBILITY, "env": {}, "agent": {}}
    activities.prepare_policy(prepare)
    return activities


def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


def store_group(data: Path, group_id: str, completion_length: int) -> dict:
    """A group of two one-turn trajectories, one solved and one not, each sampling `completion_length` tokens."""
    trajectory_ids = [f"{group_id}.t0", f"{group_id}.t1"]
    for trajectory_id, reward in zip(trajectory_ids, [1.0, 0.0], strict=True):
        completion = [20 + i for i in range(completion_length)]
        turn = turn_json(trajectory_id, 0, [5, 6, 7], completion, [-1.5] * completion_length, [0] * completion_length)
        write_trajectory(data, RUN, trajectory_id, [turn], reward)
    return group_json(group_id, trajectory_ids, [1.0, 0.0], [True, False])


def trajectory_dir(data: Path, trajectory_id: str) -> Path:
    return data / "runs" / RUN / "trajectories" / trajectory_id


def cut_short(file: Path) -> None:
    data = file.read_bytes()
    file.write_bytes(data[: len(data) // 2])


def step_input(groups: list[dict]) -> dict:
    return {
        "runId": RUN,
        "step": 0,
        "baseVersion": 0,
        "groups": groups,
        "trainer": trainer_config(learningRate=1e-2),
        "temperature": TEMPERATURE,
        "compatibility": COMPATIBILITY,
    }


def weights(data: Path, version: int) -> dict[str, torch.Tensor]:
    return load_file(data / "runs" / RUN / "checkpoints" / f"v{version:06d}" / "model.safetensors")


def corrupt_group_logs(caplog) -> list[dict]:
    return [{"level": r.levelno, **r.fields} for r in caplog.records if r.getMessage() == CORRUPT_GROUP_MESSAGE]


def test_a_group_with_a_damaged_turn_is_skipped_logged_and_the_healthy_group_trained(activities, tmp_path, caplog):
    data = data_dir(tmp_path)
    # 3 sampled tokens per trajectory in the healthy group, 5 in the damaged one: the trained token count tells them apart.
    healthy = store_group(data, "g-healthy", 3)
    damaged = store_group(data, "g-damaged", 5)
    damaged_turn = trajectory_dir(data, "g-damaged.t1") / "turn-000000.json"
    cut_short(damaged_turn)

    with caplog.at_level(logging.INFO):
        output = activities.train_step(step_input([damaged, healthy]))

    metrics = output["metrics"]
    assert output["version"] == 1
    assert metrics["groups"] == 2
    assert metrics["groupIds"] == ["g-damaged", "g-healthy"]
    assert metrics["groupsCorrupt"] == 1
    assert metrics["groupsSkipped"] == 0
    # Only the healthy group's two trajectories were trained: one sequence of 3 sampled tokens each.
    assert metrics["sequences"] == 2
    assert metrics["tokens"] == 6
    assert metrics["stalenessHistogram"] == {"0": 6}
    assert metrics["gradNorm"] > 0
    before, after = weights(data, 0), weights(data, 1)
    assert any(not torch.equal(before[name], after[name]) for name in before)

    [line] = corrupt_group_logs(caplog)
    assert line["level"] == logging.ERROR
    assert line["runId"] == RUN
    assert line["step"] == 0
    assert line["groupId"] == "g-damaged"
    assert line["file"] == str(damaged_turn)
    assert line["kind"] == "record"
    assert line["reason"].startswith("truncated: ")


def test_a_group_with_a_damaged_summary_is_skipped_and_with_no_group_left_the_same_weights_are_published(activities, tmp_path, caplog):
    data = data_dir(tmp_path)
    damaged = store_group(data, "g-damaged", 3)
    damaged_summary = trajectory_dir(data, "g-damaged.t0") / "summary.json"
    cut_short(damaged_summary)

    with caplog.at_level(logging.INFO):
        output = activities.train_step(step_input([damaged]))

    metrics = output["metrics"]
    assert output["version"] == 1
    assert metrics["groupsCorrupt"] == 1
    assert metrics["groupsSkipped"] == 0
    assert metrics["sequences"] == 0
    assert metrics["tokens"] == 0
    assert metrics["gradNorm"] == 0
    assert "trajectoryTime" not in metrics
    before, after = weights(data, 0), weights(data, 1)
    assert before.keys() == after.keys()
    assert all(torch.equal(before[k], after[k]) for k in before)
    [line] = corrupt_group_logs(caplog)
    assert line["level"] == logging.ERROR
    assert line["groupId"] == "g-damaged"
    assert line["file"] == str(damaged_summary)
    assert line["reason"].startswith("truncated: ")

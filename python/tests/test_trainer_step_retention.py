"""trainStep's checkpoint retention and disk-space check on a tiny random Llama (no Temporal server)."""

from __future__ import annotations

import pytest
from test_trainer_step import RUN, activities_for, checkpoint, prepare_input, sampled_store, step_input

from trajflow_py.trainer import retention
from trajflow_py.trainer.files import DiskFullError, write_json_atomically
from trajflow_py.trainer.layout import RunLayout
from trajflow_py.trainer.retention import published_versions

RETENTION = {"checkpoints": {"keepLast": 1, "keepEvery": 0}, "maxStaleness": 0}


def test_steps_delete_what_retention_no_longer_keeps(data_dir, model_dir):
    activities = activities_for(data_dir, model_dir)
    activities.prepare_policy(prepare_input(**RETENTION))
    groups = sampled_store(data_dir, checkpoint(data_dir, 0))
    run = RunLayout(data_dir, RUN)
    for step in range(4):
        activities.train_step({**step_input(step, groups, **RETENTION), "evalEverySteps": 2})
    # v2 awaits its evaluation; v1 and v3 are gone; v0 (the reference) and v4 (the newest) stay.
    assert published_versions(run) == [0, 2, 4]
    assert sorted(p.name for p in run.checkpoints_dir.iterdir()) == ["v000000", "v000002", "v000004"]
    write_json_atomically(run.evaluation_file(2), {"version": 2})
    activities.train_step({**step_input(4, groups, **RETENTION), "evalEverySteps": 2})
    # v2 evaluated now goes; v4 awaits its own.
    assert published_versions(run) == [0, 4, 5]
    # The newest still holds what a resume reads: its optimizer state.
    assert (checkpoint(data_dir, 5) / "trainer-state" / ".metadata").is_file()


def test_without_retention_in_the_input_every_version_is_kept(data_dir, model_dir):
    activities = activities_for(data_dir, model_dir)
    activities.prepare_policy(prepare_input())
    groups = sampled_store(data_dir, checkpoint(data_dir, 0))
    for step in range(3):
        activities.train_step(step_input(step, groups))
    assert published_versions(RunLayout(data_dir, RUN)) == [0, 1, 2, 3]


def test_a_step_the_disk_cannot_hold_fails_before_training(data_dir, model_dir, monkeypatch):
    activities = activities_for(data_dir, model_dir)
    activities.prepare_policy(prepare_input())
    groups = sampled_store(data_dir, checkpoint(data_dir, 0))
    monkeypatch.setattr(retention, "disk_free_bytes", lambda _folder: 10)
    with pytest.raises(DiskFullError) as raised:
        activities.train_step(step_input(0, groups))
    assert str(RunLayout(data_dir, RUN).checkpoints_dir) in str(raised.value)
    assert "10 bytes" in str(raised.value)
    assert not checkpoint(data_dir, 1).exists()
    assert not (data_dir / "runs" / RUN / "train" / "step-000000.json").exists()
    # Space freed: the retry trains.
    monkeypatch.undo()
    assert activities.train_step(step_input(0, groups))["version"] == 1

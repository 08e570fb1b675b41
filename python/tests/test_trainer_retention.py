"""Checkpoint retention (trainer/retention.py) over folders of tiny fake versions, and the disk-space check."""

from __future__ import annotations

from pathlib import Path

import pytest

from trajflow_py.trainer.files import DiskFullError
from trajflow_py.trainer.layout import RunLayout
from trajflow_py.trainer.retention import RetentionPolicy, delete_checkpoint, ensure_room_for, prune_checkpoints, published_versions


def publish_fake(run: RunLayout, version: int) -> None:
    folder = run.checkpoint_dir(version)
    folder.mkdir(parents=True)
    (folder / "model.safetensors").write_bytes(b"w" * 16)


def write_evaluation(run: RunLayout, version: int) -> None:
    run.train_dir.mkdir(parents=True, exist_ok=True)
    run.evaluation_file(version).write_text("{}")


def run_steps(run: RunLayout, policy: RetentionPolicy, steps: int, evaluate: bool = True) -> None:
    """Version 0, then `steps` steps as the trainer and the workflow take them: publish, prune, evaluate if due."""
    publish_fake(run, 0)
    if evaluate and policy.eval_every_steps > 0:
        write_evaluation(run, 0)
    for version in range(1, steps + 1):
        publish_fake(run, version)
        prune_checkpoints(run, policy)
        if evaluate and policy.eval_every_steps > 0 and version % policy.eval_every_steps == 0:
            write_evaluation(run, version)


def names(run: RunLayout) -> list[str]:
    return sorted(entry.name for entry in run.checkpoints_dir.iterdir())


def test_a_30_step_run_keeps_the_newest_the_base_and_every_mth(tmp_path: Path) -> None:
    run = RunLayout(tmp_path, "r")
    run_steps(run, RetentionPolicy(keep_last=3, keep_every=10, max_staleness=1, eval_every_steps=0), 30)
    # The folder itself, hidden leftovers included: nothing but the kept versions.
    assert names(run) == ["v000000", "v000010", "v000020", "v000028", "v000029", "v000030"]


def test_without_keep_every_only_the_base_and_the_newest_remain(tmp_path: Path) -> None:
    run = RunLayout(tmp_path, "r")
    run_steps(run, RetentionPolicy(keep_last=2, keep_every=0, max_staleness=0, eval_every_steps=5), 30)
    assert published_versions(run) == [0, 29, 30]


def test_staleness_keeps_every_version_sampling_may_still_use(tmp_path: Path) -> None:
    run = RunLayout(tmp_path, "r")
    run_steps(run, RetentionPolicy(keep_last=1, keep_every=0, max_staleness=4, eval_every_steps=0), 30)
    assert published_versions(run) == [0, 26, 27, 28, 29, 30]


def test_a_version_awaiting_its_evaluation_is_kept_until_the_result_exists(tmp_path: Path) -> None:
    run = RunLayout(tmp_path, "r")
    policy = RetentionPolicy(keep_last=2, keep_every=0, max_staleness=0, eval_every_steps=5)
    run_steps(run, policy, 30, evaluate=False)
    assert published_versions(run) == [0, 5, 10, 15, 20, 25, 29, 30]
    for version in (5, 10, 15):
        write_evaluation(run, version)
    prune_checkpoints(run, policy)
    assert published_versions(run) == [0, 20, 25, 29, 30]


def test_a_deletion_cut_short_by_a_crash_is_finished_by_the_next_pass(tmp_path: Path) -> None:
    run = RunLayout(tmp_path, "r")
    for version in range(5):
        publish_fake(run, version)
    # A crash between the rename and the removal leaves the renamed folder behind.
    run.checkpoint_dir(1).rename(run.checkpoints_dir / ".v000001.deleting")
    deleted = prune_checkpoints(run, RetentionPolicy(keep_last=2, keep_every=0, max_staleness=0, eval_every_steps=0))
    assert deleted == [2]
    assert names(run) == ["v000000", "v000003", "v000004"]
    # Deleting what is gone already is no error.
    delete_checkpoint(run.checkpoint_dir(2))
    assert names(run) == ["v000000", "v000003", "v000004"]


def test_a_run_without_checkpoints_prunes_nothing(tmp_path: Path) -> None:
    assert prune_checkpoints(RunLayout(tmp_path, "r"), RetentionPolicy(keep_last=1, keep_every=0, max_staleness=0, eval_every_steps=0)) == []


def test_a_save_the_disk_cannot_hold_is_refused_naming_the_folder_and_the_bytes(tmp_path: Path) -> None:
    with pytest.raises(DiskFullError) as raised:
        ensure_room_for(tmp_path, 5000, free_bytes=lambda _folder: 1200)
    message = str(raised.value)
    assert str(tmp_path) in message
    assert "5000 bytes" in message
    assert "1200 bytes" in message
    assert not raised.value.non_retryable


def test_a_save_that_fits_passes(tmp_path: Path) -> None:
    ensure_room_for(tmp_path, 5000, free_bytes=lambda _folder: 5000)

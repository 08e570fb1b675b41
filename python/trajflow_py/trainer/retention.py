"""
Checkpoint retention (`trainer.checkpoints` of config/schema.ts; the Python twin of the embedded
trainer's in src/store/checkpointStore.ts): after a train step, the versions no one needs any more
are deleted, so a run's disk use stays bounded; and before a version is published, a disk that
cannot hold it is refused with a clear error instead of a half-written checkpoint.

Never deleted: version 0 (the KL reference, and what a fresh start copies), the newest
`maxStaleness + 1` (the step after resumes from the newest; inference servers may still be loading
any version sampling may use), and a version an evaluation is due for (`eval.everySteps`) until its
result file exists.

A version is deleted by renaming it to `.vNNNNNN.deleting` (no longer a checkpoint name, so no
reader lists it) and then removing that; a leftover of a crash in between is removed by the next
pass, so deletion is idempotent.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from .files import DiskFullError, format_bytes, fsync_dir
from .layout import RunLayout, checkpoint_version_of, numbered

_DELETING_SUFFIX = ".deleting"


@dataclass(frozen=True)
class RetentionPolicy:
    keep_last: int
    #: 0: no sparse history.
    keep_every: int
    max_staleness: int
    #: 0: the run has no evaluations.
    eval_every_steps: int


def versions_to_keep(versions: Iterable[int], policy: RetentionPolicy, evaluated: Callable[[int], bool]) -> set[int]:
    """Of the published `versions`, those retention keeps; `evaluated(v)` says whether v's evaluation is written."""
    present = sorted(set(versions))
    if not present:
        return set()
    newest_count = max(policy.keep_last, policy.max_staleness + 1)
    kept = {0, *present[-newest_count:]}
    for version in present:
        if policy.keep_every > 0 and version % policy.keep_every == 0:
            kept.add(version)
        # A version is a step count: the workflow evaluates at multiples of everySteps.
        if policy.eval_every_steps > 0 and version % policy.eval_every_steps == 0 and not evaluated(version):
            kept.add(version)
    return kept & set(present)


def published_versions(run: RunLayout) -> list[int]:
    try:
        names = [entry.name for entry in run.checkpoints_dir.iterdir()]
    except FileNotFoundError:
        return []
    return sorted(v for v in map(checkpoint_version_of, names) if v is not None)


def _remove(entry: Path) -> None:
    if entry.is_dir() and not entry.is_symlink():
        shutil.rmtree(entry, ignore_errors=True)
    else:
        entry.unlink(missing_ok=True)


def _remove_leftover_deletions(folder: Path) -> None:
    """What a pass that crashed between renaming and removing left behind."""
    for entry in folder.iterdir():
        if entry.name.startswith(".v") and entry.name.endswith(_DELETING_SUFFIX):
            _remove(entry)


def delete_checkpoint(checkpoint: Path) -> None:
    """Renames the version out of sight (one atomic step for readers), then removes it."""
    aside = checkpoint.with_name(f".{checkpoint.name}{_DELETING_SUFFIX}")
    _remove(aside)
    try:
        os.rename(checkpoint, aside)
    except FileNotFoundError:
        return  # deleted already
    fsync_dir(checkpoint.parent)
    _remove(aside)


def prune_checkpoints(run: RunLayout, policy: RetentionPolicy) -> list[int]:
    """Deletes the versions retention does not keep; returns them, oldest first."""
    if not run.checkpoints_dir.is_dir():
        return []
    _remove_leftover_deletions(run.checkpoints_dir)
    versions = published_versions(run)
    kept = versions_to_keep(versions, policy, lambda version: run.evaluation_file(version).is_file())
    deleted = [version for version in versions if version not in kept]
    for version in deleted:
        delete_checkpoint(run.checkpoint_dir(version))
    return deleted


def folder_bytes(folder: Path) -> int:
    """The bytes of the files under `folder` (0 if it does not exist)."""
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def disk_free_bytes(folder: Path) -> int:
    """Bytes this process may still write on `folder`'s filesystem (its nearest existing ancestor's)."""
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return shutil.disk_usage(folder).free


def ensure_room_for(folder: Path, needed: int, free_bytes: Callable[[Path], int] | None = None) -> None:
    """
    Raises DiskFullError (retryable: space may be freed) before writing `needed` bytes into
    `folder` if they do not fit; `free_bytes` measures the space (default: the filesystem's).
    """
    free = (free_bytes or disk_free_bytes)(folder)
    if free < needed:
        raise DiskFullError(folder, f"a checkpoint needs about {format_bytes(needed)} ({needed} bytes), only {format_bytes(free)} ({free} bytes) are free")


def describe_versions(versions: list[int]) -> str:
    return ", ".join(f"v{numbered(v)}" for v in versions)

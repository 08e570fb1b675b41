"""
File primitives (the Python twin of src/store/files.ts and jsonLines.ts), durable as well as
atomic: every write is fsynced, and so is the folder that gained a name, so that a file the
workflow was told about survives a machine crash, not only a process crash.

JSON is written as JavaScript's JSON.stringify would (compact) and never holds NaN or Infinity
(`allow_nan=False` raises instead): JavaScript's JSON.parse rejects both.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any


def to_json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def read_json(file: Path) -> Any | None:
    """The parsed JSON in `file`, or None if there is no such file."""
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    return json.loads(text)


def fsync_file(file: Path) -> None:
    fd = os.open(file, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(folder: Path) -> None:
    """Makes the names in `folder` (a file renamed into it, say) durable."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def make_dirs(folder: Path) -> None:
    """mkdir -p, with each folder it creates made durable in its parent."""
    missing = []
    parent = folder
    while not parent.exists():
        missing.append(parent)
        parent = parent.parent
    folder.mkdir(parents=True, exist_ok=True)
    for created in reversed(missing):
        fsync_dir(created.parent)


def write_json_atomically(file: Path, value: Any) -> None:
    """Writes a temp file beside `file`, fsyncs it, renames it in place: readers see old or new, never half."""
    text = to_json(value)
    make_dirs(file.parent)
    temp = file.with_name(f"{file.name}.{uuid.uuid4()}.tmp")
    try:
        with open(temp, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temp, file)
    finally:
        temp.unlink(missing_ok=True)
    fsync_dir(file.parent)


def append_json_line(file: Path, value: Any) -> None:
    """Appends `value` as one JSON line (train/metrics.jsonl), fsynced."""
    line = to_json(value) + "\n"
    make_dirs(file.parent)
    created = not file.exists()
    with open(file, "a", encoding="utf-8") as out:
        out.write(line)
        out.flush()
        os.fsync(out.fileno())
    if created:
        fsync_dir(file.parent)


def _fsync_tree(folder: Path) -> None:
    for root, _dirs, names in os.walk(folder):
        for name in names:
            fsync_file(Path(root, name))
        fsync_dir(Path(root))


def publish_directory(final: Path, fill: Callable[[Path], None]) -> None:
    """
    Publishes a directory atomically: `fill` writes it as `.<name>.partial` beside `final` (a
    leftover of a crashed attempt is removed first), every file and the folder are fsynced, then
    one rename makes it `final`, and the parent folder is fsynced.

    A `final` that exists already (a crashed attempt published it but never recorded its step as
    done; the TypeScript trainer overwrites its checkpoint file then) is replaced: renamed aside,
    the new one renamed in, the old one removed. A directory cannot be renamed over a non-empty one,
    so between the two renames, a few microseconds, the name is absent.
    """
    parent = final.parent
    make_dirs(parent)
    partial = parent / f".{final.name}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir()
    try:
        fill(partial)
        _fsync_tree(partial)
        replaced = None
        if final.exists():
            replaced = parent / f".{final.name}.replaced-{uuid.uuid4()}"
            os.rename(final, replaced)
        os.rename(partial, final)
        fsync_dir(parent)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    if replaced is not None:
        shutil.rmtree(replaced, ignore_errors=True)

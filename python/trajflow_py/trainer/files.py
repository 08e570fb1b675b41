"""
File primitives (the Python twin of src/store/files.ts and jsonLines.ts), durable as well as
atomic: every write is fsynced, and so is the folder that gained a name, so that a file the
workflow was told about survives a machine crash, not only a process crash.

JSON records are sealed as src/store/files.ts seals them, one line each, valid JSON itself:

    {"bytes":<N>,"sha256":"<64 hex digits>","body":<the record's JSON>}\n

N being the body's length in UTF-8 bytes and the hash that of those bytes, so a torn or corrupt
copy is detected when read (CorruptFileError). The body is written as JavaScript's JSON.stringify
would (compact) and never holds NaN or Infinity (`allow_nan=False` raises instead): JavaScript's
JSON.parse rejects both. A full disk raises DiskFullError (retryable), naming the file and the
free space, with the partial file removed.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import shutil
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from temporalio.exceptions import ApplicationError

from .failures import CORRUPT_STORED_FILE, DISK_FULL

_SEAL_START = b'{"bytes":'
_SEAL_HEAD = re.compile(rb'\{"bytes":(\d{1,15}),"sha256":"([0-9a-f]{64})","body":')
_SEAL_HEAD_MAX = 120
_SEAL_END = b"}"
_DISK_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)


class CorruptFileError(ApplicationError):
    """A stored file failed its length or checksum check. Not retryable: a retry reads the same bytes."""

    def __init__(self, kind: str, file: Path, reason: str) -> None:
        super().__init__(f"corrupt {kind} {file}: {reason}", type=CORRUPT_STORED_FILE, non_retryable=True)
        self.kind = kind
        self.file = file
        self.reason = reason


class DiskFullError(ApplicationError):
    """
    The filesystem a write went to is full (`cause` the OSError; the write was undone), or would
    be (`cause` says by how much; nothing was written). Retryable: space may be freed.
    """

    def __init__(self, file: Path, cause: OSError | str) -> None:
        free: int | None
        total: int | None
        try:
            stats = os.statvfs(_nearest_existing(file.parent))
            free, total = stats.f_bavail * stats.f_frsize, stats.f_blocks * stats.f_frsize
            space = f"{format_bytes(free)} free of {format_bytes(total)}"
        except OSError:
            free = total = None
            space = "free space unknown"
        reason = cause.strerror if isinstance(cause, OSError) else cause
        super().__init__(f"no space left on device writing {file} ({space} on its filesystem): {reason}", type=DISK_FULL)
        self.file = file
        self.free_bytes = free
        self.total_bytes = total


def format_bytes(count: int) -> str:
    value, unit = float(count), 0
    units = ["B", "KiB", "MiB", "GiB", "TiB"]
    while value >= 1024 and unit < len(units) - 1:
        value /= 1024
        unit += 1
    return f"{count} B" if unit == 0 else f"{value:.1f} {units[unit]}"


def _nearest_existing(folder: Path) -> Path:
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return folder


@contextmanager
def _explaining_disk_full(file: Path) -> Iterator[None]:
    """Turns a full disk (or quota) into DiskFullError naming `file`."""
    try:
        yield
    except OSError as err:
        if err.errno in _DISK_FULL_ERRNOS:
            raise DiskFullError(file, err) from err
        raise


def to_json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def seal_record(value: Any) -> bytes:
    """`value` as one sealed line, newline included."""
    body = to_json(value).encode("utf-8")
    return b'{"bytes":%d,"sha256":"%s","body":' % (len(body), sha256_hex(body).encode("ascii")) + body + b"}\n"


def unseal_record(line: bytes, file: Path) -> Any:
    """
    The record in one sealed line (without its newline), checked against its length and checksum.
    Raises CorruptFileError naming `file`.
    """

    def corrupt(reason: str) -> CorruptFileError:
        return CorruptFileError("record", file, reason)

    def parse(data: bytes, what: str) -> Any:
        try:
            return json.loads(data.decode("utf-8"))
        except ValueError as err:
            raise corrupt(f"{what} ({err})") from None

    if not line:
        raise corrupt("empty (0 bytes)")
    if not line.startswith(_SEAL_START):
        raise corrupt(f"not a sealed record: it starts {line[: len(_SEAL_START)].decode('latin-1')!r}")
    head = _SEAL_HEAD.match(line[:_SEAL_HEAD_MAX])
    if head is None:
        raise corrupt(f"the seal's head is damaged or cut: {line[:_SEAL_HEAD_MAX].decode('latin-1')!r}")
    size, start = int(head[1]), head.end()
    end = start + size
    if len(line) < end:
        raise corrupt(f"truncated: {len(line) - start} of {size} body bytes")
    if len(line) < end + len(_SEAL_END):
        raise corrupt("truncated: the seal's end is missing")
    if len(line) > end + len(_SEAL_END):
        raise corrupt(f"{len(line) - end - len(_SEAL_END)} unexpected bytes after the body")
    if line[end:] != _SEAL_END:
        raise corrupt(f"the seal's end is damaged: {line[end:].decode('latin-1')!r}")
    body = line[start:end]
    digest = sha256_hex(body)
    expected = head[2].decode("ascii")
    if digest != expected:
        raise corrupt(f"checksum mismatch: the {size} body bytes hash to sha256 {digest}, the seal says {expected}")
    return parse(body, "the body is not JSON")


def read_json(file: Path) -> Any | None:
    """The record in a sealed JSON file, or None if there is no such file; raises CorruptFileError."""
    try:
        data = file.read_bytes()
    except FileNotFoundError:
        return None
    # One sealed line: the final newline is not part of the record.
    return unseal_record(data[:-1] if data.endswith(b"\n") else data, file)


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
    """Writes `value` sealed to a temp file beside `file`, fsyncs it, renames it in place: readers see old or new, never half."""
    data = seal_record(value)
    temp = file.with_name(f"{file.name}.{uuid.uuid4()}.tmp")
    with _explaining_disk_full(file):
        try:
            make_dirs(file.parent)
            with open(temp, "wb") as out:
                out.write(data)
                out.flush()
                os.fsync(out.fileno())
            os.replace(temp, file)
        finally:
            temp.unlink(missing_ok=True)
        fsync_dir(file.parent)


def append_json_line(file: Path, value: Any) -> None:
    """
    Appends `value` as one sealed line (train/metrics.jsonl), fsynced. A file whose last line was
    torn by a crash gets a newline first, so the torn line stays alone (and is skipped by readers);
    a failed append is cut back off, so no partial line is left for the next one to join.
    """
    line = seal_record(value)
    with _explaining_disk_full(file):
        make_dirs(file.parent)
        fd = os.open(file, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o666)
        try:
            size = os.fstat(fd).st_size
            if size > 0 and os.pread(fd, 1, size - 1) != b"\n":
                line = b"\n" + line
            try:
                rest = memoryview(line)
                while rest:  # a write may write less than asked
                    rest = rest[os.write(fd, rest) :]
                os.fsync(fd)
            except OSError:
                os.ftruncate(fd, size)
                raise
        finally:
            os.close(fd)
        if size == 0:  # the first line created the file: its name must be durable too
            fsync_dir(file.parent)


#: In every directory publish_directory publishes: each file's size and sha256 (a sealed record).
MANIFEST_FILE = "trajflow-manifest.json"


def _file_sha256(file: Path) -> str:
    with open(file, "rb") as source:
        return hashlib.file_digest(source, "sha256").hexdigest()


def _write_manifest(folder: Path) -> None:
    manifest = folder / MANIFEST_FILE
    # A manifest `fill` copied from another checkpoint is replaced, not listed.
    files = {
        path.relative_to(folder).as_posix(): {"bytes": path.stat().st_size, "sha256": _file_sha256(path)}
        for path in sorted(folder.rglob("*"))
        if path.is_file() and path != manifest
    }
    manifest.write_bytes(seal_record({"files": files}))


def verify_directory(folder: Path, may_be_absent_under: str | None = None) -> None:
    """
    Checks each file of a directory publish_directory published against its manifest (size, then
    sha256); raises CorruptFileError naming the first that differs, or that is missing unless it
    lies under the subfolder `may_be_absent_under` (removed on purpose since). Files the manifest
    does not list are not checked, nor is a directory without a manifest (published before
    manifests were).
    """
    manifest = read_json(folder / MANIFEST_FILE)
    if manifest is None:
        return
    for name, expected in manifest["files"].items():
        file = folder / name
        if not file.is_file():
            if may_be_absent_under is not None and name.startswith(f"{may_be_absent_under}/"):
                continue
            raise CorruptFileError("checkpoint", folder, f"{name} is missing")
        size = file.stat().st_size
        if size != expected["bytes"]:
            raise CorruptFileError("checkpoint", folder, f"{name} has {size} bytes, the manifest says {expected['bytes']}")
        digest = _file_sha256(file)
        if digest != expected["sha256"]:
            raise CorruptFileError("checkpoint", folder, f"{name}: checksum mismatch: it hashes to sha256 {digest}, the manifest says {expected['sha256']}")


def _fsync_tree(folder: Path) -> None:
    for root, _dirs, names in os.walk(folder):
        for name in names:
            fsync_file(Path(root, name))
        fsync_dir(Path(root))


def publish_directory(final: Path, fill: Callable[[Path], object]) -> None:
    """
    Publishes a directory atomically: `fill` writes it as `.<name>.partial` beside `final` (a
    leftover of a crashed attempt is removed first), a manifest of its files' sizes and hashes is
    added (verify_directory checks it), every file and the folder are fsynced, then one rename
    makes it `final`, and the parent folder is fsynced. A full disk raises DiskFullError.

    A `final` that exists already (a crashed attempt published it but never recorded its step as
    done; the TypeScript trainer overwrites its checkpoint file then) is replaced: renamed aside,
    the new one renamed in, the old one removed. A directory cannot be renamed over a non-empty one,
    so between the two renames, a few microseconds, the name is absent.
    """
    parent = final.parent
    partial = parent / f".{final.name}.partial"
    replaced = None
    with _explaining_disk_full(final):
        make_dirs(parent)
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir()
        try:
            fill(partial)
            _write_manifest(partial)
            _fsync_tree(partial)
            if final.exists():
                replaced = parent / f".{final.name}.replaced-{uuid.uuid4()}"
                os.rename(final, replaced)
            os.rename(partial, final)
            fsync_dir(parent)
        finally:
            shutil.rmtree(partial, ignore_errors=True)
    if replaced is not None:
        shutil.rmtree(replaced, ignore_errors=True)

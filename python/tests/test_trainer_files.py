"""
Atomic, durable files: sealed JSON records JavaScript reads (and whose torn or corrupt copies are
refused), directories published by one rename with a manifest checked on load.
"""

import hashlib
import json
import math
import shutil
import subprocess

import pytest
from twins import load

from trajflow_py.trainer.failures import CORRUPT_STORED_FILE, DISK_FULL
from trajflow_py.trainer.files import (
    MANIFEST_FILE,
    CorruptFileError,
    DiskFullError,
    append_json_line,
    publish_directory,
    read_json,
    verify_directory,
    write_json_atomically,
)
from trajflow_py.trainer.layout import RunLayout

#: A record and its sealed line, byte for byte as src/store/files.ts seals it (test/fixtures/twins/sealed.json).
SEALED = load("sealed")
SEALED_BY_TYPESCRIPT = (SEALED["sealed"] + "\n").encode()


def test_json_is_sealed_compact_and_never_holds_nan_or_infinity(tmp_path):
    file = tmp_path / "a" / "b.json"
    write_json_atomically(file, {"x": 1.5, "y": [1, 2]})
    body = '{"x":1.5,"y":[1,2]}'
    assert file.read_text() == f'{{"bytes":{len(body)},"sha256":"{hashlib.sha256(body.encode()).hexdigest()}","body":{body}}}\n'
    for bad in (math.nan, math.inf):
        with pytest.raises(ValueError, match="Out of range float values are not JSON compliant"):
            write_json_atomically(file, {"x": bad})
        with pytest.raises(ValueError, match="Out of range float values are not JSON compliant"):
            append_json_line(tmp_path / "m.jsonl", {"x": bad})
    assert read_json(file) == {"x": 1.5, "y": [1, 2]}
    assert sorted(p.name for p in file.parent.iterdir()) == ["b.json"]  # no temp file left behind
    assert read_json(tmp_path / "missing.json") is None


def test_a_record_is_sealed_as_typescript_seals_it_and_each_reads_the_other(tmp_path):
    record = SEALED["record"]
    file = tmp_path / "step.json"
    write_json_atomically(file, record)
    assert file.read_bytes() == SEALED_BY_TYPESCRIPT
    (tmp_path / "from-ts.json").write_bytes(SEALED_BY_TYPESCRIPT)
    assert read_json(tmp_path / "from-ts.json") == record


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (lambda data: data[:-10], r"truncated: 27 of 35 body bytes"),
        (lambda data: b"", r"empty \(0 bytes\)"),
        (lambda data: bytes(len(data)), r"not a sealed record: it starts '\\x00"),
        (lambda data: data.replace(b'"loss":0.5', b'"loss":0.7'), r"checksum mismatch: the 35 body bytes hash to sha256 [0-9a-f]{64}, the seal says cc0522a5"),
        (lambda data: data[:-1] + b"xx\n", r"2 unexpected bytes after the body"),
    ],
    ids=["cut short", "empty", "zeroed", "a changed digit", "trailing bytes"],
)
def test_a_corrupt_record_is_refused_with_its_reason_and_not_retried(tmp_path, damage, reason):
    file = tmp_path / "turn-000000.json"
    file.write_bytes(damage(SEALED_BY_TYPESCRIPT))
    with pytest.raises(CorruptFileError, match=reason) as caught:
        read_json(file)
    assert caught.value.message.startswith(f"corrupt record {file}: ")
    assert caught.value.type == CORRUPT_STORED_FILE
    assert caught.value.non_retryable


def test_plain_json_without_a_seal_is_refused(tmp_path):
    file = tmp_path / "old.json"
    file.write_text('{"workerId":"w","busyMs":5}')
    with pytest.raises(CorruptFileError, match=r"not a sealed record: it starts '\{\"workerI'"):
        read_json(file)


def test_json_lines_append_sealed_and_a_torn_last_line_stays_alone(tmp_path):
    file = tmp_path / "train" / "metrics.jsonl"
    append_json_line(file, {"step": 0})
    with open(file, "ab") as out:  # a crash cut an append short
        out.write(SEALED_BY_TYPESCRIPT[:50])
    append_json_line(file, {"step": 1})
    lines = file.read_bytes().split(b"\n")
    assert lines[1] == SEALED_BY_TYPESCRIPT[:50]
    assert lines[3] == b""
    assert [json.loads(line)["body"] for line in (lines[0], lines[2])] == [{"step": 0}, {"step": 1}]


def test_a_directory_is_published_whole_and_replaces_an_earlier_one(tmp_path):
    final = tmp_path / "checkpoints" / "v000001"

    def fill(text):
        return lambda partial: (partial / "weights").write_text(text)

    publish_directory(final, fill("first"))
    publish_directory(final, fill("second"))
    assert (final / "weights").read_text() == "second"
    assert sorted(p.name for p in final.parent.iterdir()) == ["v000001"]
    assert read_json(final / MANIFEST_FILE) == {"files": {"weights": {"bytes": 6, "sha256": hashlib.sha256(b"second").hexdigest()}}}

    def crash(partial):
        (partial / "weights").write_text("half")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        publish_directory(tmp_path / "checkpoints" / "v000002", crash)
    assert sorted(p.name for p in final.parent.iterdir()) == ["v000001"]


def test_latest_version_counts_published_checkpoints_only(tmp_path):
    run = RunLayout(tmp_path, "r")
    assert run.latest_version() is None
    for name in ("v000000", "v000002", "v000001.ckpt", ".v000009.partial", "v12"):
        (run.checkpoints_dir / name).mkdir(parents=True)
    assert run.latest_version() == 2
    with pytest.raises(ValueError, match="may only hold"):
        RunLayout(tmp_path, "../escape")


def test_a_published_directory_is_checked_against_its_manifest(tmp_path):
    base = tmp_path / "v000000"
    publish_directory(base, lambda partial: (partial / "model.safetensors").write_bytes(b"\x00" * 1000))

    def fill(partial):
        (partial / "model.safetensors").write_bytes(b"\x01" * 1000)
        (partial / "trainer-state").mkdir()
        (partial / "trainer-state" / "__0_0.distcp").write_bytes(b"adam")
        (partial / MANIFEST_FILE).write_bytes((base / MANIFEST_FILE).read_bytes())  # as copied from the base

    checkpoint = tmp_path / "v000001"
    publish_directory(checkpoint, fill)
    verify_directory(checkpoint)
    # The trainer state is dropped on purpose once no step resumes from this version.
    shutil.rmtree(checkpoint / "trainer-state")
    verify_directory(checkpoint, may_be_absent_under="trainer-state")
    with pytest.raises(CorruptFileError, match=r"trainer-state/__0_0.distcp is missing"):
        verify_directory(checkpoint)

    weights = checkpoint / "model.safetensors"
    with open(weights, "r+b") as out:
        out.truncate(600)
    with pytest.raises(CorruptFileError, match=rf"corrupt checkpoint {checkpoint}: model.safetensors has 600 bytes, the manifest says 1000$"):
        verify_directory(checkpoint, may_be_absent_under="trainer-state")
    weights.write_bytes(b"\x01" * 999 + b"\x02")
    with pytest.raises(CorruptFileError, match=r"model.safetensors: checksum mismatch: it hashes to sha256 [0-9a-f]{64}, the manifest says [0-9a-f]{64}"):
        verify_directory(checkpoint, may_be_absent_under="trainer-state")


def test_a_directory_published_before_manifests_is_not_checked(tmp_path):
    (tmp_path / "v000000").mkdir()
    (tmp_path / "v000000" / "model.safetensors").write_bytes(b"anything")
    verify_directory(tmp_path / "v000000")


@pytest.fixture
def small_filesystem(tmp_path):
    """A 1 MiB tmpfs (mounting needs root: skipped elsewhere)."""
    folder = tmp_path / "small"
    folder.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(folder)], capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs (needs root)")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=True)


def test_a_full_disk_raises_a_retryable_error_naming_the_file_and_the_free_space(small_filesystem):
    metrics = small_filesystem / "train" / "metrics.jsonl"
    append_json_line(metrics, {"step": 0})
    before = metrics.read_bytes()
    filler = small_filesystem / "filler"
    with pytest.raises(OSError, match="No space left on device"), open(filler, "wb") as out:
        out.write(bytes(2 << 20))
    with open(filler, "r+b") as out:  # 16 KiB left: a big line is written in part before the disk refuses the rest
        out.truncate(filler.stat().st_size - (16 << 10))

    with pytest.raises(DiskFullError, match=rf"no space left on device writing {metrics} \(\d+(\.\d)? (B|KiB) free of 1\.0 MiB on its filesystem\)") as full:
        append_json_line(metrics, {"step": 1, "note": "x" * (64 << 10)})
    assert full.value.type == DISK_FULL
    assert not full.value.non_retryable
    assert metrics.read_bytes() == before

    step = small_filesystem / "train" / "step-000000.json"
    with pytest.raises(DiskFullError, match=rf"writing {step} "):
        write_json_atomically(step, {"note": "x" * (64 << 10)})
    assert sorted(p.name for p in step.parent.iterdir()) == ["metrics.jsonl"]

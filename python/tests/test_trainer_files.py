"""Atomic, durable files: JSON JavaScript can parse, directories published by one rename."""

import json
import math

import pytest

from trajflow_py.trainer.files import append_json_line, publish_directory, read_json, write_json_atomically
from trajflow_py.trainer.layout import RunLayout


def test_json_is_compact_and_never_holds_nan_or_infinity(tmp_path):
    file = tmp_path / "a" / "b.json"
    write_json_atomically(file, {"x": 1.5, "y": [1, 2]})
    assert file.read_text() == '{"x":1.5,"y":[1,2]}'
    for bad in (math.nan, math.inf):
        with pytest.raises(ValueError):
            write_json_atomically(file, {"x": bad})
        with pytest.raises(ValueError):
            append_json_line(tmp_path / "m.jsonl", {"x": bad})
    assert read_json(file) == {"x": 1.5, "y": [1, 2]}
    assert sorted(p.name for p in file.parent.iterdir()) == ["b.json"]  # no temp file left behind
    assert read_json(tmp_path / "missing.json") is None


def test_json_lines_append(tmp_path):
    file = tmp_path / "train" / "metrics.jsonl"
    append_json_line(file, {"step": 0})
    append_json_line(file, {"step": 1})
    assert [json.loads(line) for line in file.read_text().splitlines()] == [{"step": 0}, {"step": 1}]


def test_a_directory_is_published_whole_and_replaces_an_earlier_one(tmp_path):
    final = tmp_path / "checkpoints" / "v000001"

    def fill(text):
        return lambda partial: (partial / "weights").write_text(text)

    publish_directory(final, fill("first"))
    publish_directory(final, fill("second"))
    assert (final / "weights").read_text() == "second"
    assert sorted(p.name for p in final.parent.iterdir()) == ["v000001"]

    def crash(partial):
        (partial / "weights").write_text("half")
        raise OSError("disk full")

    with pytest.raises(OSError):
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

"""
The worker's settings file, written by the TypeScript CLI:

    {"temporal": {"address": "127.0.0.1:7233", "namespace": "default"},
     "taskQueue": "trajflow-trainer", "dataDir": "/abs/.trajflow", "modelPath": "/abs/model-dir",
     "compatibility": {"code": "...", "model": "...", "modules": "..."}, "identity": "optional"}
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import Field

from .validation import CamelModel, parse


class Compatibility(CamelModel):
    """A run's or a worker's fingerprint (src/core/compatibility.ts)."""

    code: str
    model: str
    modules: str


class TemporalSettings(CamelModel):
    address: str = Field(min_length=1)
    namespace: str = Field(min_length=1)


class WorkerSettings(CamelModel):
    temporal: TemporalSettings
    task_queue: str = Field(min_length=1)
    data_dir: Path
    #: The Hugging Face directory version 0 of every run is copied from.
    model_path: Path
    compatibility: Compatibility
    identity: str | None = None


def load_settings(file: Path) -> WorkerSettings:
    """The settings in `file`; a ValueError naming the file and each bad field otherwise."""
    try:
        raw = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise ValueError(f"settings {file}: cannot read it as JSON: {err}") from None
    settings = parse(WorkerSettings, raw, f"settings {file}")
    if not (settings.model_path / "config.json").is_file():
        raise ValueError(f"invalid settings {file}: modelPath: {settings.model_path} is not a Hugging Face model directory (no config.json)")
    return settings

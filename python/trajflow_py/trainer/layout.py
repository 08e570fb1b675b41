"""
Where a run's files live under the data directory: the Python twin of src/store/runLayout.ts,
for the files the trainer reads and writes.

    <dataDir>/engines/<workerId>.json, <dataDir>/env-workers/<workerId>.json   utilization counters
    <dataDir>/runs/<runId>/trajectories/<trajectoryId>/turn-000003.json, summary.json
    <dataDir>/runs/<runId>/checkpoints/v000004/     version 4: a Hugging Face directory
    <dataDir>/runs/<runId>/train/step-000003.json   train step 3's result (written last: marks it done)
    <dataDir>/runs/<runId>/train/metrics.jsonl      one line per train step
    <dataDir>/runs/<runId>/train/eval-v000004.json  the evaluation of version 4 (written last: marks it done)
"""

from __future__ import annotations

import re
from pathlib import Path

SAFE_ID = re.compile(r"^[A-Za-z0-9_.-]+$")
#: Numbered files (turns, steps, versions) carry six digits at least, so they sort by name.
NUMBER_DIGITS = 6
#: The TypeScript side's pattern: an embedded model's vNNNNNN.ckpt or a real model's vNNNNNN/.
CHECKPOINT_NAME = re.compile(r"^v(\d{6,})(\.ckpt)?$")
TURN_FILE = re.compile(r"^turn-\d+\.json$")


def check_id(kind: str, value: str) -> str:
    if not SAFE_ID.match(value):
        raise ValueError(f"{kind} id {value!r} may only hold letters, digits, _ . -")
    return value


def numbered(n: int) -> str:
    return str(n).zfill(NUMBER_DIGITS)


def engines_dir(data_dir: Path) -> Path:
    return data_dir / "engines"


def env_workers_dir(data_dir: Path) -> Path:
    return data_dir / "env-workers"


def checkpoint_version_of(name: str) -> int | None:
    """The version a checkpoint file or directory name holds, or None for any other name."""
    match = CHECKPOINT_NAME.match(name)
    return int(match.group(1)) if match else None


class RunLayout:
    def __init__(self, data_dir: Path, run_id: str) -> None:
        self.dir = data_dir / "runs" / check_id("run", run_id)

    def trajectory_dir(self, trajectory_id: str) -> Path:
        return self.dir / "trajectories" / check_id("trajectory", trajectory_id)

    def turn_file(self, trajectory_id: str, turn: int) -> Path:
        return self.trajectory_dir(trajectory_id) / f"turn-{numbered(turn)}.json"

    def trajectory_summary_file(self, trajectory_id: str) -> Path:
        return self.trajectory_dir(trajectory_id) / "summary.json"

    @property
    def checkpoints_dir(self) -> Path:
        return self.dir / "checkpoints"

    def checkpoint_dir(self, version: int) -> Path:
        return self.checkpoints_dir / f"v{numbered(version)}"

    def latest_version(self) -> int | None:
        """The highest published version, if any (a `.vNNNNNN.partial` being written is not one)."""
        try:
            names = [p.name for p in self.checkpoints_dir.iterdir()]
        except FileNotFoundError:
            return None
        versions = [v for v in map(checkpoint_version_of, names) if v is not None]
        return max(versions) if versions else None

    @property
    def train_dir(self) -> Path:
        return self.dir / "train"

    def train_step_file(self, step: int) -> Path:
        return self.train_dir / f"step-{numbered(step)}.json"

    @property
    def metrics_file(self) -> Path:
        return self.train_dir / "metrics.jsonl"

    def evaluation_file(self, version: int) -> Path:
        return self.train_dir / f"eval-v{numbered(version)}.json"

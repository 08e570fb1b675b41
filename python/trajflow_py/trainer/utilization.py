"""
How busy the inference engines and env workers were, and how idle the trainer, over each step's
interval (the Python twin of UtilizationClock in activities/trainer.ts): from the previous step's
end (or, for this worker's first step, its start) to this step's end.

Engines and env workers publish counters to <dataDir>/engines/<workerId>.json and
<dataDir>/env-workers/<workerId>.json twice a second (src/metrics/snapshots.ts); a fraction is
read from two snapshots of each worker (busy_fraction). Engines that do not publish (a vLLM server
this repository does not wrap) leave the engine fraction out.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .files import CorruptFileError, read_json
from .layout import engines_dir, env_workers_dir
from .step_metrics import Utilization


def read_snapshots(folder: Path) -> list[dict]:
    """Every worker's latest snapshot in `folder` (none if it does not exist)."""
    try:
        files = sorted(p for p in folder.iterdir() if p.name.endswith(".json"))
    except FileNotFoundError:
        return []
    snapshots = []
    for file in files:
        try:
            snapshot = read_json(file)
        except (OSError, CorruptFileError):
            # A worker's file replaced while read, or corrupt: a utilization figure is not worth
            # failing a train step for (the TypeScript reader would throw on a corrupt file).
            continue
        if snapshot is not None:  # removed since listed
            snapshots.append(snapshot)
    return snapshots


def busy_fraction(before: list[dict], after: list[dict]) -> float | None:
    """Fraction of the workers' time they were busy between two sets of snapshots (busyFraction in
    src/metrics/busy.ts): busy time over elapsed time, each as the worker measured it between its
    two snapshots (from its start if it had none, or restarted), summed over the workers. None when
    no worker's snapshot advanced. The window is the snapshots' own: they are up to one publishing
    interval old when read, and busy time over the reader's interval instead exceeded 1."""
    busy_ms = elapsed_ms = 0.0
    for end in after:
        start = next(
            (s for s in before if s.get("workerId") == end.get("workerId") and s.get("uptimeMs", 0) <= end.get("uptimeMs", 0)),
            {"uptimeMs": 0, "busyMs": 0},
        )
        busy_ms += end.get("busyMs", 0) - start.get("busyMs", 0)
        elapsed_ms += end.get("uptimeMs", 0) - start.get("uptimeMs", 0)
    return busy_ms / elapsed_ms if elapsed_ms > 0 else None


@dataclass(frozen=True)
class UtilizationMark:
    at_ms: float
    engines: list[dict]
    env_workers: list[dict]


class UtilizationClock:
    def __init__(self, data_dir: Path) -> None:
        self._data_dir = data_dir
        self._previous_end: UtilizationMark | None = None

    def _mark(self, at_ms: float) -> UtilizationMark:
        return UtilizationMark(at_ms, read_snapshots(engines_dir(self._data_dir)), read_snapshots(env_workers_dir(self._data_dir)))

    def interval_start(self, started_at_ms: float) -> UtilizationMark:
        """Where this step's interval starts; call when the step starts."""
        return self._previous_end or self._mark(started_at_ms)

    def interval_end(self, since: UtilizationMark, started_at_ms: float, ended_at_ms: float) -> Utilization:
        """The step's fractions; the step's end becomes the next interval's start."""
        end = self._mark(ended_at_ms)
        interval_ms = ended_at_ms - since.at_ms
        self._previous_end = end
        return Utilization(
            trainer_idle_fraction=(started_at_ms - since.at_ms) / interval_ms if interval_ms > 0 else 0.0,
            engine_busy_fraction=busy_fraction(since.engines, end.engines),
            env_busy_fraction=busy_fraction(since.env_workers, end.env_workers),
        )

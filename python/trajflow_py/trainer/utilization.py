"""
How busy the inference engines and env workers were, and how idle the trainer, over each step's
interval (the Python twin of UtilizationClock in activities/trainer.ts): from the previous step's
end (or, for this worker's first step, its start) to this step's end.

Engines and env workers publish counters to <dataDir>/engines/<workerId>.json and
<dataDir>/env-workers/<workerId>.json every few seconds (src/metrics/snapshots.ts); a fraction is
the difference of two snapshots' busyMs over the interval, summed over workers. Engines that do
not publish (a vLLM server this repository does not wrap) count as 0 busy.
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


def _busy_since(start: list[dict], end: dict) -> float:
    """busyMs of worker `end` since its snapshot in `start` (all of it if it had none, or restarted)."""
    before = next((s for s in start if s.get("workerId") == end.get("workerId") and s.get("uptimeMs", 0) <= end.get("uptimeMs", 0)), None)
    return end.get("busyMs", 0) - (before.get("busyMs", 0) if before else 0)


def engine_busy_fraction(before: list[dict], after: list[dict], wall_ms: float) -> float:
    """Fraction of wall time the engines spent in forward passes, summed over engines (two can reach 2)."""
    busy = sum(_busy_since(before, end) for end in after)
    return busy / wall_ms if wall_ms > 0 else 0.0


def busy_fraction(before: list[dict], after: list[dict], wall_ms: float) -> float | None:
    """Fraction of wall time the env workers had an activity running; None when none reported."""
    if not after or wall_ms <= 0:
        return None
    return sum(max(0.0, _busy_since(before, end)) for end in after) / wall_ms


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
            engine_busy_fraction=engine_busy_fraction(since.engines, end.engines, interval_ms),
            env_busy_fraction=busy_fraction(since.env_workers, end.env_workers, interval_ms),
        )

"""Reading a run's trajectories (the Python twin of the reads of src/store/trajectoryStore.ts)."""

from __future__ import annotations

from .files import read_json
from .layout import TURN_FILE, RunLayout
from .records import TrajectorySummary, TurnRecord
from .validation import parse


def get_turns(run: RunLayout, trajectory_id: str) -> list[TurnRecord]:
    """Turns 0..n-1 of a trajectory, n the number of turn files; raises if one is missing."""
    folder = run.trajectory_dir(trajectory_id)
    try:
        count = sum(1 for p in folder.iterdir() if TURN_FILE.match(p.name))
    except FileNotFoundError:
        count = 0
    turns = []
    for turn in range(count):
        raw = read_json(run.turn_file(trajectory_id, turn))
        if raw is None:
            raise FileNotFoundError(f"trajectory {trajectory_id} of run {run.dir.name} has no stored turn {turn}")
        turns.append(parse(TurnRecord, raw, f"turn {turn} of trajectory {trajectory_id}"))
    return turns


def get_summary(run: RunLayout, trajectory_id: str) -> TrajectorySummary:
    raw = read_json(run.trajectory_summary_file(trajectory_id))
    if raw is None:
        raise FileNotFoundError(f"trajectory {trajectory_id} of run {run.dir.name} has no stored summary")
    return parse(TrajectorySummary, raw, f"summary of trajectory {trajectory_id}")

"""What a rollout stored (src/core/records.ts), as far as the trainer reads it."""

from __future__ import annotations

from typing import Any

from pydantic import model_validator

from .validation import CamelModel


class TurnRecord(CamelModel):
    """One model call of a trajectory, exactly as sampled."""

    trajectory_id: str
    turn: int
    #: The messages rendered before this completion: per-turn credit's anchor state.
    messages: list[Any]
    #: Whether this turn's context starts afresh with promptDeltaIds (absent: turn 0 only).
    starts_context: bool | None = None
    prompt_delta_ids: list[int]
    completion_ids: list[int]
    #: Behaviour logprob of each completion token. JavaScript writes a -Infinity as null; the
    #: sample check rejects it with the message the TypeScript trainer gives.
    logprobs: list[float | None]
    policy_versions: list[int]

    @model_validator(mode="after")
    def _one_logprob_and_version_per_completion_token(self) -> TurnRecord:
        n = len(self.completion_ids)
        if len(self.logprobs) != n or len(self.policy_versions) != n:
            raise ValueError(f"{n} completion tokens, {len(self.logprobs)} logprobs and {len(self.policy_versions)} policy versions")
        return self


class TrajectoryTime(CamelModel):
    total_ms: float
    generation_ms: float
    environment_ms: float
    waiting_ms: float


class TrajectorySummary(CamelModel):
    env_return: float
    #: What each turn's own answer cost (environment penalty, or the format credit of an unreadable answer), by turn; absent: none.
    turn_penalties: list[float] | None = None
    time: TrajectoryTime

"""
Training sequences of a trajectory from its recorded turns, token for token (the Python twin of
src/core/sequence.ts).

A context starts at turn 0 and at every turn recorded as starting afresh (an agent that keeps no
history). Within a context the prompt the model saw at turn t is every earlier (delta, completion)
pair followed by turn t's delta, so concatenating the pairs in order reproduces each turn's prompt
exactly; each context is one training sequence. The loss mask is 1 on sampled tokens and 0 on
template/environment tokens. Nothing is re-tokenized.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .records import TurnRecord


@dataclass
class TrainingSequence:
    ids: list[int] = field(default_factory=list)
    #: 1 where the model produced the token, 0 where trajflow wrote it.
    loss_mask: list[int] = field(default_factory=list)
    #: Behaviour logprob at masked-in positions, 0 elsewhere (None: the store held a null).
    behaviour_logprobs: list[float | None] = field(default_factory=list)
    #: Policy version that sampled each masked-in token, -1 elsewhere.
    policy_versions: list[int] = field(default_factory=list)


def assert_contiguous_turns(turns: list[TurnRecord]) -> None:
    for index, record in enumerate(turns):
        if record.turn != index:
            raise ValueError(f"trajectory {record.trajectory_id}: expected turn {index}, found turn {record.turn}")


def _starts_context(record: TurnRecord) -> bool:
    return record.turn == 0 or record.starts_context is True


def _contexts(turns: list[TurnRecord]) -> list[list[TurnRecord]]:
    assert_contiguous_turns(turns)
    result: list[list[TurnRecord]] = []
    for record in turns:
        if _starts_context(record):
            result.append([])
        result[-1].append(record)
    return result


def _sequence_of(context: list[TurnRecord]) -> TrainingSequence:
    sequence = TrainingSequence()
    for record in context:
        for token in record.prompt_delta_ids:
            sequence.ids.append(token)
            sequence.loss_mask.append(0)
            sequence.behaviour_logprobs.append(0.0)
            sequence.policy_versions.append(-1)
        for i, token in enumerate(record.completion_ids):
            sequence.ids.append(token)
            sequence.loss_mask.append(1)
            sequence.behaviour_logprobs.append(record.logprobs[i])
            sequence.policy_versions.append(record.policy_versions[i])
    return sequence


def build_training_sequences(turns: list[TurnRecord]) -> list[TrainingSequence]:
    """One training sequence per context of the trajectory, in turn order."""
    return [_sequence_of(context) for context in _contexts(turns)]

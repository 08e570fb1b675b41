"""
A train step's batch from the store (the Python twin of loadBatch in activities/trainer.ts): the
group filter, the groups left out for a corrupt stored file, each trajectory's group-relative
advantage, optional per-turn credit, and one training sample per context of every trained trajectory.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from .advantages import EpisodeTurns, compute_advantages, turn_advantages
from .failures import invalid_config
from .files import CorruptFileError
from .inputs import GroupSummary, TrainerConfig, TrainStepInput
from .layout import RunLayout
from .log import Logger
from .records import TrajectorySummary, TrajectoryTime, TurnRecord
from .samples import TrainingSample
from .sequences import build_training_sequences
from .store import get_summary, get_turns

#: Where a corrupt group is logged unless the caller names a logger: the trainer worker's own (worker.py).
TRAINER_LOGGER = Logger("trajflow.trainer")


@dataclass
class LoadedBatch:
    samples: list[TrainingSample] = field(default_factory=list)
    #: The episode-level advantage of every trained trajectory.
    trajectory_advantages: list[float] = field(default_factory=list)
    trajectory_times: list[TrajectoryTime] = field(default_factory=list)
    #: The policy version that sampled each trained token.
    token_versions: list[int] = field(default_factory=list)
    #: Groups consumed by the step but not trained (see trainer.groupFilter).
    skipped: list[GroupSummary] = field(default_factory=list)
    #: Groups consumed by the step but not trained because one of their stored files is corrupt.
    corrupt: list[GroupSummary] = field(default_factory=list)


def has_mixed_outcomes(group: GroupSummary) -> bool:
    """Whether some of the group's trajectories solved the task and some did not."""
    return True in group.solved and False in group.solved


def anchor_state(turn: TurnRecord) -> str:
    """The messages a turn showed, as JSON.stringify writes them: per-turn credit's state key."""
    return json.dumps(turn.messages, separators=(",", ":"), ensure_ascii=False)


def weighted_turn_credit(
    turns: list[list[TurnRecord]],
    sequence_counts: list[int],
    rewards: list[float],
    summaries: list[TrajectorySummary],
    trainer: TrainerConfig,
) -> list[list[float]] | None:
    """
    omega x the per-turn advantage of every turn of a group's trajectories, or None when per-turn
    credit is off. Needs one training sequence per turn, so that a turn's advantage is its sequence's.
    """
    credit = trainer.turn_credit
    if credit is None or credit.weight == 0:
        return None
    if any(count != len(record) for count, record in zip(sequence_counts, turns, strict=True)):
        raise invalid_config("trainer.turnCredit needs agent.history: none (one training sequence per turn)")
    episodes = [
        EpisodeTurns(
            states=[anchor_state(turn) for turn in record],
            reward=reward,
            outcome_reward=summary.env_return,
            turn_penalties=summary.turn_penalties or (),
        )
        for record, reward, summary in zip(turns, rewards, summaries, strict=True)
    ]
    return [[credit.weight * a for a in row] for row in turn_advantages(episodes, trainer.advantage, credit.discount)]


def read_group_unless_corrupt(
    run: RunLayout, step: TrainStepInput, group: GroupSummary, logger: Logger
) -> tuple[list[list[TurnRecord]], list[TrajectorySummary]] | None:
    """
    The group's stored turns and trajectory summaries, or None if one of them is corrupt: then the
    group is logged at error level, naming the file and the reason. The file's bytes stay as they
    are, so a retry would fail the same way, and failing the step would end the run over one damaged file.
    """
    try:
        turns = [get_turns(run, trajectory_id) for trajectory_id in group.trajectory_ids]
        summaries = [get_summary(run, trajectory_id) for trajectory_id in group.trajectory_ids]
    except CorruptFileError as err:
        logger.error(
            "skipping a group with a corrupt stored file: it is not trained",
            runId=step.run_id,
            step=step.step,
            groupId=group.group_id,
            file=str(err.file),
            kind=err.kind,
            reason=err.reason,
        )
        return None
    return turns, summaries


def load_batch(run: RunLayout, step: TrainStepInput, logger: Logger = TRAINER_LOGGER) -> LoadedBatch:
    """
    Reads the groups' turns from the store and turns them into training samples. Groups the group
    filter skips, and groups with a corrupt stored file, are consumed without being trained.
    """
    trainer = step.trainer
    batch = LoadedBatch()
    for group in step.groups:
        if trainer.group_filter == "mixed-outcomes" and not has_mixed_outcomes(group):
            batch.skipped.append(group)
            continue
        records = read_group_unless_corrupt(run, step, group, logger)
        if records is None:
            batch.corrupt.append(group)
            continue
        turns, summaries = records
        advantages = compute_advantages(group.rewards, trainer.advantage)
        batch.trajectory_advantages.extend(advantages)
        sequences = [build_training_sequences(record) for record in turns]
        per_turn = weighted_turn_credit(turns, [len(s) for s in sequences], group.rewards, summaries, trainer)
        for i, trajectory_sequences in enumerate(sequences):
            # Every context of the trajectory carries the trajectory's advantage (the episode's
            # outcome credits each of its turns); with per-turn credit each turn's context adds its own.
            for k, sequence in enumerate(trajectory_sequences):
                advantage = advantages[i] + (per_turn[i][k] if per_turn is not None else 0.0)
                batch.samples.append(TrainingSample(sequence.ids, sequence.loss_mask, sequence.behaviour_logprobs, sequence.policy_versions, advantage))
                batch.token_versions.extend(v for v in sequence.policy_versions if v >= 0)
            batch.trajectory_times.append(summaries[i].time)
    return batch

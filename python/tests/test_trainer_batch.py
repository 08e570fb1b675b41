"""A step's batch from the store: group filter, advantages, per-turn credit, samples."""

import pytest
from temporalio.exceptions import ApplicationError

from test_trainer_support import group_json, trainer_config, turn_json, write_trajectory
from trajflow_py.trainer.batch import load_batch
from trajflow_py.trainer.inputs import TrainStepInput
from trajflow_py.trainer.layout import RunLayout

RUN = "run-b"


def step_input(groups, **trainer):
    return TrainStepInput.model_validate(
        {"runId": RUN, "step": 0, "baseVersion": 0, "groups": groups, "trainer": trainer_config(**trainer), "temperature": 1.0}
    )


def state(text):
    return [{"role": "user", "content": text}]


def test_group_filter_skips_groups_without_mixed_outcomes(tmp_path):
    write_trajectory(tmp_path, RUN, "a0", [turn_json("a0", 0, [1, 2], [3, 4], [-0.1, -0.2], [0, 0])], 1)
    write_trajectory(tmp_path, RUN, "a1", [turn_json("a1", 0, [1, 2], [5], [-0.3], [0])], 0)
    mixed = group_json("g-mixed", ["a0", "a1"], [1, 0], [True, False])
    solved = group_json("g-solved", ["missing-0", "missing-1"], [1, 1], [True, True])
    batch = load_batch(RunLayout(tmp_path, RUN), step_input([mixed, solved], groupFilter="mixed-outcomes", advantage="drgrpo"))
    assert [g.group_id for g in batch.skipped] == ["g-solved"]
    assert [s.ids for s in batch.samples] == [[1, 2, 3, 4], [1, 2, 5]]
    assert [s.advantage for s in batch.samples] == [0.5, -0.5]
    assert batch.trajectory_advantages == [0.5, -0.5]
    assert batch.token_versions == [0, 0, 0]
    assert [t.total_ms for t in batch.trajectory_times] == [10, 10]


def test_per_turn_credit_adds_omega_times_the_anchor_state_advantage(tmp_path):
    # history none: each turn starts a context. Both episodes visit state A then differ.
    # gamma 0.5, drgrpo: e0 returns A 0.5, B 1 | e1 returns A 0, C 0  ->  A's advantages +0.25, -0.25
    e0 = [turn_json("e0", 0, [1], [2], [-0.1], [0], state("A")), turn_json("e0", 1, [3], [4], [-0.1], [0], state("B"), True)]
    e1 = [turn_json("e1", 0, [1], [5], [-0.1], [0], state("A")), turn_json("e1", 1, [6], [7], [-0.1], [0], state("C"), True)]
    write_trajectory(tmp_path, RUN, "e0", e0, 1)
    write_trajectory(tmp_path, RUN, "e1", e1, 0)
    group = group_json("g", ["e0", "e1"], [1, 0], [True, False])
    batch = load_batch(RunLayout(tmp_path, RUN), step_input([group], advantage="drgrpo", turnCredit={"weight": 2, "discount": 0.5}))
    # episode advantage +-0.5, plus 2 x the per-turn one (B and C are visited once: 0)
    assert [s.advantage for s in batch.samples] == pytest.approx([0.5 + 2 * 0.25, 0.5, -0.5 - 2 * 0.25, -0.5])


def test_per_turn_credit_needs_one_sequence_per_turn(tmp_path):
    turns = [turn_json("h", 0, [1], [2], [-0.1], [0]), turn_json("h", 1, [3], [4], [-0.1], [0])]
    write_trajectory(tmp_path, RUN, "h", turns, 1)
    group = group_json("g", ["h"], [1], [True])
    with pytest.raises(ApplicationError) as refused:
        load_batch(RunLayout(tmp_path, RUN), step_input([group], turnCredit={"weight": 1, "discount": 0.9}))
    assert refused.value.type == "InvalidConfig"
    assert refused.value.non_retryable
    assert "agent.history: none" in refused.value.message


def test_a_trajectory_without_summary_fails_the_batch(tmp_path):
    folder = tmp_path / "runs" / RUN / "trajectories" / "lost"
    folder.mkdir(parents=True)
    group = group_json("g", ["lost"], [1], [True])
    with pytest.raises(FileNotFoundError, match="trajectory lost of run run-b has no stored summary"):
        load_batch(RunLayout(tmp_path, RUN), step_input([group]))

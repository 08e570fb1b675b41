"""Training sequences from turn records: the cases of test/sequence.test.ts."""

import pytest

from trajflow_py.trainer.records import TurnRecord
from trajflow_py.trainer.sequences import build_training_sequences


def turn(index, delta, completion, starts_context=None):
    return TurnRecord.model_validate(
        {
            "trajectoryId": "t",
            "turn": index,
            "messages": [],
            **({"startsContext": starts_context} if starts_context is not None else {}),
            "promptDeltaIds": delta,
            "completionIds": completion,
            "logprobs": [-i / 100 for i in completion],
            "policyVersions": [index for _ in completion],
        }
    )


def test_with_history_one_sequence_each_turn_continuing_the_last():
    (sequence,) = build_training_sequences([turn(0, [1, 2], [3, 4]), turn(1, [5], [6])])
    assert sequence.ids == [1, 2, 3, 4, 5, 6]
    assert sequence.loss_mask == [0, 0, 1, 1, 0, 1]
    assert sequence.behaviour_logprobs == [0, 0, -0.03, -0.04, 0, -0.06]
    assert sequence.policy_versions == [-1, -1, 0, 0, -1, 1]


def test_without_history_a_sequence_per_fresh_context():
    sequences = build_training_sequences([turn(0, [1, 2], [3]), turn(1, [1, 5], [6], True), turn(2, [8], [9])])
    assert [s.ids for s in sequences] == [[1, 2, 3], [1, 5, 6, 8, 9]]
    assert [s.loss_mask for s in sequences] == [[0, 0, 1], [0, 0, 1, 0, 1]]


def test_refuses_turns_with_a_gap():
    with pytest.raises(ValueError, match="expected turn 1, found turn 2"):
        build_training_sequences([turn(0, [1], [2]), turn(2, [3], [4])])


def test_a_turn_must_hold_one_logprob_and_version_per_completion_token():
    with pytest.raises(ValueError, match="3 completion tokens, 2 logprobs and 3 policy versions"):
        TurnRecord.model_validate(
            {
                "trajectoryId": "t",
                "turn": 0,
                "messages": [],
                "promptDeltaIds": [1],
                "completionIds": [2, 3, 4],
                "logprobs": [-1, -1],
                "policyVersions": [0, 0, 0],
            }
        )

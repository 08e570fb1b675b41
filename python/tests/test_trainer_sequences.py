"""Training sequences on the twins fixture (test/fixtures/twins/sequences.json), which test/sequence.test.ts reads too."""

import pytest
from twins import load

from trajflow_py.trainer.records import TurnRecord
from trajflow_py.trainer.sequences import build_training_sequences

TWINS = load("sequences")


@pytest.mark.parametrize("case", TWINS["cases"], ids=lambda case: case["why"][:60])
def test_the_twins_cases(case):
    turns = [TurnRecord.model_validate(turn) for turn in case["turns"]]
    if "error" in case:
        with pytest.raises(ValueError, match=case["error"]):
            build_training_sequences(turns)
        return
    sequences = build_training_sequences(turns)
    assert [{"ids": s.ids, "lossMask": s.loss_mask, "behaviourLogprobs": s.behaviour_logprobs, "policyVersions": s.policy_versions} for s in sequences] == case[
        "expected"
    ]


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

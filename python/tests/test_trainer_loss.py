"""The policy loss on the twins fixture (test/fixtures/twins/loss.json), which test/rl.loss.test.ts reads too."""

from typing import Any

import pytest
import torch
from twins import load, snake

from trajflow_py.trainer.inputs import LossConfig
from trajflow_py.trainer.loss import LossResult, policy_loss

TWINS = load("loss")
INPUTS = TWINS["inputs"]


def tensor(name: str, requires_grad: bool = False) -> torch.Tensor:
    return torch.tensor(INPUTS[name], dtype=torch.float32, requires_grad=requires_grad)


def config(overrides: dict[str, Any]) -> LossConfig:
    return LossConfig(**{snake(key): value for key, value in {**TWINS["config"], **overrides}.items()})


def evaluate(case: dict[str, Any], logprobs: torch.Tensor | None = None) -> LossResult:
    optional = {snake(key): tensor(source) for key, source in case.get("with", {}).items()}
    return policy_loss(
        tensor("logprobs") if logprobs is None else logprobs,
        tensor("behaviourLogprobs"),
        tensor("mask"),
        tensor("advantages"),
        config(case["config"]),
        optional.get("ref_logprobs"),
        optional.get("old_logprobs"),
    )


@pytest.mark.parametrize("case", TWINS["cases"], ids=lambda case: case["name"])
def test_the_twins_cases(case):
    logprobs = tensor("logprobs", requires_grad=True)
    result = evaluate(case, logprobs)
    expected = dict(case["expected"])
    gradient = expected.pop("gradient", None)
    for key, value in expected.items():
        actual = getattr(result, snake(key))
        assert actual is not None, key
        assert float(actual.detach()) == pytest.approx(value, abs=1e-5), key
    if gradient is not None:
        result.loss.backward()
        assert logprobs.grad is not None
        assert logprobs.grad.flatten().tolist() == pytest.approx(gradient, abs=1e-6)


def test_no_reference_kl_without_beta():
    assert evaluate(TWINS["cases"][0]).ref_kl is None


def test_beta_needs_reference_logprobs():
    with pytest.raises(ValueError, match="beta > 0 needs reference logprobs"):
        evaluate({"config": {"beta": 0.1}})


def test_no_gradient_reaches_the_old_logprobs_under_tis():
    (case,) = [case for case in TWINS["cases"] if case["config"].get("tis", {}).get("cap") == 1.5]
    old = tensor("oldLogprobs", requires_grad=True)
    result = policy_loss(
        tensor("logprobs", requires_grad=True), tensor("behaviourLogprobs"), tensor("mask"), tensor("advantages"), config(case["config"]), None, old
    )
    result.loss.backward()
    assert old.grad is None


def test_tis_needs_the_old_logprobs():
    with pytest.raises(ValueError, match="loss.tis needs the trainer's logprobs before the step"):
        evaluate({"config": {"tis": {"cap": 2.0}}})

"""The policy loss by hand: the fixed inputs of test/rl.loss.test.ts, so both languages agree."""

import pytest
import torch

from trajflow_py.trainer.inputs import LossConfig
from trajflow_py.trainer.loss import policy_loss

# Two sequences padded to T = 3 targets. Per target: policy logprob, behaviour logprob, mask.
#   row 0, A = +1:   log r = 0.1 | 0.5 (r = 1.6487 > 1.28: clipped) | 0
#   row 1, A = -0.5: log r = 0   | -0.5 (r = 0.6065 < 0.8: clipped) | padding, holding a log r of
#   47 that would overflow exp() if the mask did not zero it first
LOGPROBS = [[-1.0, -0.2, -2.0], [-0.3, -1.5, -3.0]]
BEHAVIOUR = [[-1.1, -0.7, -2.0], [-0.3, -1.0, -50.0]]
MASK = [[1, 1, 1], [1, 1, 0]]
ADVANTAGES = [1, -0.5]
REF = [[-1.2, -0.2, -1.5], [-0.3, -1.0, 0.0]]

# Per-token losses l = -min(r A, clip(r, 0.8, 1.28) A), by hand:
#   row 0: -e^0.1 = -1.1051709 | -1.28 (clipped) | -e^0 = -1
#   row 1: -(1 * -0.5) = 0.5   | -(0.8 * -0.5) = 0.4 (clipped)
ROW0 = [-1.1051709, -1.28, -1.0]
ROW1 = [0.5, 0.4]
TOKEN_MEAN = (sum(ROW0) + sum(ROW1)) / 5  # -0.4970342
SEQUENCE_MEAN = (sum(ROW0) / 3 + sum(ROW1) / 2) / 2  # -0.3391952


def config(**overrides):
    # The schema's defaults (config/schema.ts LossConfigSchema), then the case's own.
    return LossConfig(**{"epsilon": 0.2, "epsilon_high": 0.28, "beta": 0.0, "kl": "k3", "aggregation": "token-mean", **overrides})


def evaluate(logprobs=None, with_ref=False, old=None, **overrides):
    t = lambda x: torch.tensor(x, dtype=torch.float32)  # noqa: E731
    return policy_loss(
        t(LOGPROBS) if logprobs is None else logprobs,
        t(BEHAVIOUR),
        t(MASK),
        t(ADVANTAGES),
        config(**overrides),
        t(REF) if with_ref else None,
        old,
    )


def test_token_mean_averages_the_clipped_surrogate_over_masked_tokens():
    result = evaluate()
    assert float(result.loss) == pytest.approx(TOKEN_MEAN, abs=1e-5)
    assert float(result.clip_fraction) == pytest.approx(2 / 5, abs=1e-6)
    # k3 of KL(behaviour || policy): r - 1 - log r = 0.0051709, 0.1487213, 0 | 0, 0.1065307
    assert float(result.approx_kl) == pytest.approx((0.0051709 + 0.1487213 + 0.1065307) / 5, abs=1e-5)
    # -behaviour logprob over masked tokens: (1.1 + 0.7 + 2.0 + 0.3 + 1.0) / 5
    assert float(result.entropy) == pytest.approx(1.02, abs=1e-5)
    assert result.ref_kl is None


def test_sequence_mean_token_mean_weighs_each_sequence_the_same():
    assert float(evaluate(aggregation="sequence-mean-token-mean").loss) == pytest.approx(SEQUENCE_MEAN, abs=1e-5)


# d = ref - logp = -0.2, 0, 0.5 | 0, 0.5
def test_kl_to_the_reference_with_k1():
    result = evaluate(with_ref=True, beta=0.1, kl="k1")
    assert float(result.ref_kl) == pytest.approx((0.2 + 0 - 0.5 + 0 - 0.5) / 5, abs=1e-5)
    assert float(result.loss) == pytest.approx(TOKEN_MEAN + 0.1 * float(result.ref_kl), abs=1e-5)


def test_kl_to_the_reference_with_k3():
    result = evaluate(with_ref=True, beta=0.1, kl="k3")
    # exp(d) - d - 1: 0.0187308, 0, 0.1487213 | 0, 0.1487213
    assert float(result.ref_kl) == pytest.approx((0.0187308 + 0.1487213 + 0.1487213) / 5, abs=1e-5)
    assert float(result.loss) == pytest.approx(TOKEN_MEAN + 0.1 * 0.0632347, abs=1e-5)


def test_clipped_tokens_get_no_gradient_and_the_others_minus_r_a_over_n():
    logprobs = torch.tensor(LOGPROBS, requires_grad=True)
    evaluate(logprobs=logprobs).loss.backward()
    expected = [-1.1051709 / 5, 0, -1 / 5, 0.5 / 5, 0, 0]
    assert logprobs.grad is not None
    assert logprobs.grad.flatten().tolist() == pytest.approx(expected, abs=1e-6)


def test_beta_needs_reference_logprobs():
    with pytest.raises(ValueError, match="beta > 0 needs reference logprobs"):
        evaluate(beta=0.1)


# Truncated importance sampling, cap 1.5, with the trainer's own logprobs before the step:
OLD = [[-1.0, -0.2, -2.0], [-0.4, -1.0, 0.0]]
# The surrogate's ratio is now r = exp(logp - old), the behaviour weight w = min(exp(old - behaviour), 1.5):
#   row 0, A = +1:   r = 1, 1, 1                       w = e^0.1 = 1.1051709, e^0.5 = 1.6487 -> 1.5 (capped), 1
#   row 1, A = -0.5: r = e^0.1, e^-0.5 (< 0.8: clipped)  w = e^-0.1 = 0.9048374, 1
# l = -min(r A, clip(r) A) x w:
#   row 0: -1.1051709 | -1.5 | -1
#   row 1: 0.5 e^0.1 e^-0.1 = 0.5 | 0.4 (clipped)
TIS_ROWS = [-1.1051709, -1.5, -1.0, 0.5, 0.4]


def evaluate_tis(logprobs=None, old=None, cap=1.5):
    return evaluate(logprobs, old=torch.tensor(OLD, dtype=torch.float32) if old is None else old, tis={"cap": cap})


def test_tis_weighs_each_token_by_the_capped_behaviour_ratio_of_the_trainer_before_the_step():
    result = evaluate_tis()
    assert float(result.loss) == pytest.approx(sum(TIS_ROWS) / 5, abs=1e-5)  # -0.5410342
    assert float(result.clip_fraction) == pytest.approx(1 / 5, abs=1e-6)
    assert float(result.tis_weight) == pytest.approx((1.1051709 + 1.5 + 1 + 0.9048374 + 1) / 5, abs=1e-5)
    assert float(result.tis_capped_fraction) == pytest.approx(1 / 5, abs=1e-6)
    # The diagnostics of the behaviour policy keep their meaning.
    assert float(result.approx_kl) == pytest.approx((0.0051709 + 0.1487213 + 0.1065307) / 5, abs=1e-5)


def test_tis_gradient_is_minus_r_a_w_over_n_and_none_reaches_the_old_logprobs():
    logprobs = torch.tensor(LOGPROBS, requires_grad=True)
    old = torch.tensor(OLD, requires_grad=True)
    evaluate_tis(logprobs=logprobs, old=old).loss.backward()
    # row 0: -1 x 1 x w / 5; row 1, token 0: 0.5 x e^0.1 x e^-0.1 / 5 = 0.1; the clipped token and padding: 0
    expected = [-1.1051709 / 5, -1.5 / 5, -1 / 5, 0.1, 0, 0]
    assert logprobs.grad is not None
    assert logprobs.grad.flatten().tolist() == pytest.approx(expected, abs=1e-6)
    assert old.grad is None


def test_tis_with_the_trainer_where_the_sampler_was_is_the_plain_loss():
    # old = behaviour: every weight 1 and the same ratios, so the same loss as without tis.
    result = evaluate_tis(old=torch.tensor(BEHAVIOUR), cap=2.0)
    assert float(result.loss) == pytest.approx(TOKEN_MEAN, abs=1e-5)
    assert float(result.tis_weight) == pytest.approx(1.0, abs=1e-6)
    assert float(result.tis_capped_fraction) == 0


def test_tis_needs_the_old_logprobs():
    t = lambda x: torch.tensor(x, dtype=torch.float32)  # noqa: E731
    with pytest.raises(ValueError, match="loss.tis needs the trainer's logprobs before the step"):
        policy_loss(t(LOGPROBS), t(BEHAVIOUR), t(MASK), t(ADVANTAGES), config(tis={"cap": 2.0}))

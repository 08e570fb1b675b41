"""
Packed micro-batches and float32 master weights, on the tiny Llama: packing changes how sequences
reach the model, never the loss or its gradient; bfloat16 computes in bfloat16 but updates float32
weights, so a small step moves them as it does in float32.
"""

from __future__ import annotations

import random

import pytest
import torch

from test_trainer_support import TEMPERATURE, full_logprobs, trainer_config
from trajflow_py.trainer.attention import segment_attention
from trajflow_py.trainer.distributed import Ranks, decoder_layers
from trajflow_py.trainer.inputs import TrainerConfig
from trajflow_py.trainer.packing import pack_indices
from trajflow_py.trainer.policy import load_model
from trajflow_py.trainer.policy_trainer import PolicyTrainer, adamw
from trajflow_py.trainer.samples import TrainingSample


def sampled(model_dir, count: int = 7, seed: int = 0) -> list[TrainingSample]:
    """Sequences of a prompt (untrained) and a completion (trained), their behaviour logprobs the model's own, shifted a little."""
    rng = random.Random(seed)
    model = load_model(model_dir)
    samples = []
    for _ in range(count):
        prompt, completion = rng.randint(2, 12), rng.randint(1, 8)
        ids = [rng.randrange(64) for _ in range(prompt + completion)]
        logprobs = full_logprobs(model, ids)
        mask = [0] * prompt + [1] * completion
        behaviour = [None] + [lp + rng.uniform(-0.3, 0.3) if m else None for lp, m in zip(logprobs, mask[1:], strict=True)]
        behaviour = [min(lp, 0.0) if lp is not None else None for lp in behaviour]
        samples.append(TrainingSample(ids, mask, behaviour, [0 if m else -1 for m in mask], advantage=rng.choice([-1.0, -0.5, 0.5, 1.0])))
    return samples


def config_of(**overrides) -> TrainerConfig:
    return TrainerConfig.model_validate(trainer_config(**overrides))


def sgd_trainer(model_dir, config: TrainerConfig) -> PolicyTrainer:
    """Plain SGD at rate 1: a step moves each weight by exactly minus its gradient (placed as PolicyTrainer.load places a model)."""
    model = PolicyTrainer._placed(load_model(model_dir), config, Ranks())
    return PolicyTrainer(model, torch.optim.SGD(model.parameters(), lr=1.0), config, TEMPERATURE)


def weights(trainer: PolicyTrainer) -> dict[str, torch.Tensor]:
    return {name: p.detach().clone() for name, p in trainer.model.named_parameters()}


def test_packs_hold_at_most_the_budget_in_order_and_a_long_sequence_alone(model_dir):
    samples = sampled(model_dir)
    fed = [max(s.trained_targets()) + 1 for s in samples]
    packs = pack_indices(samples, list(range(len(samples))), 24)
    assert [i for pack in packs for i in pack] == list(range(len(samples)))
    assert all(sum(fed[i] for i in pack) <= 24 or len(pack) == 1 for pack in packs)
    assert len(packs) < len(samples)
    assert pack_indices(samples, [3, 1], 0) == [[3], [1]]
    assert pack_indices(samples, [0, 1, 2], 1) == [[0], [1], [2]]


def test_segment_attention_is_causal_attention_inside_each_sequence_only():
    """Against PyTorch's attention under the block-diagonal causal mask of the same pack (2 query heads a key head)."""
    torch.manual_seed(0)
    bounds = (0, 5, 6, 13)
    query, key, value = torch.randn(1, 4, 13, 8), torch.randn(1, 2, 13, 8), torch.randn(1, 2, 13, 8)
    sequence = torch.repeat_interleave(torch.arange(3), torch.tensor([5, 1, 7]))
    allowed = (sequence[:, None] == sequence[None, :]) & torch.ones(13, 13, dtype=torch.bool).tril()
    expected = torch.nn.functional.scaled_dot_product_attention(query, key, value, attn_mask=allowed, scale=0.3, enable_gqa=True)
    output, _ = segment_attention(torch.nn.Module(), query, key, value, None, scaling=0.3, segment_bounds=bounds)
    torch.testing.assert_close(output, expected.transpose(1, 2))
    whole, _ = segment_attention(torch.nn.Module(), query, key, value, None, scaling=0.3)
    causal = torch.nn.functional.scaled_dot_product_attention(query, key, value, is_causal=True, scale=0.3, enable_gqa=True)
    torch.testing.assert_close(whole, causal.transpose(1, 2))
    with pytest.raises(ValueError, match="whole unpadded sequences"):
        segment_attention(torch.nn.Module(), query[:, :, -1:], key, value, None)
    with pytest.raises(ValueError, match="whole unpadded sequences"):
        segment_attention(torch.nn.Module(), query, key, value, allowed)
    with pytest.raises(ValueError, match="do not span"):
        segment_attention(torch.nn.Module(), query, key, value, None, segment_bounds=(0, 5, 12))


@pytest.mark.parametrize(
    "overrides",
    [
        {"loss": {"epsilon": 0.2, "epsilonHigh": 0.28, "beta": 0, "kl": "k3", "aggregation": "token-mean"}},
        {"loss": {"epsilon": 0.2, "epsilonHigh": 0.28, "beta": 0, "kl": "k3", "aggregation": "sequence-mean-token-mean"}},
        # Two minibatches: the second is scored before any update, and truncated IS reads those logprobs.
        {
            "optimizerStepsPerBatch": 2,
            "loss": {"epsilon": 0.2, "epsilonHigh": 0.28, "beta": 0, "kl": "k3", "aggregation": "token-mean", "tis": {"cap": 2}},
        },
    ],
    ids=["token-mean", "sequence-mean", "two-minibatches-tis"],
)
def test_packed_and_one_at_a_time_give_the_same_loss_and_gradients(model_dir, overrides):
    samples = sampled(model_dir)
    alone = sgd_trainer(model_dir, config_of(microBatchTokens=0, maxGradNorm=1e9, **overrides))
    # Packed, and recomputing each layer's activations in the backward pass: neither changes the math.
    packed = sgd_trainer(model_dir, config_of(microBatchTokens=40, maxGradNorm=1e9, activationCheckpointing=True, **overrides))
    layers = decoder_layers(packed.model)
    assert len(layers) == 2
    assert all(layer.forward.__name__ == "recomputed" for layer in layers)
    start = weights(alone)
    alone_metrics, alone_before = alone.train_batch(samples)
    packed_metrics, packed_before = packed.train_batch(samples)

    assert packed_metrics.loss == pytest.approx(alone_metrics.loss, abs=1e-6)
    assert packed_metrics.grad_norm == pytest.approx(alone_metrics.grad_norm, rel=1e-5)
    assert packed_metrics.clip_fraction == pytest.approx(alone_metrics.clip_fraction, abs=1e-6)
    for a, b in zip(alone_before, packed_before, strict=True):
        assert a is not None
        assert b is not None
        torch.testing.assert_close(b, a, atol=1e-6, rtol=1e-5)
    moved = 0
    for name, after in weights(packed).items():
        # SGD at rate 1: after - start = -gradient (summed over both minibatches' steps).
        torch.testing.assert_close(after - start[name], weights(alone)[name] - start[name], atol=1e-6, rtol=1e-4)
        moved += int((after != start[name]).sum())
    assert moved > 0


def test_bfloat16_updates_float32_master_weights_as_float32_would(model_dir):
    """A 1e-5 AdamW step: float32 weights move by about 1e-5 each; bfloat16 weights near 0.02 are 1e-4 apart, so the step would round away."""
    samples = sampled(model_dir)
    moves = {}
    for precision in ("float32", "bfloat16"):
        config = config_of(precision=precision, learningRate=1e-5, microBatchTokens=64)
        model = load_model(model_dir)
        trainer = PolicyTrainer(model, adamw(model, config), config, TEMPERATURE)
        start = weights(trainer)
        trainer.train_batch(samples)
        assert all(p.dtype == torch.float32 for p in trainer.model.parameters())
        moves[precision] = torch.cat([(p.detach() - start[name]).flatten() for name, p in trainer.model.named_parameters()])
    f32, bf16 = moves["float32"], moves["bfloat16"]
    assert float((bf16 != 0).float().mean()) > 0.95
    # Adam's first step is about lr x sign(gradient): bfloat16 gradients mostly agree in sign.
    assert float((torch.sign(bf16) == torch.sign(f32)).float().mean()) > 0.9
    assert float((bf16 - f32).abs().mean()) < 0.3e-5
    # What updating bfloat16 weights directly would have kept of the same step: most of it rounds away.
    initial = torch.cat([p.detach().flatten() for p in load_model(model_dir).parameters()])
    rounded = (initial + f32).to(torch.bfloat16) != initial.to(torch.bfloat16)
    assert float(rounded.float().mean()) < 0.5

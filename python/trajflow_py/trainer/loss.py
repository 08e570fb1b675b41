"""
The policy-gradient loss (the Python twin of src/rl/loss.ts): PPO's clipped surrogate on
token-level importance ratios, optionally weighted by truncated importance sampling on the
behaviour ratio, with an optional KL penalty to a reference policy, over a minibatch padded to
[B, T] with a mask (1 at trained tokens, 0 at untrained and padded ones).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from .inputs import Aggregation, LossConfig


@dataclass
class LossResult:
    loss: Tensor
    #: Masked tokens whose objective took the clipped branch (so they get no gradient).
    clip_fraction: Tensor
    #: KL(behaviour || policy) estimated per token with k3, averaged over masked tokens.
    approx_kl: Tensor
    #: Entropy of the sampling policy per masked token (Monte-Carlo: mean of -behaviour logprob).
    entropy: Tensor
    #: KL(policy || reference) with the configured estimator; only when beta > 0.
    ref_kl: Tensor | None = None
    #: With loss.tis: the mean behaviour weight, and the share of masked tokens the cap bounded.
    tis_weight: Tensor | None = None
    tis_capped_fraction: Tensor | None = None


def masked_mean(x: Tensor, mask: Tensor) -> Tensor:
    return (x * mask).sum() / mask.sum()


def aggregate(per_token: Tensor, mask: Tensor, aggregation: Aggregation) -> Tensor:
    """
    Per-token losses l[b, t] to one number:
      token-mean:                sum_{b,t} m l / sum_{b,t} m       (every trained token weighs the same)
      sequence-mean-token-mean:  (1/B) sum_b (sum_t m l / sum_t m) (every sequence weighs the same)
    """
    masked = per_token * mask
    if aggregation == "token-mean":
        return masked.sum() / mask.sum()
    return (masked.sum(dim=1) / mask.sum(dim=1)).mean()


def policy_loss(
    logprobs: Tensor,
    behaviour_logprobs: Tensor,
    mask: Tensor,
    advantages: Tensor,
    config: LossConfig,
    ref_logprobs: Tensor | None = None,
    old_logprobs: Tensor | None = None,
) -> LossResult:
    """
    The loss to minimise for a [B, T] minibatch (advantages: [B]), and its diagnostics.
    `old_logprobs`: the trainer's own logprobs before the step's first update, which loss.tis needs.
    """
    A = advantages.unsqueeze(1)  # [B, 1]: each sequence's advantage, broadcast over its tokens

    # Importance ratio of the trained policy to the sampling one, per token:
    #   r = pi_theta(a) / pi_behaviour(a) = exp(log pi_theta(a) - log pi_behaviour(a))
    # (x mask: untrained and padded positions get log r = 0, whatever they hold)
    log_ratio = (logprobs - behaviour_logprobs) * mask
    ratio = torch.exp(log_ratio)

    # With truncated importance sampling the proximal policy is the trainer's own before the step
    # (pi_old), and the behaviour ratio becomes a weight of its own, capped, with no gradient:
    #   r = pi_theta(a) / pi_old(a)        w = min(pi_old(a) / pi_behaviour(a), cap)
    tis_weight = behaviour_ratio = None
    surrogate_ratio = ratio
    if config.tis is not None:
        if old_logprobs is None:
            raise ValueError("policy_loss: loss.tis needs the trainer's logprobs before the step (old_logprobs)")
        old = old_logprobs.detach()
        surrogate_ratio = torch.exp((logprobs - old) * mask)
        behaviour_ratio = torch.exp((old - behaviour_logprobs) * mask)
        tis_weight = torch.clamp(behaviour_ratio, max=config.tis.cap)

    # PPO's clipped surrogate with an asymmetric clip range:
    #   l = -min(r A, clip(r, 1 - epsilon, 1 + epsilonHigh) A)    (x w with tis)
    unclipped = surrogate_ratio * A
    clipped = torch.clamp(surrogate_ratio, 1 - config.epsilon, 1 + config.epsilon_high) * A
    per_token = -torch.minimum(unclipped, clipped)
    if tis_weight is not None:
        per_token = per_token * tis_weight

    # KL penalty to a reference policy: l += beta * kl, per token, with d = log pi_ref - log pi_theta:
    #   k1 = -d                 (unbiased, noisy, can be negative)
    #   k3 = exp(d) - d - 1     (unbiased, always >= 0, low variance)
    ref_kl = None
    if config.beta > 0:
        if ref_logprobs is None:
            raise ValueError("policy_loss: beta > 0 needs reference logprobs")
        d = (ref_logprobs - logprobs) * mask
        kl_per_token = -d if config.kl == "k1" else torch.exp(d) - d - 1
        per_token = per_token + config.beta * kl_per_token
        ref_kl = masked_mean(kl_per_token, mask)

    loss = aggregate(per_token, mask, config.aggregation)

    # Diagnostics, all means over masked tokens, none differentiated:
    #   clip fraction: the min took the clipped term (strictly smaller), zeroing the token's gradient
    #   approx KL(behaviour || theta) by k3 with d = -log r:  r - 1 - log r
    #   entropy of the sampling policy: E_{a ~ pi_behaviour}[-log pi_behaviour(a)], from the sampled tokens
    #   with tis: the mean weight w, and the share of tokens whose weight the cap bounded
    with torch.no_grad():
        clip_fraction = masked_mean((clipped < unclipped).to(mask.dtype), mask)
        approx_kl = masked_mean(ratio - 1 - log_ratio, mask)
        entropy = masked_mean(-behaviour_logprobs, mask)
        tis_mean = tis_capped = None
        if tis_weight is not None and behaviour_ratio is not None and config.tis is not None:
            tis_mean = masked_mean(tis_weight, mask)
            tis_capped = masked_mean((behaviour_ratio > config.tis.cap).to(mask.dtype), mask)
    return LossResult(loss, clip_fraction, approx_kl, entropy, None if ref_kl is None else ref_kl.detach(), tis_mean, tis_capped)

"""
The trainer of a real model (the Python twin of src/rl/trainer.ts): a Hugging Face causal LM
updated by AdamW on the clipped policy-gradient loss.

Each sequence runs through the model at its own length, one backward pass per sequence, and the
minibatch's gradient is their share-weighted sum (`share`): nothing is padded and memory stays
that of one sequence's graph, exactly as the TypeScript trainer does it. Logits are projected at
trained targets only, all the loss reads.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor
from transformers import PreTrainedModel

from .files import verify_directory
from .inputs import TrainerConfig
from .loss import LossResult, policy_loss
from .policy import OPTIMIZER_FILE, load_model, model_limits, save_checkpoint, target_logprobs
from .samples import TrainingSample, assert_training_samples, masked_tokens


@dataclass(frozen=True)
class TrainMetrics:
    #: Mean over the batch's minibatches of the loss before their update.
    loss: float = 0.0
    #: Token means over the whole batch (see LossResult).
    clip_fraction: float = 0.0
    approx_kl: float = 0.0
    entropy: float = 0.0
    #: Mean over minibatches of the global gradient norm before clipping.
    grad_norm: float = 0.0
    #: Trained (loss mask 1) tokens, and sequences.
    tokens: int = 0
    sequences: int = 0
    step_ms: float = 0.0
    #: Time in forward and backward passes (and reference logprobs), and in clipping and AdamW.
    forward_backward_ms: float = 0.0
    optimizer_ms: float = 0.0
    #: Only when the loss has a KL term (beta > 0).
    ref_kl: float | None = None
    #: Only with loss.tis: token means of the behaviour weight, and of the tokens whose weight the cap bounded.
    tis_weight_mean: float | None = None
    tis_capped_fraction: float | None = None

    def to_json(self) -> dict:
        """The TrainMetrics JSON of the TypeScript trainer (refKl only when there is a reference)."""
        return {
            "loss": self.loss,
            "clipFraction": self.clip_fraction,
            "approxKl": self.approx_kl,
            **({} if self.ref_kl is None else {"refKl": self.ref_kl}),
            "entropy": self.entropy,
            **({} if self.tis_weight_mean is None else {"tisWeightMean": self.tis_weight_mean, "tisCappedFraction": self.tis_capped_fraction}),
            "gradNorm": self.grad_norm,
            "tokens": self.tokens,
            "sequences": self.sequences,
            "stepMs": self.step_ms,
            "forwardBackwardMs": self.forward_backward_ms,
            "optimizerMs": self.optimizer_ms,
        }


#: A batch with nothing to train: no optimizer step was taken.
NOTHING_TRAINED = TrainMetrics()


def split(items: list, parts: int) -> list[list]:
    """`items` as `parts` contiguous runs whose lengths differ by at most one."""
    n = len(items)
    return [items[(k * n) // parts : ((k + 1) * n) // parts] for k in range(parts)]


def share(sample: TrainingSample, minibatch: list[TrainingSample], aggregation: str) -> float:
    """
    How much one sequence weighs in its minibatch's loss, as its share of the aggregation's
    denominator: its trained tokens for token-mean, one sequence otherwise. Summing share x
    loss(sequence) over the minibatch gives exactly loss(minibatch), for both aggregations.
    """
    if aggregation == "sequence-mean-token-mean":
        return 1 / len(minibatch)
    return masked_tokens([sample]) / masked_tokens(minibatch)


def clip_by_global_norm(parameters: list[torch.nn.Parameter], max_norm: float) -> float:
    """
    Rescales the gradients so their global norm is at most `max_norm`; returns the norm before.
    Raises on a non-finite norm, which no update should apply.
    """
    grads = [p.grad for p in parameters if p.grad is not None]
    # Global norm: ||g|| = sqrt(sum over tensors p of sum(g_p^2)), summed in float32 (bfloat16 grads too)
    norm = math.sqrt(sum(float(g.float().pow(2).sum()) for g in grads))
    if not math.isfinite(norm):
        raise FloatingPointError(f"non-finite gradient norm ({norm}); the weights were not updated")
    # Clipping: g <- g * min(1, maxNorm / ||g||)  (exactly; torch's clip_grad_norm_ adds 1e-6 to ||g||)
    if norm > max_norm:
        for g in grads:
            g.mul_(max_norm / norm)
    return norm


def adamw(model: PreTrainedModel, config: TrainerConfig) -> torch.optim.AdamW:
    # weight_decay 0: the TypeScript trainer's optimizer is plain Adam, and AdamW without decay is
    # exactly Adam (same moments, bias corrections and eps placement); betas torch's = Adam's usual.
    return torch.optim.AdamW(model.parameters(), lr=config.learning_rate, eps=config.adam_epsilon, weight_decay=0.0)


def _ms_since(started: float) -> float:
    return (time.perf_counter() - started) * 1000


class PolicyTrainer:
    def __init__(
        self,
        model: PreTrainedModel,
        optimizer: torch.optim.Optimizer,
        config: TrainerConfig,
        temperature: float,
        reference: PreTrainedModel | None = None,
    ) -> None:
        if config.loss.beta > 0 and reference is None:
            raise ValueError("loss.beta > 0 needs a reference policy")
        self.model = model
        self.optimizer = optimizer
        self.config = config
        self.temperature = temperature
        self.reference = reference

    @classmethod
    def load(cls, checkpoint: Path, reference: Path, config: TrainerConfig, temperature: float, device: torch.device) -> PolicyTrainer:
        """
        The trainer at a checkpoint: its weights and its optimizer state (a fresh AdamW where it
        has none, as version 0), and the reference policy (version 0) when the loss has a KL term.
        Each directory is checked against its manifest first (CorruptFileError if it differs).
        """
        # The optimizer state of a version no step resumes from is removed on purpose (drop_optimizer_state).
        verify_directory(checkpoint, may_be_absent=(OPTIMIZER_FILE,))
        model = load_model(checkpoint, config.precision, device)
        optimizer = adamw(model, config)
        state_file = checkpoint / OPTIMIZER_FILE
        if state_file.exists():
            optimizer.load_state_dict(torch.load(state_file, map_location=device, weights_only=True))
            # load_state_dict restores the saved hyperparameters too: the run's config rules.
            for group in optimizer.param_groups:
                group.update(lr=config.learning_rate, eps=config.adam_epsilon, weight_decay=0.0)
        ref_model = None
        if config.loss.beta > 0:
            verify_directory(reference, may_be_absent=(OPTIMIZER_FILE,))
            ref_model = load_model(reference, config.precision, device).requires_grad_(False)
        return cls(model, optimizer, config, temperature, ref_model)

    def save(self, dest: Path, base: Path) -> None:
        """A checkpoint directory of the current weights and optimizer state (`base`: its tokenizer's)."""
        save_checkpoint(self.model, self.optimizer, base, dest)

    def score(self, sample: TrainingSample) -> Tensor:
        """The current policy's logprobs of the sample's trained tokens (no gradient)."""
        with torch.no_grad():
            return target_logprobs(self.model, sample.ids, sample.trained_targets(), self.temperature)

    def _backward(self, sample: TrainingSample, weight: float, old: Tensor | None) -> tuple[Tensor, LossResult]:
        """
        Adds weight x the gradient of the sample's loss to the parameters' gradients; returns the
        sample's logprobs (detached) and its loss result. `old`: its logprobs before the step's
        first update, None where no update came before this pass (then this pass's own are).
        """
        device = self.model.device
        targets = sample.trained_targets()
        logprobs = target_logprobs(self.model, sample.ids, targets, self.temperature)
        old_logprobs = logprobs.detach() if old is None else old
        behaviour = torch.tensor([sample.behaviour_logprobs[t + 1] for t in targets], device=device, dtype=torch.float32)
        ref = None
        if self.reference is not None:
            with torch.no_grad():
                ref = target_logprobs(self.reference, sample.ids, targets, self.temperature)[None]
        advantage = torch.tensor([sample.advantage], device=device, dtype=torch.float32)
        # One row, every position a trained target: the mask is all ones.
        ones = torch.ones_like(behaviour)[None]
        result = policy_loss(logprobs[None], behaviour[None], ones, advantage, self.config.loss, ref, old_logprobs[None])
        (result.loss * weight).backward()
        return logprobs.detach(), result

    def train_batch(self, samples: list[TrainingSample], *, learning_rate: float | None = None) -> tuple[TrainMetrics, list[Tensor | None]]:
        """
        One RL update on `samples`: split into `optimizerStepsPerBatch` contiguous minibatches, one
        AdamW step each, so later minibatches see a policy that already moved (which is what the
        importance ratio and its clipping are for).

        Also returns the logprobs of each sample's trained tokens under the weights BEFORE the
        update (loss.tis weighs by them; the step's metrics compare them with the sampler's): the
        first minibatch's come free from its forward pass, the others' from a pass before any update.

        A batch in which every advantage is 0 (every group all solved or all failed) has a loss of 0
        and no gradient unless a KL penalty pulls toward the reference; it takes no AdamW step, since
        the optimizer's momentum alone would still move the policy, on no evidence (its samples
        are still scored).

        `learning_rate`: this step's (a run's schedule moves it; the trainer outlives a step), by
        default the rate the optimizer has.
        """
        vocab, max_context = model_limits(self.model)
        assert_training_samples(samples, vocab, max_context)
        if learning_rate is not None:
            if not (math.isfinite(learning_rate) and learning_rate > 0):
                raise ValueError(f"learning_rate must be a finite number > 0, got {learning_rate}")
            for group in self.optimizer.param_groups:
                group["lr"] = learning_rate
        if self.config.loss.beta == 0 and all(sample.advantage == 0 for sample in samples):
            # Scored all the same: the step's metrics compare them with the sampler's every step.
            return NOTHING_TRAINED, [self.score(sample) for sample in samples]
        steps = self.config.optimizer_steps_per_batch
        if len(samples) < steps:
            raise ValueError(f"optimizerStepsPerBatch ({steps}) exceeds the batch's {len(samples)} samples")
        started = time.perf_counter()
        minibatches = split(list(range(len(samples))), steps)
        parameters = [p for p in self.model.parameters() if p.requires_grad]

        before: list[Tensor | None] = [None] * len(samples)
        for i in (i for minibatch in minibatches[1:] for i in minibatch):
            before[i] = self.score(samples[i])
        forward_backward_ms = _ms_since(started)
        optimizer_ms = loss_sum = grad_norm_sum = 0.0
        # Token-weighted sums of the per-sequence metric means.
        sums = {"clip_fraction": 0.0, "approx_kl": 0.0, "entropy": 0.0, "ref_kl": 0.0, "tis_weight": 0.0, "tis_capped_fraction": 0.0}
        for k, minibatch in enumerate(minibatches):
            forward_started = time.perf_counter()
            batch = [samples[i] for i in minibatch]
            self.optimizer.zero_grad(set_to_none=True)
            for i in minibatch:
                weight = share(samples[i], batch, self.config.loss.aggregation)
                logprobs, result = self._backward(samples[i], weight, before[i])
                if k == 0:
                    before[i] = logprobs
                loss_sum += float(result.loss.detach()) * weight / steps
                tokens = len(logprobs)
                for name in sums:
                    value = getattr(result, name)
                    sums[name] += 0.0 if value is None else float(value) * tokens
            optimizer_started = time.perf_counter()
            grad_norm_sum += clip_by_global_norm(parameters, self.config.max_grad_norm)
            self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)
            optimizer_ms += _ms_since(optimizer_started)
            forward_backward_ms += (optimizer_started - forward_started) * 1000

        tokens = masked_tokens(samples)
        metrics = TrainMetrics(
            loss=loss_sum,
            clip_fraction=sums["clip_fraction"] / tokens,
            approx_kl=sums["approx_kl"] / tokens,
            entropy=sums["entropy"] / tokens,
            ref_kl=sums["ref_kl"] / tokens if self.reference is not None else None,
            tis_weight_mean=sums["tis_weight"] / tokens if self.config.loss.tis is not None else None,
            tis_capped_fraction=sums["tis_capped_fraction"] / tokens if self.config.loss.tis is not None else None,
            grad_norm=grad_norm_sum / steps,
            tokens=tokens,
            sequences=len(samples),
            step_ms=_ms_since(started),
            forward_backward_ms=forward_backward_ms,
            optimizer_ms=optimizer_ms,
        )
        return metrics, before

"""
The trainer of a real model (the Python twin of src/rl/trainer.ts): a Hugging Face causal LM
updated by AdamW on the clipped policy-gradient loss.

Sequences run packed side by side, up to `microBatchTokens` fed tokens a forward pass (each alone
where it is 0), one backward pass per pack, and the minibatch's gradient is the packs'
share-weighted sum (`share`): nothing is padded, and memory stays that of one pack's graph.
Logits are projected at trained targets only, all the loss reads. Over several processes
(distributed.py) each rank runs its share of the packs on its slice of the sharded model.

Precision: parameters, gradients and AdamW's moments are always float32 (the master weights);
`bfloat16` runs the passes' matmuls in bfloat16 and publishes bfloat16 weights.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import torch
from torch import Tensor
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_optimizer_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
)
from torch.distributed.checkpoint.state_dict_loader import load as load_distributed
from torch.distributed.checkpoint.state_dict_saver import save as save_distributed
from transformers import PreTrainedModel

from .adapters import adapter_dropout, adapter_state, load_adapter, save_adapter
from .distributed import Ranks, decoder_layers, local_part, shard
from .files import verify_directory
from .inputs import TrainerConfig
from .loss import LossResult, policy_loss
from .packing import fed_length, pack_indices, packed_row, pad_rows
from .policy import TRAINER_STATE_DIR, checkpoint_activations, computing, load_model, model_limits, row_logprobs, save_published
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


def share(sample: TrainingSample, minibatch_tokens: int, minibatch_size: int, aggregation: str) -> float:
    """
    How much one sequence weighs in its minibatch's loss, as its share of the aggregation's
    denominator: its trained tokens for token-mean, one sequence otherwise. Summing share x
    loss(sequence) over the minibatch gives exactly loss(minibatch), for both aggregations.
    """
    if aggregation == "sequence-mean-token-mean":
        return 1 / minibatch_size
    return masked_tokens([sample]) / minibatch_tokens


def clip_by_global_norm(parameters: list[torch.nn.Parameter], max_norm: float, ranks: Ranks) -> float:
    """
    Rescales the gradients so their global norm is at most `max_norm`; returns the norm before.
    Raises on a non-finite norm, which no update should apply.
    """
    grads = [p.grad for p in parameters if p.grad is not None]
    # Global norm: ||g|| = sqrt(sum over tensors p of sum(g_p^2)), summed in float32 (bfloat16 grads
    # too), each rank over the slice of every tensor it holds, then over ranks.
    (squares,) = ranks.sum([sum(float(local_part(g).float().pow(2).sum()) for g in grads)])
    norm = math.sqrt(squares)
    if not math.isfinite(norm):
        raise FloatingPointError(f"non-finite gradient norm ({norm}); the weights were not updated")
    # Clipping: g <- g * min(1, maxNorm / ||g||)  (exactly; torch's clip_grad_norm_ adds 1e-6 to ||g||)
    if norm > max_norm:
        for g in grads:
            g.mul_(max_norm / norm)
    return norm


def adamw(model: torch.nn.Module, config: TrainerConfig) -> torch.optim.AdamW:
    # weight_decay 0: the TypeScript trainer's optimizer is plain Adam, and AdamW without decay is
    # exactly Adam (same moments, bias corrections and eps placement); betas torch's = Adam's usual.
    trainable = [p for p in model.parameters() if p.requires_grad]
    return torch.optim.AdamW(trainable, lr=config.learning_rate, eps=config.adam_epsilon, weight_decay=0.0)


def assign_packs(samples: list[TrainingSample], packs: list[list[int]], ranks: Ranks) -> list[list[int] | None]:
    """
    This rank's share of a minibatch's packs, balanced by fed tokens (the largest pack to the least
    loaded rank), padded with None to as many as the busiest rank has: every rank must run as many
    passes, since each pass of a sharded model gathers weights from all of them.
    """
    if not ranks.distributed:
        return list(packs)
    loads = [0] * ranks.world
    owned: list[list[int]] = [[] for _ in range(ranks.world)]
    sizes = [sum(fed_length(samples[i]) for i in pack) for pack in packs]
    for p in sorted(range(len(packs)), key=lambda p: -sizes[p]):
        rank = min(range(ranks.world), key=lambda r: loads[r])
        loads[rank] += sizes[p]
        owned[rank].append(p)
    passes = max(len(mine) for mine in owned)
    mine: list[list[int] | None] = [packs[p] for p in sorted(owned[ranks.rank])]
    return mine + [None] * (passes - len(mine))


def tied_aliases(model: torch.nn.Module) -> set[str]:
    """Parameter names that name a parameter already named earlier (as a tied output head does)."""
    every = {name for name, _ in model.named_parameters(remove_duplicate=False)}
    return every - {name for name, _ in model.named_parameters()}


def _ms_since(started: float) -> float:
    return (time.perf_counter() - started) * 1000


def _behaviour(sample: TrainingSample, device: torch.device) -> Tensor:
    return torch.tensor([sample.behaviour_logprobs[t + 1] for t in sample.trained_targets()], device=device, dtype=torch.float32)


class PolicyTrainer:
    def __init__(
        self,
        model: PreTrainedModel,
        optimizer: torch.optim.Optimizer,
        config: TrainerConfig,
        temperature: float,
        ranks: Ranks | None = None,
        reference: PreTrainedModel | None = None,
    ) -> None:
        """`reference`: the KL penalty's policy; with LoRA none is needed (the model with its adapter off is it)."""
        if config.loss.beta > 0 and reference is None and config.lora is None:
            raise ValueError("loss.beta > 0 needs a reference policy")
        self.model = model
        self.optimizer = optimizer
        self.config = config
        self.temperature = temperature
        self.ranks = ranks or Ranks()
        self.reference = reference
        self.has_reference = config.loss.beta > 0
        self.limits = model_limits(model)
        #: Names of parameters that are another's (tied embeddings): a gathered state dict holds
        #: them as copies, which the published weights must not repeat.
        self.aliases = tied_aliases(model)

    @classmethod
    def load(cls, checkpoint: Path, reference: Path, base_model: Path, config: TrainerConfig, temperature: float, ranks: Ranks) -> PolicyTrainer:
        """
        The trainer at a checkpoint, on every rank: its weights (with LoRA: the base model
        `base_model` and the checkpoint's adapter), its master weights and optimizer state (a fresh
        AdamW where it has none, as version 0), and the reference policy (version 0) when the loss
        has a KL term. Each directory is checked against its manifest first (CorruptFileError if it
        differs).
        """
        # The trainer state of a version no step resumes from is removed on purpose (drop_trainer_state).
        verify_directory(checkpoint, may_be_absent_under=TRAINER_STATE_DIR)
        model = cls._placed(policy_at(checkpoint, base_model, config), config, ranks)
        optimizer = adamw(model, config)
        state_dir = checkpoint / TRAINER_STATE_DIR
        if state_dir.is_dir():
            load_trainer_state(model, optimizer, state_dir, has_masters(config))
            # The saved hyperparameters come back too: the run's config rules.
            for group in optimizer.param_groups:
                group.update(lr=config.learning_rate, eps=config.adam_epsilon, weight_decay=0.0)
        ref_model = None
        if config.loss.beta > 0 and config.lora is None:
            verify_directory(reference, may_be_absent_under=TRAINER_STATE_DIR)
            ref_model = cls._placed(load_model(reference).requires_grad_(False), config, ranks)
        return cls(model, optimizer, config, temperature, ranks, ref_model)

    @staticmethod
    def _placed(model: PreTrainedModel, config: TrainerConfig, ranks: Ranks) -> PreTrainedModel:
        """The model on this rank's device: sharded over the ranks where there are several."""
        if config.activation_checkpointing:
            checkpoint_activations(model, decoder_layers(model))
        if ranks.distributed:
            shard(model, ranks)
        else:
            # transformers wraps PreTrainedModel.to with functools.wraps, which mypy reads as an unbound method.
            model.to(ranks.device)  # type: ignore[arg-type]
        return model

    def save(self, dest: Path, base: Path) -> None:
        """
        Writes a checkpoint directory, every rank taking part: the published weights (the leader
        writes them, in the run's precision, with `base`'s tokenizer) and the state a resume reads.
        """
        if self.config.lora is not None:
            adapter = adapter_state(self.model)
            if self.ranks.leader:
                save_adapter(self.model, adapter, base, dest)
        else:
            full = cast(dict[str, Tensor], get_model_state_dict(self.model, options=StateDictOptions(full_state_dict=True, cpu_offload=True)))
            if self.ranks.leader:
                published = {name: tensor for name, tensor in full.items() if name not in self.aliases}
                save_published(self.model, published, self.config.precision, base, dest)
            del full
        save_trainer_state(self.model, self.optimizer, dest / TRAINER_STATE_DIR, has_masters(self.config))

    def _logprobs(self, model: torch.nn.Module, pack: list[TrainingSample] | None) -> list[Tensor]:
        """The logprobs of each packed sample's trained tokens; for no pack, of a stand-in token
        (a pass this rank makes so that its weight gathers match the other ranks')."""
        row = packed_row(pack if pack is not None else [STAND_IN], self.ranks.device)
        with computing(self.config.precision, self.ranks.device):
            return row_logprobs(model, row, self.temperature)

    def score(self, samples: list[TrainingSample]) -> list[Tensor]:
        """The current policy's logprobs of each sample's trained tokens (no gradient), the passes shared among the ranks."""
        packs = assign_packs(samples, pack_indices(samples, list(range(len(samples))), self.config.micro_batch_tokens), self.ranks)
        return self._everyones(self._scored(samples, packs), len(samples))

    def _scored(self, samples: list[TrainingSample], packs: list[list[int] | None]) -> dict[int, Tensor]:
        """The current policy's logprobs (no gradient) of the samples in this rank's `packs`, by sample index."""
        scored: dict[int, Tensor] = {}
        with torch.no_grad():
            for pack in packs:
                logprobs = self._logprobs(self.model, None if pack is None else [samples[i] for i in pack])
                if pack is not None:
                    scored.update((i, lp.cpu()) for i, lp in zip(pack, logprobs, strict=True))
        return scored

    def _reference_logprobs(self, pack: list[TrainingSample] | None) -> list[Tensor]:
        """The reference policy's logprobs (version 0): its own model, or with LoRA this one with its adapter off."""
        with torch.no_grad():
            if self.reference is not None:
                return self._logprobs(self.reference, pack)
            peft_model: Any = self.model
            with peft_model.disable_adapter():
                return self._logprobs(self.model, pack)

    def _everyones(self, mine: dict[int, Tensor], count: int) -> list[Tensor]:
        merged: dict[int, Tensor] = {}
        for part in self.ranks.gather(mine):
            merged.update(part)
        return [merged[i] for i in range(count)]

    def _backward(
        self, samples: list[TrainingSample], pack: list[int] | None, weight: float, old: list[Tensor | None]
    ) -> tuple[list[Tensor], LossResult | None]:
        """
        Adds weight x the gradient of the pack's loss to the parameters' gradients; returns each
        sample's logprobs (detached) and the pack's loss result. `old`: each sample's logprobs before
        the step's first update, None where no update came before this pass (then this pass's own
        are). No pack: a pass of no weight, for the lock-step of the ranks.
        """
        device = self.ranks.device
        packed = None if pack is None else [samples[i] for i in pack]
        with adapter_dropout(self.model, self.config.lora is not None and self.config.lora.dropout > 0):
            logprobs = self._logprobs(self.model, packed)
        ref = self._reference_logprobs(packed) if self.has_reference else None
        if packed is None:
            (logprobs[0].sum() * 0.0).backward()
            return [], None
        behaviour = [_behaviour(sample, device) for sample in packed]
        olds = [lp.detach() if o is None else o.to(device) for lp, o in zip(logprobs, old, strict=True)]
        advantages = torch.tensor([sample.advantage for sample in packed], device=device, dtype=torch.float32)
        mask = pad_rows([torch.ones_like(b) for b in behaviour])
        result = policy_loss(
            pad_rows(logprobs), pad_rows(behaviour), mask, advantages, self.config.loss, None if ref is None else pad_rows(ref), pad_rows(olds)
        )
        # x world: FSDP averages the ranks' gradients, and their weighted sum is the minibatch's.
        (result.loss * (weight * self.ranks.world)).backward()
        return [lp.detach().cpu() for lp in logprobs], result

    def train_batch(self, samples: list[TrainingSample], *, learning_rate: float | None = None) -> tuple[TrainMetrics, list[Tensor | None]]:
        """
        One RL update on `samples`: split into `optimizerStepsPerBatch` contiguous minibatches, one
        AdamW step each, so later minibatches see a policy that already moved (which is what the
        importance ratio and its clipping are for). Each minibatch runs as packs of up to
        `microBatchTokens` fed tokens, shared among the ranks; its gradient is the share-weighted sum
        of the packs' (`share`), which is exactly the gradient of the minibatch's loss.

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
        assert_training_samples(samples, *self.limits)
        if learning_rate is not None:
            if not (math.isfinite(learning_rate) and learning_rate > 0):
                raise ValueError(f"learning_rate must be a finite number > 0, got {learning_rate}")
            for group in self.optimizer.param_groups:
                group["lr"] = learning_rate
        if self.config.loss.beta == 0 and all(sample.advantage == 0 for sample in samples):
            # Scored all the same: the step's metrics compare them with the sampler's every step.
            return NOTHING_TRAINED, list(self.score(samples))
        steps = self.config.optimizer_steps_per_batch
        if len(samples) < steps:
            raise ValueError(f"optimizerStepsPerBatch ({steps}) exceeds the batch's {len(samples)} samples")
        started = time.perf_counter()
        aggregation = self.config.loss.aggregation
        minibatches = split(list(range(len(samples))), steps)
        plans = [assign_packs(samples, pack_indices(samples, minibatch, self.config.micro_batch_tokens), self.ranks) for minibatch in minibatches]
        parameters = [p for p in self.model.parameters() if p.requires_grad]

        before = self._scored(samples, [pack for plan in plans[1:] for pack in plan])
        forward_backward_ms = _ms_since(started)
        optimizer_ms = loss_sum = grad_norm_sum = 0.0
        # Token-weighted sums of the per-pack metric means, summed over ranks at the end.
        sums = {"clip_fraction": 0.0, "approx_kl": 0.0, "entropy": 0.0, "ref_kl": 0.0, "tis_weight": 0.0, "tis_capped_fraction": 0.0}
        for k, (minibatch, plan) in enumerate(zip(minibatches, plans, strict=True)):
            forward_started = time.perf_counter()
            minibatch_tokens = masked_tokens([samples[i] for i in minibatch])
            self.optimizer.zero_grad(set_to_none=True)
            for pack in plan:
                weight = 0.0 if pack is None else sum(share(samples[i], minibatch_tokens, len(minibatch), aggregation) for i in pack)
                logprobs, result = self._backward(samples, pack, weight, [before.get(i) for i in pack or []])
                if result is None or pack is None:
                    continue
                if k == 0:
                    before.update(zip(pack, logprobs, strict=True))
                loss_sum += float(result.loss.detach()) * weight / steps
                tokens = sum(len(lp) for lp in logprobs)
                for name in sums:
                    value = getattr(result, name)
                    sums[name] += 0.0 if value is None else float(value) * tokens
            optimizer_started = time.perf_counter()
            grad_norm_sum += clip_by_global_norm(parameters, self.config.max_grad_norm, self.ranks)
            self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)
            optimizer_ms += _ms_since(optimizer_started)
            forward_backward_ms += (optimizer_started - forward_started) * 1000

        names = list(sums)
        loss_sum, *totals = self.ranks.sum([loss_sum, *(sums[name] for name in names)])
        sums = dict(zip(names, totals, strict=True))
        tokens = masked_tokens(samples)
        metrics = TrainMetrics(
            loss=loss_sum,
            clip_fraction=sums["clip_fraction"] / tokens,
            approx_kl=sums["approx_kl"] / tokens,
            entropy=sums["entropy"] / tokens,
            ref_kl=sums["ref_kl"] / tokens if self.has_reference else None,
            tis_weight_mean=sums["tis_weight"] / tokens if self.config.loss.tis is not None else None,
            tis_capped_fraction=sums["tis_capped_fraction"] / tokens if self.config.loss.tis is not None else None,
            grad_norm=grad_norm_sum / steps,
            tokens=tokens,
            sequences=len(samples),
            step_ms=_ms_since(started),
            forward_backward_ms=forward_backward_ms,
            optimizer_ms=optimizer_ms,
        )
        return metrics, list(self._everyones(before, len(samples)))


#: What a rank with no pack left feeds (its loss weighs 0).
STAND_IN = TrainingSample(ids=[0, 0], loss_mask=[0, 1], behaviour_logprobs=[None, 0.0], policy_versions=[-1, 0], advantage=0.0)


def has_masters(config: TrainerConfig) -> bool:
    """Whether the published weights are rounded (bfloat16 full weights): a resume then needs the float32
    masters besides. A LoRA adapter is published in float32."""
    return config.precision != "float32" and config.lora is None


def policy_at(checkpoint: Path, base_model: Path, config: TrainerConfig) -> PreTrainedModel:
    """The policy a checkpoint publishes: its full weights, or with LoRA the base model and the checkpoint's adapter."""
    if config.lora is None:
        return load_model(checkpoint)
    return cast(PreTrainedModel, load_adapter(checkpoint, base_model))


def save_trainer_state(model: torch.nn.Module, optimizer: torch.optim.Optimizer, folder: Path, with_masters: bool) -> None:
    """AdamW's state (and the float32 master weights, where the published ones are rounded to bfloat16), each rank its slice."""
    state: dict = {"optimizer": get_optimizer_state_dict(model, optimizer)}
    if with_masters:
        state["model"] = get_model_state_dict(model)
    save_distributed(state, checkpoint_id=folder)


def load_trainer_state(model: torch.nn.Module, optimizer: torch.optim.Optimizer, folder: Path, with_masters: bool) -> None:
    """What save_trainer_state wrote, into this rank's slices (any number of ranks may have written it)."""
    state: dict = {"optimizer": get_optimizer_state_dict(model, optimizer)}
    if with_masters:
        state["model"] = get_model_state_dict(model)
    load_distributed(state, checkpoint_id=folder)
    if "model" in state:
        set_model_state_dict(model, state["model"])
    set_optimizer_state_dict(model, optimizer, state["optimizer"])

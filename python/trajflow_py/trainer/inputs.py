"""
The activity inputs, as activities/trainer.ts declares them (PrepareInput, TrainStepInput) and as
the training workflow sends them: the run's TrainerConfig fully parsed by config/schema.ts, so
every field the trainer reads is required here and no default is repeated (the schema alone holds
them) except the fields that came later (`precision`, `checkpoints`, `microBatchTokens`,
`activationCheckpointing`, `lora`), for workflows started before they existed. Ranges mirror the schema's.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .settings import Compatibility
from .validation import CamelModel

AdvantageEstimator = Literal["grpo", "rloo", "drgrpo"]
Aggregation = Literal["token-mean", "sequence-mean-token-mean"]
Precision = Literal["float32", "bfloat16"]


class TisConfig(CamelModel):
    #: The most a token's behaviour weight min(pi_old / pi_behaviour, cap) can be.
    cap: float = Field(ge=1, allow_inf_nan=False)


class LossConfig(CamelModel):
    #: PPO clip range below 1 (the ratio's floor is 1 - epsilon).
    epsilon: float = Field(gt=0, lt=1)
    #: Clip range above 1 (the ratio's ceiling is 1 + epsilonHigh; > epsilon is DAPO's clip-higher).
    epsilon_high: float = Field(gt=0, allow_inf_nan=False)
    #: KL-to-reference coefficient; 0 turns the reference policy off.
    beta: float = Field(ge=0, allow_inf_nan=False)
    kl: Literal["k1", "k3"]
    aggregation: Aggregation
    #: Truncated importance sampling on the behaviour ratio; None: off (see policy_loss).
    tis: TisConfig | None = None


class TurnCreditConfig(CamelModel):
    weight: float = Field(ge=0)
    discount: float = Field(gt=0, le=1)


class CheckpointRetention(CamelModel):
    keep_last: int = Field(ge=1)
    #: 0: no sparse history.
    keep_every: int = Field(ge=0)


class LoraSettings(CamelModel):
    rank: int = Field(ge=1)
    alpha: int = Field(ge=1)
    target_modules: list[str] = Field(min_length=1)
    dropout: float = Field(ge=0, lt=1)


class WarmupSettings(CamelModel):
    """`trainer.warmup`: supervised steps on demonstrations before RL (trainer/warmup.py)."""

    demonstrations: str = Field(min_length=1)
    steps: int = Field(ge=1)
    batch_size: int = Field(ge=1)
    learning_rate: float = Field(gt=0, allow_inf_nan=False)


class TrainerConfig(CamelModel):
    advantage: AdvantageEstimator
    turn_credit: TurnCreditConfig | None = None
    loss: LossConfig
    group_filter: Literal["none", "mixed-outcomes"]
    learning_rate: float = Field(gt=0, allow_inf_nan=False)
    max_grad_norm: float = Field(gt=0, allow_inf_nan=False)
    adam_epsilon: float = Field(gt=0, allow_inf_nan=False)
    optimizer_steps_per_batch: int = Field(ge=1)
    format_warmup_steps: int = Field(ge=0)
    max_staleness: int = Field(ge=0)
    precision: Precision = "float32"
    #: None (a workflow started before retention existed): every version is kept.
    checkpoints: CheckpointRetention | None = None
    #: Fed tokens packed into one forward pass; 0: each sequence alone (as before packing existed).
    micro_batch_tokens: int = Field(default=0, ge=0)
    activation_checkpointing: bool = False
    #: None: every weight trains (full fine-tuning).
    lora: LoraSettings | None = None
    #: None: version 0 is the model as it is.
    warmup: WarmupSettings | None = None


class GroupSummary(CamelModel):
    """What the trainer reads of a group (src/core/records.ts); the rest is ignored."""

    group_id: str
    trajectory_ids: list[str]
    rewards: list[float]
    solved: list[bool]


class PrepareInput(CamelModel):
    run_id: str
    trainer: TrainerConfig
    temperature: float = Field(gt=0, allow_inf_nan=False)
    compatibility: Compatibility | None = None


class TrainStepInput(CamelModel):
    run_id: str
    step: int = Field(ge=0)
    base_version: int = Field(ge=0)
    groups: list[GroupSummary]
    trainer: TrainerConfig
    #: Sampling temperature: tokens are scored under the distribution that sampled them.
    temperature: float = Field(gt=0, allow_inf_nan=False)
    #: When the run started (epoch ms), for the learning curve's elapsed time.
    run_started_at: float | None = None
    #: The run's `eval.everySteps` (0: no evaluations): retention keeps a version evaluated at until it is.
    eval_every_steps: int = Field(default=0, ge=0)
    compatibility: Compatibility | None = None


class RunScoped(CamelModel):
    """The part of any input read before the rest is validated: which run, and its fingerprint."""

    run_id: str = "?"
    compatibility: Compatibility | None = None

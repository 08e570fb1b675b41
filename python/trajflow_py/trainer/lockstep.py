"""
The trainer's ranks in lock-step: the leader (rank 0, the one that polls Temporal) sends each
trainer operation it runs (load a version, train a batch, save a version) to every other rank
before running it itself, and the followers run the same operation with the same arguments, so
that every rank enters the same collectives in the same order.

A rank that fails inside an operation leaves the others waiting in a collective that will never
complete: it exits instead, and so does the leader when its own part fails. torchrun then stops
every rank and starts them again; the step's activity, no longer heartbeating, is retried by
Temporal on the restarted leader, which reloads the step's base version (exactly where the lost
attempt started).

Between steps the followers wait for the next operation inside a collective, which times out
(COLLECTIVE_TIMEOUT): an idle leader sends a no-op every IDLE_PING_S to keep them waiting.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from torch import Tensor

from .adapters import checkpoint_problem
from .distributed import Ranks
from .failures import invalid_config
from .inputs import TrainerConfig
from .log import Logger
from .policy_trainer import PolicyTrainer, TrainMetrics
from .samples import TrainingSample, assert_training_samples

IDLE_PING_S = 60.0
#: Exit status of a rank that left the lock-step (torchrun restarts the group on it).
LOCKSTEP_BROKEN_EXIT = 75

T = TypeVar("T")


@dataclass(frozen=True)
class Operation:
    name: str  # "load", "train", "save", "ping" or "stop"
    args: dict[str, Any] = field(default_factory=dict)


def _load(ranks: Ranks, checkpoint: Path, reference: Path, base_model: Path, config: TrainerConfig, temperature: float) -> PolicyTrainer:
    return PolicyTrainer.load(checkpoint, reference, base_model, config, temperature, ranks)


def _leave(logger: Logger, what: str) -> None:
    logger.error(f"{what}; this rank exits so that torchrun restarts every rank", exc_info=True)
    os._exit(LOCKSTEP_BROKEN_EXIT)


class Leader:
    """Rank 0's side: every operation goes to the followers first (a no-op with one process)."""

    def __init__(self, ranks: Ranks, logger: Logger) -> None:
        self.ranks = ranks
        self._logger = logger
        self._lock = threading.Lock()
        self._last_sent = time.monotonic()
        self._stopped = threading.Event()
        if ranks.distributed:
            threading.Thread(target=self._keep_followers_waiting, name="lockstep-ping", daemon=True).start()

    def _run(self, operation: Operation, action: Callable[[], T]) -> T:
        with self._lock:
            self.ranks.broadcast(operation)
            self._last_sent = time.monotonic()
            if not self.ranks.distributed:
                return action()
            try:
                return action()
            except BaseException:
                _leave(self._logger, f"the leader's part of '{operation.name}' failed")
                raise

    def load(self, checkpoint: Path, reference: Path, base_model: Path, config: TrainerConfig, temperature: float) -> PolicyTrainer:
        # Checked here first: a checkpoint the run cannot train from fails the step, and must not fail every rank at once.
        problem = checkpoint_problem(checkpoint, config.lora)
        if problem is not None:
            raise invalid_config(problem)
        args: dict[str, Any] = {"checkpoint": checkpoint, "reference": reference, "base_model": base_model, "config": config, "temperature": temperature}
        return self._run(Operation("load", args), lambda: _load(self.ranks, **args))

    def train(self, trainer: PolicyTrainer, samples: list[TrainingSample], learning_rate: float) -> tuple[TrainMetrics, list[Tensor | None]]:
        # Checked here first: a bad batch fails the step, and must not fail every rank at once.
        assert_training_samples(samples, *trainer.limits)
        return self._run(
            Operation("train", {"samples": samples, "learning_rate": learning_rate}),
            lambda: trainer.train_batch(samples, learning_rate=learning_rate),
        )

    def save(self, trainer: PolicyTrainer, dest: Path, base: Path) -> None:
        self._run(Operation("save", {"dest": dest, "base": base}), lambda: trainer.save(dest, base))

    def stop(self) -> None:
        """Lets the followers exit (once: the leader is leaving)."""
        self._stopped.set()
        if self.ranks.distributed:
            self._run(Operation("stop"), lambda: None)

    def _keep_followers_waiting(self) -> None:
        while not self._stopped.wait(IDLE_PING_S / 4):
            if time.monotonic() - self._last_sent >= IDLE_PING_S and self._lock.acquire(blocking=False):
                try:
                    if not self._stopped.is_set():
                        self.ranks.broadcast(Operation("ping"))
                        self._last_sent = time.monotonic()
                except BaseException:
                    _leave(self._logger, "a follower no longer answers")
                finally:
                    self._lock.release()


def follow(ranks: Ranks, logger: Logger) -> None:
    """A follower's life: the leader's operations, until it says stop."""
    trainer: PolicyTrainer | None = None
    logger.info("trainer rank following the leader", rank=ranks.rank, world=ranks.world)
    while True:
        try:
            operation: Operation = ranks.broadcast()
        except BaseException:
            _leave(logger, "the leader no longer answers")
            raise
        try:
            if operation.name == "stop":
                return
            if operation.name == "load":
                trainer = None  # the old weights go before the new ones come
                trainer = _load(ranks, **operation.args)
            elif operation.name == "train":
                assert trainer is not None, "train before load"
                trainer.train_batch(operation.args["samples"], learning_rate=operation.args["learning_rate"])
            elif operation.name == "save":
                assert trainer is not None, "save before load"
                trainer.save(operation.args["dest"], operation.args["base"])
        except BaseException:
            _leave(logger, f"this rank's part of '{operation.name}' failed")
            raise

"""
The trainer activities of a real model (task queue `<prefix>-trainer`, one step at a time), by the
names and JSON of activities/trainer.ts: `preparePolicy` publishes version 0, `trainStep` trains
one batch of groups into version v+1. (`evaluate` is not served: a real model is evaluated
through its inference servers.)

A train step is idempotent by its step number: its result file is written once, after the new
checkpoint and the metrics line; a retry finds the result and returns it, or else trains again
from checkpoint v, which is exactly where the lost attempt started. The trainer keeps its weights
and AdamW state in memory between steps and reloads them only when it is not at the step's base.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from temporalio import activity
from torch import Tensor

from .adapters import adapter_state, initial_adapter, save_adapter
from .batch import LoadedBatch, load_batch
from .cancellation import cancellation_deferred
from .compatibility import refuse_if_incompatible
from .distributed import Ranks
from .failures import invalid_config
from .files import append_json_line, publish_directory, read_json, write_json_atomically
from .heartbeat import heartbeating
from .inputs import PrepareInput, RunScoped, TrainerConfig, TrainStepInput
from .layout import RunLayout
from .lockstep import Leader
from .log import Logger, now_ms
from .policy import copy_model_dir, default_device, drop_trainer_state, load_model, save_published
from .policy_trainer import NOTHING_TRAINED, PolicyTrainer, TrainMetrics
from .retention import RetentionPolicy, describe_versions, ensure_room_for, folder_bytes, prune_checkpoints
from .settings import WorkerSettings
from .step_metrics import Utilization, logprob_agreement, summarize_step
from .utilization import UtilizationClock
from .validation import Model, parse
from .warmup import demo_sequences, warm_up


def step_record(
    input: TrainStepInput,
    batch: LoadedBatch,
    train: TrainMetrics,
    before: list[Tensor | None],
    utilization: Utilization,
    started_at: int,
    ended_at: int,
) -> dict:
    """The step's line of metrics.jsonl: StepMetrics, the logprob agreement, and elapsedS if the run said when it started."""
    return {
        **summarize_step(
            step=input.step,
            version=input.base_version + 1,
            groups=input.groups,
            groups_skipped=len(batch.skipped),
            groups_corrupt=len(batch.corrupt),
            advantages=batch.trajectory_advantages,
            train=train,
            token_versions=batch.token_versions,
            base_version=input.base_version,
            learning_rate=input.trainer.learning_rate,
            wall_ms=ended_at - started_at,
            utilization=utilization,
            trajectory_times=batch.trajectory_times,
        ),
        **logprob_agreement(batch.samples, before, input.base_version),
        **({} if input.run_started_at is None else {"elapsedS": (ended_at - input.run_started_at) / 1000}),
    }


class HeldTrainer:
    """The trainer kept in memory between steps, and which run and version its weights are."""

    def __init__(self, leader: Leader, base_model: Path) -> None:
        self._leader = leader
        self._base_model = base_model
        self._held: tuple[str, int, PolicyTrainer] | None = None

    def take(self, run: RunLayout, run_id: str, version: int, config: TrainerConfig, temperature: float) -> PolicyTrainer:
        """
        The trainer at (run, version): the one in memory, or one restored from that checkpoint.
        Taking it forgets it: until `advanced` says which version its weights now are, a step that
        fails midway (weights updated, nothing published) leaves the next attempt to reload.
        """
        held, self._held = self._held, None
        if held is not None and held[0] == run_id and held[1] == version:
            return held[2]
        del held  # free the old weights before loading the new ones
        checkpoint = run.checkpoint_dir(version)
        if not checkpoint.is_dir():
            raise FileNotFoundError(f"run {run_id} has no checkpoint of version {version} ({checkpoint})")
        # The KL penalty's reference is the run's version 0: the policy RL started from.
        return self._leader.load(checkpoint, run.checkpoint_dir(0), self._base_model, config, temperature)

    def advanced(self, run_id: str, version: int, trainer: PolicyTrainer) -> None:
        """`trainer` has just published `version`: the next step of the run starts from it."""
        self._held = (run_id, version, trainer)


class TrainerActivities:
    def __init__(self, settings: WorkerSettings, logger: Logger, leader: Leader | None = None) -> None:
        """`leader`: the ranks this trainer runs on (by default this process alone, on its best device)."""
        self._data_dir = settings.data_dir
        self._model_path = settings.model_path
        self._compatibility = settings.compatibility
        self._logger = logger
        self.leader = leader or Leader(Ranks(device=default_device()), logger)
        self._held = HeldTrainer(self.leader, settings.model_path)
        self._utilization = UtilizationClock(settings.data_dir)

    def _parse(self, model: type[Model], raw: Any, activity_name: str) -> Model:
        """The input, refused first if the run's fingerprint differs (whatever else is wrong with it)."""
        try:
            scope = parse(RunScoped, raw, f"{activity_name} input")
            refuse_if_incompatible(scope.run_id, scope.compatibility, self._compatibility, self._logger)
            return parse(model, raw, f"{activity_name} input")
        except ValueError as err:
            # The workflow would send the same input again: retrying cannot help.
            raise invalid_config(str(err)) from None

    @activity.defn(name="preparePolicy")
    def prepare_policy(self, raw: dict) -> dict:
        with heartbeating():
            return self.prepare(self._parse(PrepareInput, raw, "preparePolicy"))

    @activity.defn(name="trainStep")
    def train_step(self, raw: dict) -> dict:
        with heartbeating():
            return self.train(self._parse(TrainStepInput, raw, "trainStep"))

    def prepare(self, input: PrepareInput) -> dict:
        """
        Version 0 of a run (a copy of the model directory, the model after `trainer.warmup`, or with
        LoRA a fresh adapter of it), unless the run has checkpoints.
        """
        if input.trainer.format_warmup_steps > 0:
            raise invalid_config("trainer.formatWarmupSteps > 0: the format warm-up is for the embedded model; set it to 0 for a real model")
        run = RunLayout(self._data_dir, input.run_id)
        latest = run.latest_version()
        # Each step publishes exactly one version, so the latest version is the number of steps done.
        if latest is not None:
            return {"version": latest, "step": latest, **groups_taken_by(run, latest)}
        lora, warmup = input.trainer.lora, input.trainer.warmup
        if warmup is not None:
            if lora is not None:
                raise invalid_config("trainer.warmup trains every weight: it cannot start a LoRA run (remove one of them)")
            model = load_model(self._model_path)
            losses = warm_up(model, demo_sequences(self._model_path, Path(warmup.demonstrations)), warmup, self._logger)
            publish_directory(
                run.checkpoint_dir(0),
                lambda partial: save_published(model, model.state_dict(), input.trainer.precision, self._model_path, partial),
            )
            self._logger.info("published version 0 after the warm-up", runId=input.run_id, steps=warmup.steps, firstLoss=losses[0], lastLoss=losses[-1])
            return {"version": 0, "step": 0}
        if lora is None:
            publish_directory(run.checkpoint_dir(0), lambda partial: copy_model_dir(self._model_path, partial))
        else:
            adapter = initial_adapter(self._model_path, lora)
            publish_directory(run.checkpoint_dir(0), lambda partial: save_adapter(adapter, adapter_state(adapter), self._model_path, partial))
        self._logger.info("published version 0", runId=input.run_id, model=str(self._model_path), lora=lora is not None)
        return {"version": 0, "step": 0}

    def train(self, input: TrainStepInput) -> dict:
        run_id, step, base = input.run_id, input.step, input.base_version
        run = RunLayout(self._data_dir, run_id)
        result_file = run.train_step_file(step)
        done: dict | None = read_json(result_file)
        if done is not None:
            self._logger.info("train step already done by an earlier attempt; returning it", runId=run_id, step=step)
            return done
        started_at = now_ms()
        since = self._utilization.interval_start(started_at)
        trainer = self._held.take(run, run_id, base, input.trainer, input.temperature)
        # The new version is about as big as its base (which still holds its optimizer state, as
        # the new one will): refused now, a full disk costs no training.
        ensure_room_for(run.checkpoints_dir, folder_bytes(run.checkpoint_dir(base)))
        batch = load_batch(run, input, self._logger)
        # Every group skipped (by the filter or as corrupt): no optimizer step, and the same weights
        # are published as the next version (one version per step is what admission and resume count on).
        if batch.samples:
            # The step's own rate: this trainer may have been held from an earlier step.
            train, before = self.leader.train(trainer, batch.samples, input.trainer.learning_rate)
        else:
            train, before = NOTHING_TRAINED, []
        # Publish, metrics line, result: a cancellation (worker shutdown) waits until all are written.
        with cancellation_deferred():
            version = base + 1
            publish_directory(run.checkpoint_dir(version), lambda partial: self.leader.save(trainer, partial, run.checkpoint_dir(base)))
            self._held.advanced(run_id, version, trainer)
            ended_at = now_ms()
            utilization = self._utilization.interval_end(since, started_at, ended_at)
            metrics = step_record(input, batch, train, before, utilization, started_at, ended_at)
            output = {"version": version, "metrics": metrics}
            # The metrics line first: the result file marks the step done, and a retry that finds it
            # returns at once, so a line written after it could be lost to a crash in between. A retry
            # that trains again appends a second line for the step; readers keep the last.
            append_json_line(run.metrics_file, metrics)
            write_json_atomically(result_file, output)
        # Step `step` is done for good, so nothing resumes from version `base` again: only the
        # newest version needs its optimizer state (twice the float32 weights) and master weights.
        drop_trainer_state(run.checkpoint_dir(base))
        self._prune(run, input)
        self._logger.info(
            "train step done",
            runId=run_id,
            step=step,
            version=version,
            reward=metrics["rewardMean"],
            loss=metrics["loss"],
            logprobDiffMax=metrics["logprobDiffMax"],
            wallMs=metrics["wallMs"],
        )
        return output

    def _prune(self, run: RunLayout, input: TrainStepInput) -> None:
        """Deletes the versions `trainer.checkpoints` no longer keeps (none without it)."""
        retention = input.trainer.checkpoints
        if retention is None:
            return
        policy = RetentionPolicy(
            keep_last=retention.keep_last,
            keep_every=retention.keep_every,
            max_staleness=input.trainer.max_staleness,
            eval_every_steps=input.eval_every_steps,
        )
        try:
            deleted = prune_checkpoints(run, policy)
        except OSError as err:
            # The step is done; the next one's pass deletes what this one could not.
            self._logger.warn("could not delete old checkpoints; the next step tries again", runId=input.run_id, error=str(err))
            return
        if deleted:
            self._logger.info("deleted checkpoints retention no longer keeps", runId=input.run_id, versions=describe_versions(deleted))


# A group id ends in `.gNNNNN` (src/core/ids.ts, the format's home; Python cannot import it).
_GROUP_INDEX = re.compile(r"\.g(\d{5,})$")


def groups_taken_by(run: RunLayout, step: int) -> dict[str, int]:
    """Where a resumed run's data goes on: one past the last group the steps before `step` took
    (with replacement of filtered groups a step takes more than batchGroups), from the last step's
    record; empty where that record is missing. As activities/trainer.ts `groupsTakenBy`."""
    if step == 0:
        return {"nextGroupIndex": 0}
    last = read_json(run.train_step_file(step - 1)) or {}
    ids = last.get("metrics", {}).get("groupIds", [])
    indices = [int(match.group(1)) for group_id in ids if (match := _GROUP_INDEX.search(group_id))]
    return {"nextGroupIndex": max(indices) + 1} if indices else {}

"""
The scheduler: one thread that owns the model and runs continuous batching over it.

Each round, between forward passes, it
  1. answers requests aborted while waiting, and drops running rows that were aborted;
     runs queued LoRA adapter loads / deletions (they change the model's modules, so only here);
  2. applies a pending weight update once no request is in flight (new requests wait meanwhile),
     so every request is sampled wholly by one weight version and reports it exactly;
  3. admits waiting requests up to --max-batch (prefilled as a group, then joined to the batch);
  4. runs one decode step for all running rows, and answers the rows that finished.

HTTP handler threads only enqueue work and wait on a request's `done` event; everything they
share with the scheduler is guarded by one condition variable.

LoRA (with a LoraModel): a request names a loaded adapter at submission and holds it until it ends;
rows of different adapters and of the base model share the batch, each row's forward pass running
under its own adapter. An unload takes the name away at once (new requests naming it are refused)
and deletes the adapter once the requests holding it have ended, as SGLang does.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from . import batch as kv
from .lora import AdapterError, LoraModel
from .protocol import SamplingRequest
from .sampling import RowSampling, draw_uniform, sample_tokens
from .weights import copy_weights

log = logging.getLogger(__name__)

# Most padded prompt tokens one prefill forward pass may hold; a larger group is split.
PREFILL_TOKEN_BUDGET = 16384


#: The label of weights a failed update left half copied (no trajflow version).
INCONSISTENT_LABEL = "trajflow-inconsistent"


class DuplicateRequest(ValueError):
    """A rid that is already waiting or running."""


class UnknownAdapter(ValueError):
    """A request naming a LoRA adapter that is not loaded (or LoRA is not enabled)."""


LORA_DISABLED = "LoRA is not enabled: the server was started without --enable-lora"


@dataclass
class _Adapter:
    """A LoRA adapter under its client-given name."""

    name: str
    path: str
    # peft's name for it; None while it is being loaded.
    peft_name: str | None = None
    # Requests waiting or running under it: it is deleted only once this is 0.
    in_flight: int = 0


@dataclass
class _ModelTask:
    """Work that changes the model's modules, run by the scheduler between forward passes."""

    run: Callable[[], Any]
    done: threading.Event = field(default_factory=threading.Event)
    result: Any = None
    error: BaseException | None = None


@dataclass
class Sequence:
    """One /generate request through its life in the engine."""

    rid: str
    prompt: list[int]
    sampling: SamplingRequest
    row: RowSampling
    generator: torch.Generator
    stop_ids: frozenset[int]
    max_new_tokens: int
    # The LoRA adapter the request runs under, None = the base model; held until the request ends.
    adapter: _Adapter | None = None
    output_ids: list[int] = field(default_factory=list)
    output_logprobs: list[float] = field(default_factory=list)
    # SGLang's finish_reason object; None while running.
    finish_reason: dict[str, Any] | None = None
    # The version that sampled every token: fixed at admission (updates wait for in-flight requests).
    weight_version: str | None = None
    # Set by abort(); the scheduler ends the request at its next round.
    abort_message: str | None = None
    done: threading.Event = field(default_factory=threading.Event)
    created_at: float = field(default_factory=time.monotonic)
    finished_at: float | None = None

    @property
    def next_position(self) -> int:
        """Position of the last sampled token, the next one fed to the model."""
        return len(self.prompt) + len(self.output_ids) - 1


@dataclass
class _WeightUpdate:
    weights: dict[str, torch.Tensor]
    version: str | None
    model_path: str
    done: threading.Event = field(default_factory=threading.Event)
    result: tuple[bool, str] = (False, "not applied")


class Engine:
    def __init__(
        self,
        model: torch.nn.Module,
        *,
        max_batch: int,
        weight_version: str,
        model_path: str,
        eos_token_ids: frozenset[int],
        pad_token_id: int,
        max_context: int,
        lora: LoraModel | None = None,
        max_loras: int = 0,
    ):
        self.model = model
        # None = LoRA disabled; then the model runs as given.
        self.lora = lora
        self.max_loras = max_loras
        self.max_batch = max_batch
        self.eos_token_ids = eos_token_ids
        self.pad_token_id = pad_token_id
        self.max_context = max_context

        self._cond = threading.Condition()
        # Guarded by _cond:
        self._waiting: deque[Sequence] = deque()
        self._live: dict[str, Sequence] = {}
        self._paused = False
        self._pending_update: _WeightUpdate | None = None
        self._stopping = False
        self._weight_version = weight_version
        self._model_path = model_path
        # LoRA adapters by client name (loaded or loading), in load order; unloaded ones leave at once.
        self._adapters: dict[str, _Adapter] = {}
        self._model_tasks: deque[_ModelTask] = deque()

        # Owned by the scheduler thread: the running rows, in batch order, and their cache.
        self._rows: list[Sequence] = []
        self._state: kv.CacheState | None = None

        self._update_lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="model-server-scheduler", daemon=True)

    # ---- called from HTTP threads ----

    def start(self) -> None:
        self._thread.start()

    def shutdown(self, timeout: float = 5.0) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        self._thread.join(timeout)

    @property
    def weight_version(self) -> str:
        with self._cond:
            return self._weight_version

    @property
    def model_path(self) -> str:
        with self._cond:
            return self._model_path

    def submit(self, rid: str, prompt: list[int], sampling: SamplingRequest, lora_name: str | None = None) -> Sequence:
        """Queues a request (under the LoRA adapter lora_name, if given); wait on the returned sequence's `done` event for its result."""
        seed = sampling.sampling_seed if sampling.sampling_seed is not None else secrets.randbits(63)
        # As in SGLang, ignore_eos disables every stop token, the request's own ones included.
        stop_ids = frozenset() if sampling.ignore_eos else sampling.stop_token_ids | self.eos_token_ids
        seq = Sequence(
            rid=rid,
            prompt=prompt,
            sampling=sampling,
            row=RowSampling.from_request(sampling.temperature, sampling.top_p, sampling.top_k),
            generator=torch.Generator(device="cpu").manual_seed(seed),
            stop_ids=stop_ids,
            # As SGLang does: the completion is clipped to the context left after the prompt.
            max_new_tokens=min(sampling.max_new_tokens, self.max_context - len(prompt)),
        )
        with self._cond:
            if rid in self._live:
                raise DuplicateRequest(f"rid: a request with rid {rid!r} is already running")
            if lora_name is not None:
                seq.adapter = self._hold_adapter(lora_name)
            self._live[rid] = seq
            self._waiting.append(seq)
            self._cond.notify_all()
        return seq

    def abort(self, rid: str | None, abort_all: bool, message: str) -> int:
        """Marks the request (or all of them) to end at the next round; returns how many."""
        with self._cond:
            targets = list(self._live.values()) if abort_all else [s for s in [self._live.get(rid or "")] if s]
            for seq in targets:
                if seq.abort_message is None:
                    seq.abort_message = message
            self._cond.notify_all()
            return len(targets)

    def pause(self, mode: str) -> None:
        """SGLang's pause_generation: "abort" ends every request; "in_place" / "retract" freeze them."""
        if mode == "abort":
            self.abort(None, abort_all=True, message="Aborted by pause_generation")
        with self._cond:
            self._paused = True
            self._cond.notify_all()

    def resume(self) -> None:
        with self._cond:
            self._paused = False
            self._cond.notify_all()

    def loaded_adapters(self) -> dict[str, str]:
        """The usable LoRA adapters: name -> directory."""
        with self._cond:
            return {a.name: a.path for a in self._adapters.values() if a.peft_name is not None}

    def load_adapter(self, name: str, path: str) -> None:
        """Loads a peft LoRA adapter directory under `name`; raises AdapterError saying why not."""
        lora = self._lora_or_refuse()
        with self._cond:
            if name in self._adapters:
                raise AdapterError(f"a LoRA adapter named {name!r} is already loaded (from {self._adapters[name].path}); unload it first")
            if len(self._adapters) >= self.max_loras:
                # SGLang's --max-loaded-loras behaviour: refuse rather than evict.
                raise AdapterError(
                    f"cannot load LoRA adapter {name!r} from {path}: {len(self._adapters)} adapters are loaded, the most --max-loras allows; unload one first"
                )
            adapter = self._adapters[name] = _Adapter(name, path)
        try:
            peft_name = self._on_scheduler(lambda: lora.load(path))
        except BaseException:
            with self._cond:
                del self._adapters[name]
            raise
        with self._cond:
            adapter.peft_name = peft_name
        log.info("loaded LoRA adapter %s from %s", name, path)

    def unload_adapter(self, name: str) -> None:
        """Unloads an adapter: refused to new requests at once, deleted once the requests holding it end."""
        lora = self._lora_or_refuse()
        with self._cond:
            adapter = self._adapters.get(name)
            if adapter is None:
                raise AdapterError(f"no LoRA adapter named {name!r} is loaded (loaded: {self._names_locked()})")
            if adapter.peft_name is None:
                raise AdapterError(f"LoRA adapter {name!r} is still being loaded; unload it once its load has answered")
            del self._adapters[name]
            if adapter.in_flight:
                log.info("unloading LoRA adapter %s once its %d requests in flight end", name, adapter.in_flight)
            while adapter.in_flight and not self._stopping:
                self._cond.wait()
        peft_name = adapter.peft_name
        self._on_scheduler(lambda: lora.delete(peft_name))
        log.info("unloaded LoRA adapter %s", name)

    def _lora_or_refuse(self) -> LoraModel:
        if self.lora is None:
            raise AdapterError(LORA_DISABLED)
        return self.lora

    def _names_locked(self) -> str:
        return ", ".join(a.name for a in self._adapters.values() if a.peft_name is not None) or "none"

    def _hold_adapter(self, name: str) -> _Adapter:
        """Under _cond: the loaded adapter `name`, counted as in use until the request ends."""
        if self.lora is None:
            raise UnknownAdapter(f"lora_path: {LORA_DISABLED}")
        adapter = self._adapters.get(name)
        if adapter is None or adapter.peft_name is None:
            raise UnknownAdapter(f"lora_path: no LoRA adapter named {name!r} is loaded (loaded: {self._names_locked()})")
        adapter.in_flight += 1
        return adapter

    def _on_scheduler(self, run: Callable[[], Any]) -> Any:
        """Runs `run` on the scheduler thread between forward passes; returns its result or raises its error."""
        task = _ModelTask(run)
        with self._cond:
            if self._stopping:
                raise AdapterError("the server is shutting down")
            self._model_tasks.append(task)
            self._cond.notify_all()
        task.done.wait()
        if task.error is not None:
            raise task.error
        return task.result

    def update_weights(self, weights: dict[str, torch.Tensor], version: str | None, model_path: str, abort_all: bool) -> tuple[bool, str]:
        """Swaps in `weights` once no request is in flight; blocks until applied or refused."""
        with self._update_lock:
            update = _WeightUpdate(weights, version, model_path)
            with self._cond:
                if abort_all:
                    for seq in self._live.values():
                        seq.abort_message = seq.abort_message or "Aborted by update_weights_from_disk"
                self._pending_update = update
                self._cond.notify_all()
            update.done.wait()
            return update.result

    # ---- the scheduler thread ----

    def _run(self) -> None:
        with torch.inference_mode():
            while self._round():
                pass

    def _round(self) -> bool:
        """One scheduling round; False once the engine is stopping."""
        with self._cond:
            if not self._wait_for_work():
                return False
            tasks = list(self._model_tasks)
            self._model_tasks.clear()
            update = self._pending_update if not self._rows else None
            paused = self._paused
            admitted: list[Sequence] = []
            # While an update waits for in-flight requests to drain, nothing new starts.
            if self._pending_update is None and not paused:
                while self._waiting and len(self._rows) + len(admitted) < self.max_batch:
                    seq = self._waiting.popleft()
                    seq.weight_version = self._weight_version
                    admitted.append(seq)

        for task in tasks:
            self._run_task(task)
        if update is not None:
            self._apply_update(update)
            return True
        try:
            self._drop_aborted_rows()
            if admitted:
                self._admit(admitted)
            if self._rows and not paused:
                self._decode()
        except Exception as error:  # a failed forward pass must not kill the scheduler
            log.exception("forward pass failed")
            for seq in self._rows + admitted:
                if seq.finish_reason is None:
                    self._finish(seq, {"type": "abort", "message": f"Internal error: {error}"})
            self._rows, self._state = [], None
        return True

    def _wait_for_work(self) -> bool:
        """Under _cond: blocks until there is something to do; False when stopping."""
        while True:
            if self._stopping:
                self._fail_everything("Aborted: the server is shutting down")
                return False
            self._answer_aborted_waiting()
            if self._model_tasks:
                return True
            update = self._pending_update
            if update is not None and self._paused and self._rows and not self._aborted_rows():
                # Frozen rows can never drain, so the update would wait forever: refuse it.
                self._resolve_update(
                    update,
                    False,
                    f"generation is paused with {len(self._rows)} requests in flight; call /continue_generation first or pass abort_all_requests",
                )
                continue
            if update is not None and not self._rows:
                return True
            if self._aborted_rows():
                return True
            if not self._paused and (self._rows or (self._waiting and update is None)):
                return True
            self._cond.wait()

    def _run_task(self, task: _ModelTask) -> None:
        try:
            task.result = task.run()
        except BaseException as error:  # answered to the caller; the scheduler goes on
            task.error = error
        task.done.set()

    def _resolve_update(self, update: _WeightUpdate, success: bool, message: str) -> None:
        """Under _cond: answers the pending update."""
        self._pending_update = None
        update.result = (success, message)
        update.done.set()
        self._cond.notify_all()

    def _aborted_rows(self) -> bool:
        return any(seq.abort_message for seq in self._rows)

    def _answer_aborted_waiting(self) -> None:
        """Under _cond: requests aborted before admission end with no tokens."""
        aborted = [seq for seq in self._waiting if seq.abort_message]
        if not aborted:
            return
        self._waiting = deque(seq for seq in self._waiting if not seq.abort_message)
        for seq in aborted:
            seq.weight_version = self._weight_version
            self._finish_locked(seq, {"type": "abort", "message": seq.abort_message})

    def _apply_update(self, update: _WeightUpdate) -> None:
        try:
            copy_weights(self.model, update.weights)
        except Exception as error:
            # read_weights already checked names and shapes; reaching this is a bug, and the
            # model may be partly overwritten, so say so rather than pretend the old weights stand.
            log.exception("copying weights failed")
            success, message = False, f"copying weights failed, the model may be inconsistent: {error}"
        else:
            success, message = True, f"Succeeded to update model weights from {update.model_path}."
        with self._cond:
            if success:
                self._model_path = update.model_path
                if update.version is not None:
                    self._weight_version = update.version
            else:
                # Half-copied weights are nobody's version: answers carry a label no client
                # trusts until a load succeeds.
                self._weight_version = INCONSISTENT_LABEL
            log.info("%s (weight_version %s)", message, self._weight_version)
            self._resolve_update(update, success, message)

    def _drop_aborted_rows(self) -> None:
        kept = []
        for i, seq in enumerate(self._rows):
            if seq.abort_message:
                self._finish(seq, {"type": "abort", "message": seq.abort_message})
            else:
                kept.append(i)
        self._keep_rows(kept)

    def _admit(self, seqs: list[Sequence]) -> None:
        to_prefill = []
        for seq in seqs:
            if seq.max_new_tokens <= 0:
                self._finish(seq, {"type": "length", "length": 0})
            else:
                to_prefill.append(seq)
        for group in _prefill_groups(to_prefill):
            logits, state = kv.prefill(self._runnable(), [seq.prompt for seq in group], self.pad_token_id, self._forward_kwargs(group))
            kept = self._sample_into(group, logits)
            if not kept:
                continue
            if len(kept) < len(group):
                state = kv.select_rows(state, kept)
            group_rows = [group[i] for i in kept]
            if self._state is None:
                self._rows, self._state = group_rows, state
            else:
                self._rows, self._state = self._rows + group_rows, kv.merge(self._state, state)

    def _decode(self) -> None:
        assert self._state is not None
        logits = kv.decode_step(
            self._runnable(),
            self._state,
            [seq.output_ids[-1] for seq in self._rows],
            [seq.next_position for seq in self._rows],
            self._forward_kwargs(self._rows),
        )
        self._keep_rows(self._sample_into(self._rows, logits))

    def _runnable(self) -> torch.nn.Module:
        return self.lora.runnable if self.lora is not None else self.model

    def _forward_kwargs(self, seqs: list[Sequence]) -> dict[str, Any]:
        if self.lora is None:
            return {}
        return self.lora.batch_kwargs([seq.adapter.peft_name if seq.adapter is not None else None for seq in seqs])

    def _sample_into(self, seqs: list[Sequence], logits: torch.Tensor) -> list[int]:
        """Samples each sequence's next token; finishes the ones that are done; returns the others' indices."""
        tokens, logprobs = sample_tokens(logits, [s.row for s in seqs], [draw_uniform(s.generator) for s in seqs])
        still_running = []
        for i, (seq, token, logprob) in enumerate(zip(seqs, tokens, logprobs, strict=True)):
            seq.output_ids.append(token)
            seq.output_logprobs.append(logprob)
            reason = self._finish_reason(seq, token)
            if reason is None:
                still_running.append(i)
            else:
                self._finish(seq, reason)
        return still_running

    def _finish_reason(self, seq: Sequence, token: int) -> dict[str, Any] | None:
        # SGLang's order: running out of budget wins over a stop token sampled as the last one.
        if len(seq.output_ids) >= seq.max_new_tokens:
            return {"type": "length", "length": seq.max_new_tokens}
        if token in seq.stop_ids:
            return {"type": "stop", "matched": token}
        return None

    def _keep_rows(self, kept: list[int]) -> None:
        if len(kept) == len(self._rows):
            return
        if not kept:
            self._rows, self._state = [], None
            return
        assert self._state is not None
        self._rows = [self._rows[i] for i in kept]
        self._state = kv.select_rows(self._state, kept)

    def _finish(self, seq: Sequence, reason: dict[str, Any]) -> None:
        with self._cond:
            self._finish_locked(seq, reason)

    def _finish_locked(self, seq: Sequence, reason: dict[str, Any]) -> None:
        seq.finish_reason = reason
        seq.finished_at = time.monotonic()
        self._live.pop(seq.rid, None)
        if seq.adapter is not None:
            # Released once: an unload waiting for this adapter's requests to end may go on.
            seq.adapter.in_flight -= 1
            seq.adapter = None
        self._cond.notify_all()
        seq.done.set()

    def _fail_everything(self, message: str) -> None:
        """Under _cond, on shutdown: every waiting and running request ends as aborted."""
        for seq in list(self._live.values()):
            if seq.finish_reason is None:
                if seq.weight_version is None:
                    seq.weight_version = self._weight_version
                self._finish_locked(seq, {"type": "abort", "message": message})
        self._waiting.clear()
        self._rows, self._state = [], None
        if self._pending_update is not None:
            self._resolve_update(self._pending_update, False, "the server is shutting down")
        for task in self._model_tasks:
            task.error = AdapterError("the server is shutting down")
            task.done.set()
        self._model_tasks.clear()


def _prefill_groups(seqs: list[Sequence]) -> list[list[Sequence]]:
    """Splits admitted sequences (in order) so no group's padded size exceeds the token budget."""
    groups: list[list[Sequence]] = []
    current: list[Sequence] = []
    longest = 0
    for seq in seqs:
        candidate_longest = max(longest, len(seq.prompt))
        if current and candidate_longest * (len(current) + 1) > PREFILL_TOKEN_BUDGET:
            groups.append(current)
            current, longest = [], 0
            candidate_longest = len(seq.prompt)
        current.append(seq)
        longest = candidate_longest
    if current:
        groups.append(current)
    return groups

"""
Refusing work this worker cannot do right (the Python twin of activities/compatibility.ts): a run
records the fingerprint of the code and config it started with, and a trainer whose own differs in
code, model or modules refuses the task with a retryable failure saying what differs, so that a
matching worker polling the same queue takes the retry and nothing is lost.
"""

from __future__ import annotations

import os
import socket

from temporalio.exceptions import ApplicationError

from .failures import WORKER_MISMATCH
from .log import Logger
from .settings import Compatibility

#: The parts a trainer depends on (ROLE_PARTS.trainer in src/core/compatibility.ts).
TRAINER_PARTS = ("code", "model", "modules")


def incompatibilities(run: Compatibility, worker: Compatibility, parts: tuple[str, ...] = TRAINER_PARTS) -> list[str]:
    """What differs between the run's fingerprint and the worker's, in the TypeScript wording."""
    return [f"{part} differs (run {getattr(run, part)}, worker {getattr(worker, part)})" for part in parts if getattr(run, part) != getattr(worker, part)]


def refuse_if_incompatible(run_id: str, run: Compatibility | None, worker: Compatibility, logger: Logger) -> None:
    """Raises the refusal when the run's fingerprint (absent in runs started before it existed) differs."""
    if run is None:
        return
    differences = incompatibilities(run, worker)
    if not differences:
        return
    message = (
        f"trainer worker {socket.gethostname()}/{os.getpid()} refuses run {run_id}: {'; '.join(differences)}. "
        "Start trainer workers with the run's config and build; a matching worker will take this task."
    )
    logger.warn("refusing a task of a run this worker does not match", runId=run_id, differences=differences)
    raise ApplicationError(message, type=WORKER_MISMATCH, non_retryable=False)

"""
The trainer worker process:

    cd python && ../.venv/bin/python -m trajflow_py.trainer --settings FILE

Connects to Temporal, polls the trainer task queue for `preparePolicy` and `trainStep` (sync
activities on a one-thread executor: one step at a time, as the TypeScript trainer), and prints a
log line with `workers polling` once it polls (the TypeScript side waits for it).

Stopping: SIGTERM or SIGINT stops polling and gives an in-flight step GRACEFUL_SHUTDOWN_S to finish
before Temporal cancels it (raised inside the step's thread, so it fails and is retried elsewhere);
the process then exits 0. A second signal, or a step still running at HARD_EXIT_S, ends it at once.
With TRAJFLOW_PARENT_PID set, the worker stops the same way once that process is gone: an orphan
must not keep taking train steps.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.client import Client
from temporalio.common import VersioningBehavior, WorkerDeploymentVersion
from temporalio.worker import Worker, WorkerDeploymentConfig

from .log import Logger, configure_logging
from .settings import WorkerSettings, load_settings

if TYPE_CHECKING:
    from .distributed import Ranks

PARENT_PID_ENV = "TRAJFLOW_PARENT_PID"
#: Set by torchrun: more than 1, and this process is one rank of a distributed trainer.
WORLD_SIZE_ENV = "WORLD_SIZE"
PARENT_CHECK_S = 2.0
GRACEFUL_SHUTDOWN_S = 15.0
#: From the stop signal: past this, the process exits even if a step ignored its cancellation.
HARD_EXIT_S = 20.0
#: Exit status of a second interrupt or a stop that ran out of time.
FORCED_EXIT_CODE = 130

logger = Logger("trajflow.trainer")


def parent_gone(parent_pid: int, was_parent: bool) -> bool:
    """Whether the process that started this one is gone (or, if it was our parent, no longer is)."""
    if was_parent and os.getppid() != parent_pid:
        return True
    try:
        os.kill(parent_pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False  # it exists, owned by another user
    return False


async def watch_parent(parent_pid: int, stop: asyncio.Event) -> None:
    was_parent = os.getppid() == parent_pid
    while not stop.is_set():
        if parent_gone(parent_pid, was_parent):
            logger.warn("the process that started this worker is gone; shutting down", parentPid=parent_pid)
            stop.set()
            return
        await asyncio.sleep(PARENT_CHECK_S)


def exit_later(seconds: float, code: int) -> None:
    """Ends the process after `seconds` whatever it is doing (a daemon thread: a clean exit wins)."""

    def run() -> None:
        threading.Event().wait(seconds)
        logger.error("the worker did not stop in time; exiting", afterS=seconds)
        os._exit(code)

    threading.Thread(target=run, name="hard-exit", daemon=True).start()


def on_stop_signals(stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()

    def handle(sig: signal.Signals) -> None:
        if stop.is_set():
            logger.warn("interrupted again; exiting now", signal=sig.name)
            os._exit(FORCED_EXIT_CODE)
        logger.warn("interrupted; stopping", signal=sig.name, graceS=GRACEFUL_SHUTDOWN_S)
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, handle, sig)


def deployment_config(settings: WorkerSettings) -> WorkerDeploymentConfig | None:
    """A version of the worker deployment when the TypeScript side names one (TRAJFLOW_BUILD_ID), as its
    own workers poll (workers/deployment.ts): pinned runs' train steps then reach trainers of their build."""
    if settings.deployment is None:
        return None
    version = WorkerDeploymentVersion(deployment_name=settings.deployment.deployment_name, build_id=settings.deployment.build_id)
    # Activities only: the behaviour applies to workflows, and is PINNED as on the TypeScript side.
    return WorkerDeploymentConfig(version=version, use_worker_versioning=True, default_versioning_behavior=VersioningBehavior.PINNED)


async def serve(settings: WorkerSettings, ranks: Ranks | None) -> int:
    """Polls Temporal for the trainer's activities, this process alone or as the leader of `ranks`."""
    stop = asyncio.Event()
    on_stop_signals(stop)
    # identity None: temporalio names the worker <pid>@<host>.
    client = await Client.connect(**settings.temporal.connect_config(), identity=settings.identity)
    # The worker checks its namespace when it starts polling; checked here first, so that the
    # ready line is never printed by a worker about to fail.
    await client.workflow_service.describe_namespace(DescribeNamespaceRequest(namespace=settings.temporal.namespace))
    # Imported here, not at the top: torch and transformers take seconds to import, and a bad
    # settings file or an unreachable server should be reported at once.
    from .activities import TrainerActivities
    from .lockstep import Leader

    activities = TrainerActivities(settings, logger, None if ranks is None else Leader(ranks, logger))
    watcher = None
    parent_pid = int(os.environ.pop(PARENT_PID_ENV, "0") or 0)
    if parent_pid > 0:
        watcher = asyncio.create_task(watch_parent(parent_pid, stop))
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="train") as executor:
        worker = Worker(
            client,
            task_queue=settings.task_queue,
            activities=[activities.prepare_policy, activities.train_step],
            activity_executor=executor,
            max_concurrent_activities=1,
            graceful_shutdown_timeout=timedelta(seconds=GRACEFUL_SHUTDOWN_S),
            identity=settings.identity,
            deployment_config=deployment_config(settings),
        )
        async with worker:
            logger.info("workers polling", taskQueue=settings.task_queue, namespace=settings.temporal.namespace, dataDir=str(settings.data_dir))
            await stop.wait()
            exit_later(HARD_EXIT_S, FORCED_EXIT_CODE)
            logger.info("stopping: no new tasks; an in-flight step may finish", graceS=GRACEFUL_SHUTDOWN_S)
    if watcher is not None:
        watcher.cancel()
    activities.leader.stop()
    logger.info("worker stopped")
    return 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m trajflow_py.trainer", description="trajflow's trainer worker for real models")
    parser.add_argument("--settings", required=True, type=Path, help="the worker's settings (JSON, written by the trajflow CLI)")
    args = parser.parse_args(argv)
    configure_logging()
    try:
        settings = load_settings(args.settings)
    except ValueError as err:
        logger.error(str(err))
        return 2
    try:
        if int(os.environ.get(WORLD_SIZE_ENV, "1")) == 1:
            return asyncio.run(serve(settings, None))
        # Imported only here, as in serve: torch takes seconds to import.
        from .distributed import join_ranks, leave_ranks
        from .lockstep import follow

        ranks = join_ranks()
        if ranks.leader:
            code = asyncio.run(serve(settings, ranks))
        else:
            follow(ranks, logger)
            code = 0
        # Only on an orderly stop: after a failure, a peer may never reach the barrier of leaving.
        leave_ranks(ranks)
        # Exits without the interpreter's teardown, in which the process group's threads can abort
        # the process (a rank's non-zero exit would make torchrun start every rank again).
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    except Exception:
        logger.error("the trainer worker failed", exc_info=True)
        return 1

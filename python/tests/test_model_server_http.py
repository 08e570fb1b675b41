"""
The model server as a subprocess on a tiny random llama (fast): SGLang's request / response
shapes, stop and length handling, abort, pause, weight updates, validation errors and shutdown.
The numerical properties on the real model are in test_model_server_smollm2.py.
"""

import http.client
import json
import signal
import socket
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from pathlib import Path

import pytest
import torch

from trajflow_py.model_server.client import Client, Response, ServerProcess, running_server
from trajflow_py.model_server.tiny_model import make_tiny_model

SMOLLM2 = Path(__file__).resolve().parents[2] / ".models" / "smollm2-135m-instruct"
pytestmark = pytest.mark.skipif(not (SMOLLM2 / "tokenizer.json").exists(), reason="needs the SmolLM2 tokenizer (scripts/setup.sh)")

PROMPT = [1, 4093, 198, 22518, 253, 1345, 2821, 30, 2, 198, 1, 520, 9531, 198]


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_model(tmp_path_factory.mktemp("tiny"), SMOLLM2)


@pytest.fixture(scope="module")
def perturbed_dir(tiny_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny model with every weight nudged: a "next checkpoint" for weight updates."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_dir)
    generator = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(torch.randn(parameter.shape, generator=generator) * 0.05)
    out = tmp_path_factory.mktemp("tiny_v1")
    model.save_pretrained(out, safe_serialization=True)
    return out


@pytest.fixture(scope="module")
def server(tiny_dir):
    with running_server(tiny_dir, "--max-batch", "4", "--weight-version", "v0") as process:
        yield process


@pytest.fixture
def client(server: ServerProcess) -> Client:
    return server.client


def _reference_logprobs(model_dir: Path, prompt: list[int], output_ids: list[int], temperature: float) -> list[float]:
    """log_softmax(logits / T) at each sampled token, from one plain forward pass over the whole text."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([prompt + output_ids[:-1]])).logits[0, len(prompt) - 1 :].float()
    logprobs = torch.log_softmax(logits / temperature, dim=-1)
    return [float(logprobs[i, token]) for i, token in enumerate(output_ids)]


def _logprobs(response: dict) -> list[float]:
    return [entry[0] for entry in response["meta_info"]["output_token_logprobs"]]


def test_health_and_model_info(client, tiny_dir):
    health = client.get("/health")
    assert health.status == 200
    assert health.body == ""
    info = client.get("/get_model_info")
    assert info.status == 200
    assert info.body["model_path"] == str(tiny_dir)
    assert info.body["tokenizer_path"] == str(tiny_dir)
    assert info.body["is_generation"] is True
    assert info.body["weight_version"] == "v0"


def test_generate_answers_with_sglang_fields(client):
    out = client.generate(PROMPT, rid="shape-1", max_new_tokens=6, temperature=1.0, top_p=1.0, sampling_seed=1, ignore_eos=True)
    assert set(out) == {"text", "output_ids", "meta_info"}
    meta = out["meta_info"]
    assert meta["id"] == "shape-1"
    assert meta["finish_reason"] == {"type": "length", "length": 6}
    assert meta["prompt_tokens"] == len(PROMPT)
    assert meta["completion_tokens"] == 6
    assert meta["weight_version"] == "v0"
    assert len(out["output_ids"]) == 6
    assert [entry[1] for entry in meta["output_token_logprobs"]] == out["output_ids"]
    for logprob, _, text in meta["output_token_logprobs"]:
        assert isinstance(logprob, float)
        assert logprob <= 0
        assert text is None
    assert isinstance(out["text"], str)
    without = client.generate(PROMPT, return_logprob=False, max_new_tokens=2, sampling_seed=1)
    assert "output_token_logprobs" not in without["meta_info"]


def test_logprobs_equal_a_full_forward_pass(client, tiny_dir):
    out = client.generate(PROMPT, max_new_tokens=12, temperature=0.8, top_p=0.9, sampling_seed=3, ignore_eos=True)
    expected = _reference_logprobs(tiny_dir, PROMPT, out["output_ids"], temperature=0.8)
    assert _logprobs(out) == pytest.approx(expected, abs=1e-4)


def test_the_same_seed_gives_the_same_tokens(client):
    params = {"max_new_tokens": 10, "temperature": 1.0, "top_p": 0.95, "ignore_eos": True}
    first = client.generate(PROMPT, sampling_seed=21, **params)
    again = client.generate(PROMPT, sampling_seed=21, **params)
    other = client.generate(PROMPT, sampling_seed=22, **params)
    assert again["output_ids"] == first["output_ids"]
    assert _logprobs(again) == _logprobs(first)
    assert other["output_ids"] != first["output_ids"]


def test_a_stop_token_is_kept_and_reported(client):
    free = client.generate(PROMPT, max_new_tokens=12, sampling_seed=5, no_stop_trim=True)
    assert free["meta_info"]["finish_reason"]["type"] == "length"
    stop = free["output_ids"][5]
    first = free["output_ids"].index(stop)

    kept = client.generate(PROMPT, max_new_tokens=12, sampling_seed=5, stop_token_ids=[stop], no_stop_trim=True)
    assert kept["output_ids"] == free["output_ids"][: first + 1]
    assert kept["meta_info"]["finish_reason"] == {"type": "stop", "matched": stop}

    # SGLang's default (no_stop_trim false) drops the matched token from output_ids only.
    trimmed = client.generate(PROMPT, max_new_tokens=12, sampling_seed=5, stop_token_ids=[stop])
    assert trimmed["output_ids"] == free["output_ids"][:first]
    assert trimmed["meta_info"]["completion_tokens"] == first + 1
    assert len(trimmed["meta_info"]["output_token_logprobs"]) == first + 1


def test_greedy_and_zero_token_requests(client):
    greedy = [client.generate(PROMPT, max_new_tokens=5, temperature=0.0, sampling_seed=s)["output_ids"] for s in (1, 2)]
    assert greedy[0] == greedy[1]
    empty = client.generate(PROMPT, max_new_tokens=0)
    assert empty["output_ids"] == []
    assert empty["meta_info"]["finish_reason"] == {"type": "length", "length": 0}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"sampling_params": {"max_new_tokens": 4}}, "input_ids"),
        ({"input_ids": [], "sampling_params": {}}, "input_ids"),
        ({"input_ids": [1, "x"]}, "input_ids[1]"),
        ({"input_ids": [1, 10**9]}, "input_ids[1]"),
        ({"input_ids": [[1, 2]]}, "input_ids"),
        ({"input_ids": [1], "sampling_params": {"temperature": -1}}, "sampling_params.temperature"),
        ({"input_ids": [1], "sampling_params": {"top_p": 0}}, "sampling_params.top_p"),
        ({"input_ids": [1], "sampling_params": {"top_k": 0}}, "sampling_params.top_k"),
        ({"input_ids": [1], "sampling_params": {"max_new_tokens": 2.5}}, "sampling_params.max_new_tokens"),
        ({"input_ids": [1], "sampling_params": {"no_stop_trim": "yes"}}, "sampling_params.no_stop_trim"),
        ({"input_ids": [1], "sampling_params": {"stop_token_ids": 2}}, "sampling_params.stop_token_ids"),
        ({"input_ids": [1], "sampling_params": {"repetition_penalty": 1.2}}, "sampling_params.repetition_penalty"),
        ({"input_ids": [1], "sampling_params": {"bogus": 1}}, "sampling_params.bogus"),
        ({"input_ids": [1], "stream": True}, "stream"),
        ({"input_ids": [1], "rid": 5}, "rid"),
        ({"input_ids": [1], "extra": 1}, "extra"),
        ([1, 2], "body"),
    ],
)
def test_bad_generate_bodies_are_400_naming_the_field(client, body, field):
    response = client.post("/generate", body)
    assert response.status == 400
    assert response.body["error"]["message"].startswith(f"{field}:")


def test_bad_json_unknown_routes_and_methods(client):
    bad = client.request("POST", "/generate", raw=b"{not json")
    assert bad.status == 400
    assert bad.body["error"]["message"].startswith("body:")
    assert client.get("/no_such_route").status == 404
    assert client.get("/generate").status == 405
    missing_path = client.post("/update_weights_from_disk", {"weight_version": "x"})
    assert missing_path.status == 400
    assert missing_path.body["error"]["message"].startswith("model_path:")


def _long_request(client: Client, rid: str, tokens: int = 2000) -> dict:
    return client.generate(PROMPT, rid=rid, max_new_tokens=tokens, sampling_seed=9, ignore_eos=True)


def _wait_until_running(pool_future, seconds: float = 1.0) -> None:
    # The request is admitted at the scheduler's next round; give it time to sample some tokens.
    time.sleep(seconds)
    assert not pool_future.done()


def test_abort_request_ends_a_running_request(client):
    with ThreadPoolExecutor(2) as pool:
        long = pool.submit(_long_request, client, "to-abort")
        _wait_until_running(long)
        duplicate = client.post("/generate", {"rid": "to-abort", "input_ids": PROMPT})
        assert duplicate.status == 400
        assert duplicate.body["error"]["message"].startswith("rid:")
        assert client.post("/abort_request", {"rid": "to-abort"}).status == 200
        out = long.result(timeout=30)
    meta = out["meta_info"]
    assert meta["finish_reason"]["type"] == "abort"
    assert 0 < meta["completion_tokens"] < 2000
    assert len(out["output_ids"]) == len(meta["output_token_logprobs"]) == meta["completion_tokens"]


def test_abort_all_ends_every_request(client):
    with ThreadPoolExecutor(3) as pool:
        futures = [pool.submit(_long_request, client, f"all-{i}") for i in range(3)]
        _wait_until_running(futures[0])
        assert client.post("/abort_request", {"abort_all": True}).status == 200
        reasons = [f.result(timeout=30)["meta_info"]["finish_reason"]["type"] for f in futures]
    assert reasons == ["abort"] * 3


def test_a_request_whose_client_hangs_up_is_aborted(client, server):
    sampling = {"max_new_tokens": 2000, "ignore_eos": True}
    body = json.dumps({"rid": "hung-up", "input_ids": PROMPT, "sampling_params": sampling})
    host, port = server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port))) as connection:
        head = f"POST /generate HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n"
        connection.sendall((head + body).encode())
        time.sleep(0.5)
    # Once the server notices, the rid is free again (it would be refused as a duplicate while running,
    # and 2000 tokens take the tiny model several seconds).
    deadline = time.monotonic() + 2
    short = {"rid": "hung-up", "input_ids": PROMPT, "sampling_params": {"max_new_tokens": 1}}
    while client.post("/generate", short).status != 200:
        assert time.monotonic() < deadline, "the abandoned request kept running"
        time.sleep(0.2)


def test_pause_in_place_holds_requests_until_continue(client):
    assert client.post("/pause_generation", {"mode": "in_place"}).body["status"] == "ok"
    try:
        with ThreadPoolExecutor(1) as pool:
            held = pool.submit(client.generate, PROMPT, max_new_tokens=4, sampling_seed=1)
            time.sleep(1.0)
            assert not held.done()
            assert client.post("/continue_generation", {}).status == 200
            assert held.result(timeout=30)["meta_info"]["finish_reason"]["type"] == "length"
    finally:
        client.post("/continue_generation", {})


def _update(client: Client, path: Path, version: str, **extra: object) -> Response:
    response = client.post("/update_weights_from_disk", {"model_path": str(path), "weight_version": version, **extra})
    assert response.body["num_paused_requests"] == 0
    return response


def test_update_weights_from_disk_switches_version_and_outputs(client, tiny_dir, perturbed_dir, tmp_path):
    params = {"max_new_tokens": 10, "temperature": 1.0, "top_p": 1.0, "sampling_seed": 11, "ignore_eos": True}
    before = client.generate(PROMPT, **params)

    bad = _update(client, tmp_path / "missing", "never")
    assert bad.status == 400
    assert bad.body["success"] is False
    assert "missing" in bad.body["message"]
    empty_dir = tmp_path / "empty"
    empty_dir.mkdir()
    assert _update(client, empty_dir, "never").body["success"] is False
    assert client.get("/get_model_info").body["weight_version"] == "v0"
    assert _logprobs(client.generate(PROMPT, **params)) == _logprobs(before)

    try:
        good = _update(client, perturbed_dir, "v1")
        assert good.status == 200
        assert good.body["success"] is True
        info = client.get("/get_model_info").body
        assert info["weight_version"] == "v1"
        assert info["model_path"] == str(perturbed_dir)
        after = client.generate(PROMPT, **params)
        assert after["meta_info"]["weight_version"] == "v1"
        assert _logprobs(after) != pytest.approx(_logprobs(before), abs=1e-3)
        expected = _reference_logprobs(perturbed_dir, PROMPT, after["output_ids"], temperature=1.0)
        assert _logprobs(after) == pytest.approx(expected, abs=1e-4)
    finally:
        assert _update(client, tiny_dir, "v0").body["success"] is True
    assert _logprobs(client.generate(PROMPT, **params)) == pytest.approx(_logprobs(before), abs=1e-6)


def test_an_update_waits_for_in_flight_requests(client, tiny_dir, perturbed_dir):
    try:
        with ThreadPoolExecutor(2) as pool:
            # Long enough to still be decoding when the update arrives, on an idle machine too.
            running = pool.submit(_long_request, client, "in-flight", 1500)
            _wait_until_running(running, 0.3)
            update = pool.submit(_update, client, perturbed_dir, "v1")
            out = running.result(timeout=60)
            assert update.result(timeout=60).body["success"] is True
        # Sampled wholly by the old weights, and says so.
        assert out["meta_info"]["finish_reason"]["type"] == "length"
        assert out["meta_info"]["weight_version"] == "v0"
        expected = _reference_logprobs(tiny_dir, PROMPT, out["output_ids"], temperature=1.0)
        assert _logprobs(out) == pytest.approx(expected, abs=1e-4)
    finally:
        assert _update(client, tiny_dir, "v0").body["success"] is True


def test_an_update_with_abort_all_requests_ends_them(client, tiny_dir, perturbed_dir):
    try:
        with ThreadPoolExecutor(1) as pool:
            running = pool.submit(_long_request, client, "to-be-aborted")
            _wait_until_running(running)
            assert _update(client, perturbed_dir, "v1", abort_all_requests=True).body["success"] is True
            out = running.result(timeout=30)
        assert out["meta_info"]["finish_reason"]["type"] == "abort"
        assert out["meta_info"]["weight_version"] == "v0"
    finally:
        assert _update(client, tiny_dir, "v0").body["success"] is True


def test_an_update_is_refused_while_paused_requests_cannot_drain(client, perturbed_dir):
    with ThreadPoolExecutor(1) as pool:
        running = pool.submit(_long_request, client, "frozen")
        _wait_until_running(running, 0.5)
        client.post("/pause_generation", {"mode": "in_place"})
        try:
            refused = _update(client, perturbed_dir, "v1")
            assert refused.status == 400
            assert "paused" in refused.body["message"]
            assert client.get("/get_model_info").body["weight_version"] == "v0"
        finally:
            client.post("/abort_request", {"rid": "frozen"})
            client.post("/continue_generation", {})
        assert running.result(timeout=30)["meta_info"]["finish_reason"]["type"] == "abort"


def test_sigterm_stops_the_server_promptly_mid_request(tiny_dir):
    with running_server(tiny_dir) as process:
        pool = ThreadPoolExecutor(1)
        pending = pool.submit(_long_request, process.client, "cut-short")
        time.sleep(0.5)
        started = time.monotonic()
        process.process.send_signal(signal.SIGTERM)
        process.process.wait(timeout=10)
        assert time.monotonic() - started < 5
        # The request in flight is answered as aborted, or its connection just closes (before or
        # in the middle of the answer's body).
        with suppress(OSError, RuntimeError, http.client.HTTPException):
            assert pending.result(timeout=10)["meta_info"]["finish_reason"]["type"] == "abort"
        pool.shutdown()


def test_the_server_exits_once_its_parent_is_gone(tiny_dir):
    parent = subprocess.Popen(["sleep", "60"])
    try:
        with running_server(tiny_dir, env={"TRAJFLOW_PARENT_PID": str(parent.pid)}) as process:
            assert process.client.get("/health").status == 200
            parent.kill()
            parent.wait()
            process.process.wait(timeout=10)
            assert process.process.returncode == 0
    finally:
        if parent.poll() is None:
            parent.kill()

"""
The HTTP routes: SGLang's native API (the subset trajflow uses), on the standard library's
ThreadingHTTPServer. One thread per connection; a /generate thread submits to the engine and
waits for its request to finish, aborting it if the client goes away meanwhile.

Bodies and status codes follow SGLang: errors are 400 {"error": {"message": ...}}, a failed weight
update is 400 {"success": false, "message": ..., "num_paused_requests": 0}, /health and
/abort_request answer 200 with an empty body. /load_lora_adapter and /unload_lora_adapter answer
{"success", "error_message", "loaded_adapters": {name: path}}, 200 or 400; GET /v1/models lists the
base model and the loaded adapters (id = adapter name, root = its directory, parent = the base).
"""

from __future__ import annotations

import json
import logging
import select
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import torch
from transformers import PreTrainedModel

from .engine import DuplicateRequest, Engine, Sequence, UnknownAdapter
from .lora import AdapterError
from .protocol import BadRequest, parse_abort, parse_generate, parse_load_lora, parse_pause_mode, parse_unload_lora, parse_weight_update
from .weights import WeightLoadError, read_weights

log = logging.getLogger(__name__)

# How often a waiting /generate thread checks whether its client hung up.
_DISCONNECT_POLL_S = 0.25


@dataclass
class Reply:
    status: int
    # None = empty body.
    body: Any = None


class ModelServer:
    """Route handlers over an engine; independent of sockets except for the disconnect probe."""

    def __init__(self, engine: Engine, tokenizer: Any, model: PreTrainedModel, tokenizer_path: str):
        self.engine = engine
        self.tokenizer = tokenizer
        self.model = model
        self.tokenizer_path = tokenizer_path
        embeddings = model.get_input_embeddings()
        if not isinstance(embeddings, torch.nn.Embedding):
            raise TypeError(f"the model's input embeddings are a {type(embeddings).__name__}, not an Embedding: cannot tell its vocabulary size")
        self.vocab_size = embeddings.num_embeddings
        self.config = model.config
        self.ready = False

    def routes(self) -> dict[tuple[str, str], Callable[..., Reply]]:
        return {
            ("GET", "/health"): self.health,
            ("GET", "/get_model_info"): self.get_model_info,
            ("GET", "/v1/models"): self.list_models,
            ("POST", "/generate"): self.generate,
            ("POST", "/update_weights_from_disk"): self.update_weights_from_disk,
            ("POST", "/abort_request"): self.abort_request,
            ("POST", "/pause_generation"): self.pause_generation,
            ("POST", "/continue_generation"): self.continue_generation,
            ("POST", "/flush_cache"): self.flush_cache,
            ("GET", "/flush_cache"): self.flush_cache,
            ("POST", "/load_lora_adapter"): self.load_lora_adapter,
            ("POST", "/unload_lora_adapter"): self.unload_lora_adapter,
        }

    def health(self, body: Any = None, client_gone: Callable[[], bool] | None = None) -> Reply:
        return Reply(HTTPStatus.OK if self.ready else HTTPStatus.SERVICE_UNAVAILABLE)

    def get_model_info(self, body: Any = None, client_gone: Callable[[], bool] | None = None) -> Reply:
        return Reply(
            HTTPStatus.OK,
            {
                "model_path": self.engine.model_path,
                "tokenizer_path": self.tokenizer_path,
                "is_generation": True,
                "weight_version": self.engine.weight_version,
                "model_type": getattr(self.config, "model_type", None),
                "architectures": getattr(self.config, "architectures", None),
            },
        )

    def list_models(self, body: Any = None, client_gone: Callable[[], bool] | None = None) -> Reply:
        # SGLang's served model name defaults to the --model path; adapters are listed under their names.
        base = self.tokenizer_path
        max_context = int(getattr(self.config, "max_position_embeddings", 1 << 30))
        cards = [{"id": base, "object": "model", "owned_by": "trajflow", "root": base, "parent": None, "max_model_len": max_context}]
        for name, path in self.engine.loaded_adapters().items():
            cards.append({"id": name, "object": "model", "owned_by": "trajflow", "root": path, "parent": base, "max_model_len": None})
        return Reply(HTTPStatus.OK, {"object": "list", "data": cards})

    def load_lora_adapter(self, body: Any, client_gone: Callable[[], bool] | None = None) -> Reply:
        request = parse_load_lora(body)
        return self._lora_update(lambda: self.engine.load_adapter(request.lora_name, request.lora_path))

    def unload_lora_adapter(self, body: Any, client_gone: Callable[[], bool] | None = None) -> Reply:
        name = parse_unload_lora(body)
        return self._lora_update(lambda: self.engine.unload_adapter(name))

    def _lora_update(self, update: Callable[[], None]) -> Reply:
        try:
            update()
        except AdapterError as error:
            log.warning("LoRA adapter update refused: %s", error)
            return Reply(HTTPStatus.BAD_REQUEST, {"success": False, "error_message": str(error), "loaded_adapters": self.engine.loaded_adapters()})
        return Reply(HTTPStatus.OK, {"success": True, "error_message": "", "loaded_adapters": self.engine.loaded_adapters()})

    def generate(self, body: Any, client_gone: Callable[[], bool] | None = None) -> Reply:
        request = parse_generate(body, self.vocab_size)
        prompt = request.input_ids if request.input_ids is not None else list(self.tokenizer(request.text, add_special_tokens=True)["input_ids"])
        max_context = int(getattr(self.config, "max_position_embeddings", 1 << 30))
        if len(prompt) >= max_context:
            field = "input_ids" if request.input_ids is not None else "text"
            raise BadRequest(f"{field}: {len(prompt)} prompt tokens leave no room in the model's context of {max_context}")
        rid = request.rid or uuid.uuid4().hex
        try:
            seq = self.engine.submit(rid, prompt, request.sampling, request.lora_path)
        except (DuplicateRequest, UnknownAdapter) as error:
            raise BadRequest(str(error)) from error
        while not seq.done.wait(_DISCONNECT_POLL_S):
            if client_gone is not None and client_gone():
                # SGLang aborts a request whose client disconnected; so does this server.
                self.engine.abort(rid, abort_all=False, message="Aborted: the client disconnected")
                seq.done.wait()
        return Reply(HTTPStatus.OK, self._generate_response(seq, request.return_logprob))

    def _generate_response(self, seq: Sequence, return_logprob: bool) -> dict[str, Any]:
        assert seq.finish_reason is not None
        output_ids = list(seq.output_ids)
        # SGLang trims the matched stop token from output_ids and text unless no_stop_trim; the
        # logprobs and completion_tokens still cover every sampled token.
        if seq.finish_reason["type"] == "stop" and not seq.sampling.no_stop_trim:
            output_ids = output_ids[:-1]
        meta_info: dict[str, Any] = {
            "id": seq.rid,
            "finish_reason": seq.finish_reason,
            "prompt_tokens": len(seq.prompt),
            "completion_tokens": len(seq.output_ids),
            "cached_tokens": 0,
            "weight_version": seq.weight_version,
            "e2e_latency": (seq.finished_at or time.monotonic()) - seq.created_at,
        }
        if return_logprob:
            meta_info["output_token_logprobs"] = [[logprob, token, None] for logprob, token in zip(seq.output_logprobs, seq.output_ids, strict=True)]
        text = self.tokenizer.decode(output_ids, skip_special_tokens=seq.sampling.skip_special_tokens)
        return {"text": text, "output_ids": output_ids, "meta_info": meta_info}

    def update_weights_from_disk(self, body: Any, client_gone: Callable[[], bool] | None = None) -> Reply:
        request = parse_weight_update(body)
        try:
            # Read and checked here, outside the scheduler, so decoding goes on meanwhile.
            weights = read_weights(request.model_path, self.model)
        except WeightLoadError as error:
            success, message = False, f"Failed to update weights: {error}. The old weights are kept."
        else:
            success, message = self.engine.update_weights(weights, request.weight_version, request.model_path, request.abort_all_requests)
        status = HTTPStatus.OK if success else HTTPStatus.BAD_REQUEST
        return Reply(status, {"success": success, "message": message, "num_paused_requests": 0})

    def abort_request(self, body: Any, client_gone: Callable[[], bool] | None = None) -> Reply:
        request = parse_abort(body)
        self.engine.abort(request.rid, request.abort_all, message="Aborted by abort_request")
        return Reply(HTTPStatus.OK)

    def pause_generation(self, body: Any, client_gone: Callable[[], bool] | None = None) -> Reply:
        self.engine.pause(parse_pause_mode(body))
        return Reply(HTTPStatus.OK, {"message": "Generation paused successfully.", "status": "ok"})

    def continue_generation(self, body: Any, client_gone: Callable[[], bool] | None = None) -> Reply:
        self.engine.resume()
        return Reply(HTTPStatus.OK, {"message": "Generation continued successfully.", "status": "ok"})

    def flush_cache(self, body: Any = None, client_gone: Callable[[], bool] | None = None) -> Reply:
        # There is no prefix cache to flush: every request is prefilled from scratch.
        return Reply(HTTPStatus.OK, "Cache flushed.\n")


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not valid JSON")


def _parse_json(raw: bytes) -> Any:
    if not raw.strip():
        return None
    try:
        return json.loads(raw, parse_constant=_reject_constant)
    except (ValueError, UnicodeDecodeError) as error:
        raise BadRequest(f"body: not valid JSON: {error}") from error


def _encode(reply: Reply) -> tuple[int, str, bytes]:
    if reply.body is None:
        return int(reply.status), "text/plain; charset=utf-8", b""
    if isinstance(reply.body, str):
        return int(reply.status), "text/plain; charset=utf-8", reply.body.encode()
    # allow_nan=False: JavaScript's JSON.parse rejects NaN / Infinity, so fail loudly here instead.
    return int(reply.status), "application/json", json.dumps(reply.body, allow_nan=False).encode()


def _error(status: HTTPStatus, message: str) -> tuple[int, str, bytes]:
    """SGLang's error body."""
    return _encode(Reply(status, {"error": {"message": message}}))


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # The headers and the body leave in two writes; with Nagle's algorithm on, the body waits for the
    # client's delayed ACK of the headers (~40 ms on Linux), which every request on a kept-alive
    # connection would pay.
    disable_nagle_algorithm = True
    server: _Server

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def _dispatch(self, method: str) -> None:
        path = self.path.split("?", 1)[0]
        routes = self.server.routes
        try:
            raw = self._read_body()
            handler = routes.get((method, path))
            if handler is None:
                if any(route_path == path for _, route_path in routes):
                    self._send(*_error(HTTPStatus.METHOD_NOT_ALLOWED, f"{method} is not allowed on {path}"))
                else:
                    self._send(*_error(HTTPStatus.NOT_FOUND, f"no route {method} {path}"))
                return
            reply = handler(_parse_json(raw), client_gone=self._client_gone)
            encoded = _encode(reply)
        except BadRequest as error:
            encoded = _error(HTTPStatus.BAD_REQUEST, str(error))
        except Exception as error:  # answer rather than drop the connection
            log.exception("%s %s failed", method, path)
            encoded = _error(HTTPStatus.INTERNAL_SERVER_ERROR, f"internal error: {error}")
        self._send(*encoded)

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            self.close_connection = True
            raise BadRequest("body: chunked transfer encoding is not supported; send Content-Length")
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _client_gone(self) -> bool:
        """True once the peer closed its end (readable with nothing to read)."""
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            return bool(readable) and self.connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    def _send(self, status: int, content_type: str, payload: bytes) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s " + format, self.address_string(), *args)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    # Many rollout workers connect at once; the default backlog of 5 would refuse some.
    request_queue_size = 256

    def __init__(self, address: tuple[str, int], routes: dict[tuple[str, str], Callable[..., Reply]]):
        self.routes = routes
        super().__init__(address, _Handler)


def make_http_server(app: ModelServer, host: str, port: int) -> ThreadingHTTPServer:
    return _Server((host, port), app.routes())

"""
Command line: serve a Hugging Face causal LM directory over SGLang's HTTP API on CPU (or whatever
device torch defaults to).

    python -m trajflow_py.model_server --model DIR --port P [--host 127.0.0.1] [--max-batch 16]
        [--dtype float32|bfloat16] [--weight-version 0] [--threads N] [--enable-lora [--max-loras 8]]

Prints "model server listening on http://HOST:PORT" once the model is loaded and the socket is
bound (with --port 0 the kernel picks the port, and this line says which). Exits on SIGTERM /
SIGINT, and by itself when TRAJFLOW_PARENT_PID is set and that process is gone.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading

# No model hub is reachable: transformers must never try the network.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# OpenMP's default active spin-waiting keeps torch's idle threads running between parallel regions:
# on cores shared with other busy processes they take CPU time from the threads that have work,
# which slows every decode step. Passive waiting puts idle threads to sleep instead.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402

from .engine import Engine  # noqa: E402
from .http_api import ModelServer, make_http_server  # noqa: E402
from .loading import eos_token_ids, load_model, warm_up  # noqa: E402
from .lora import LoraModel  # noqa: E402

log = logging.getLogger("trajflow_py.model_server")

PARENT_POLL_S = 2.0
# SGLang's default for --max-loras-per-batch.
DEFAULT_MAX_LORAS = 8


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m trajflow_py.model_server", description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="Hugging Face model directory (safetensors + tokenizer)")
    parser.add_argument("--port", type=int, required=True, help="TCP port; 0 lets the kernel choose")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--max-batch", type=int, default=16, help="most requests decoded together")
    parser.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    parser.add_argument("--weight-version", default="0", help="reported as meta_info.weight_version until an update sets another")
    parser.add_argument("--threads", type=int, default=0, help="torch intra-op threads (0 = one per CPU core)")
    parser.add_argument("--log-level", default="INFO")
    parser.add_argument("--enable-lora", action="store_true", help="serve peft LoRA adapters loaded at runtime (/load_lora_adapter)")
    parser.add_argument(
        "--max-loras",
        type=int,
        default=None,
        help=f"most LoRA adapters loaded at once, beyond which a load is refused (default {DEFAULT_MAX_LORAS})",
    )
    args = parser.parse_args(argv)
    if args.max_batch < 1:
        parser.error("--max-batch must be >= 1")
    if args.max_loras is not None and not args.enable_lora:
        parser.error("--max-loras needs --enable-lora")
    if args.max_loras is None:
        args.max_loras = DEFAULT_MAX_LORAS
    if args.max_loras < 1:
        parser.error("--max-loras must be >= 1")
    return args


def _parent_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def _watch_parent(pid: int, stop: threading.Event) -> None:
    while not stop.wait(PARENT_POLL_S):
        if not _parent_alive(pid):
            log.info("parent process %d is gone; exiting", pid)
            stop.set()


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    torch.set_num_threads(args.threads or os.cpu_count() or 1)

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    parent = os.environ.get("TRAJFLOW_PARENT_PID")
    if parent:
        threading.Thread(target=_watch_parent, args=(int(parent), stop), name="parent-watch", daemon=True).start()

    model, tokenizer = load_model(args.model, args.dtype)
    warm_up(model)
    engine = Engine(
        model,
        max_batch=args.max_batch,
        weight_version=args.weight_version,
        model_path=args.model,
        eos_token_ids=eos_token_ids(model, tokenizer),
        pad_token_id=tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0,
        max_context=int(getattr(model.config, "max_position_embeddings", 1 << 30)),
        lora=LoraModel(model) if args.enable_lora else None,
        max_loras=args.max_loras if args.enable_lora else 0,
    )
    app = ModelServer(engine, tokenizer, model, tokenizer_path=args.model)
    server = make_http_server(app, args.host, args.port)
    engine.start()
    app.ready = True
    threading.Thread(target=server.serve_forever, name="http", daemon=True).start()

    host, port = server.socket.getsockname()[:2]
    print(f"model server listening on http://{host}:{port}", flush=True)
    if stop.is_set():
        log.info("stop requested during startup")

    # A timed wait keeps the main thread returning to the interpreter, where signal handlers run.
    while not stop.wait(0.5):
        pass
    log.info("shutting down")
    server.shutdown()
    engine.shutdown(timeout=2.0)
    server.server_close()
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter teardown: the scheduler thread may still be inside a forward pass.
    os._exit(0)


if __name__ == "__main__":
    main()

"""
Decode throughput of a running server over HTTP, at a few concurrency levels.

    python -m trajflow_py.model_server.bench --url http://127.0.0.1:PORT [--tokens 64] [--batch 1 16]

Each level sends `batch` concurrent /generate requests with a short prompt and ignore_eos, so every
request decodes exactly --tokens tokens; tokens/s = all completion tokens / wall time (the short
prompt's prefill is included). Levels run one after another, after one warm-up request.
"""

from __future__ import annotations

import argparse
import time
from concurrent.futures import ThreadPoolExecutor

from .client import Client

# A short ChatML-shaped prompt; the ids only need to be valid for the served vocabulary.
PROMPT = [1, 4093, 198, 22518, 253, 1345, 2821, 30, 2, 198, 1, 520, 9531, 198]


def measure(client: Client, batch: int, tokens: int) -> float:
    """Completion tokens per second with `batch` concurrent requests of `tokens` tokens each."""

    def one(seed: int) -> int:
        out = client.generate(PROMPT, max_new_tokens=tokens, temperature=1.0, top_p=1.0, sampling_seed=seed, ignore_eos=True)
        return int(out["meta_info"]["completion_tokens"])

    start = time.monotonic()
    with ThreadPoolExecutor(max_workers=batch) as pool:
        total = sum(pool.map(one, range(batch)))
    return total / (time.monotonic() - start)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 16])
    args = parser.parse_args(argv)

    client = Client(args.url)
    measure(client, 1, 4)
    for batch in args.batch:
        rate = measure(client, batch, args.tokens)
        print(f"batch {batch:>3}: {rate:8.1f} tokens/s ({args.tokens} tokens per request)", flush=True)


if __name__ == "__main__":
    main()

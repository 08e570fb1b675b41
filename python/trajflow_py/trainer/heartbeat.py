"""
Heartbeats from a thread of their own while a sync activity runs: a train step is blocking torch
code (a forward pass of a real model may take longer than the workflow's 2-minute heartbeat
timeout allows between two calls made from the step itself). torch releases the GIL in its
kernels, so the thread gets its turn. temporalio's heartbeat of a thread-pool activity is
thread-safe (it is scheduled onto the worker's event loop); the thread runs in a copy of the
activity's context, which is where `activity.heartbeat` finds the activity.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress

from temporalio import activity

HEARTBEAT_INTERVAL_S = 5.0


@contextmanager
def heartbeating(interval_s: float = HEARTBEAT_INTERVAL_S) -> Iterator[None]:
    """Heartbeats now and every `interval_s` until the block ends (a no-op outside an activity)."""
    if not activity.in_activity():
        yield
        return
    context = contextvars.copy_context()
    stop = threading.Event()

    def beat() -> None:
        while True:
            # One lost heartbeat (a busy event loop) is no reason to stop beating.
            with suppress(Exception):
                context.run(activity.heartbeat)
            if stop.wait(interval_s):
                return

    thread = threading.Thread(target=beat, name="heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        # A heartbeat waits at most 10 s for the event loop to take it.
        thread.join(timeout=15)

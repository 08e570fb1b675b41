"""
Deferring a cancellation across file operations that must not stop halfway. Temporal cancels a
sync activity by raising an exception inside its thread at whatever line it is running; in the
middle of publishing a checkpoint that could leave a version renamed aside and not replaced.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from temporalio import activity


@contextmanager
def cancellation_deferred() -> Iterator[None]:
    """A cancellation that arrives inside the block is raised at its end (a no-op outside an activity)."""
    if not activity.in_activity():
        yield
        return
    with activity.shield_thread_cancel_exception():
        yield

"""
The failure types that cross to the workflows (src/core/failures.ts): the same strings, so a
workflow recognises a Python worker's failure as it does a TypeScript worker's.
"""

from __future__ import annotations

from temporalio.exceptions import ApplicationError

#: A worker whose code or config differs from the run's refused the task (retryable: a matching worker may take it).
WORKER_MISMATCH = "WorkerMismatch"
#: The trainer was given a config it cannot train with (not retryable: a retry gets the same config).
INVALID_CONFIG = "InvalidConfig"
#: A stored file (a turn, a summary) failed its length or checksum check (not retryable: a retry reads the same bytes).
CORRUPT_STORED_FILE = "CorruptStoredFile"
#: The data directory's filesystem is full: the write was undone (retryable: space may be freed).
DISK_FULL = "DiskFull"


def invalid_config(message: str) -> ApplicationError:
    return ApplicationError(message, type=INVALID_CONFIG, non_retryable=True)

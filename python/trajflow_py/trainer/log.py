"""
Log lines as JSON objects (`{"time", "level", "msg", ...fields}`), one a line, flushed at once:
the TypeScript side reads this process's output from a log file while it runs.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any


class JsonLineFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": int(record.created * 1000),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        line.update(getattr(record, "fields", {}))
        if record.exc_info:
            line["err"] = self.formatException(record.exc_info)
        # default=str: a field that is not JSON (a Path, an exception) is logged as its text.
        return json.dumps(line, default=str)


def configure_logging(level: int = logging.INFO) -> None:
    """Every logger (ours, temporalio's) writes JSON lines to stdout."""
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(JsonLineFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)


class Logger:
    """`logger.info("msg", runId=..., step=...)`: a message and its fields."""

    def __init__(self, name: str) -> None:
        self._logger = logging.getLogger(name)

    def _log(self, level: int, msg: str, fields: dict[str, Any], exc_info: bool = False) -> None:
        self._logger.log(level, msg, extra={"fields": fields}, exc_info=exc_info)
        for handler in logging.getLogger().handlers:
            handler.flush()

    def info(self, msg: str, **fields: Any) -> None:
        self._log(logging.INFO, msg, fields)

    def warn(self, msg: str, **fields: Any) -> None:
        self._log(logging.WARNING, msg, fields)

    def error(self, msg: str, exc_info: bool = False, **fields: Any) -> None:
        self._log(logging.ERROR, msg, fields, exc_info)


def now_ms() -> int:
    """Wall clock in whole epoch milliseconds, as JavaScript's Date.now()."""
    return time.time_ns() // 1_000_000

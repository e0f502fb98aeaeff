"""Structured logs: one JSON object per line on stderr, what a cluster's log pipeline indexes.

Each record carries `time`, `level`, `logger`, `message` and the fields the controller passes as `extra`
(`workload`, `check`, `state`, `admission`, `remaining`, `retry_in`, ...), so that "why is this Workload not
admitted" is one query. `--log-format text` gives the same records as plain lines for a person at a terminal.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any, Final, TextIO

#: attributes every LogRecord has; anything else on a record came through `extra`
_STANDARD: Final = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str, separators=(",", ":"))


def configure(log_format: str = "json", level: str = "info", stream: TextIO | None = None) -> logging.Handler:
    """Send the controller's and dispatch's logs to `stream` (stderr) in the given format; returns the handler."""
    handler = logging.StreamHandler(stream or sys.stderr)
    if log_format == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger("airflow_provider_dispatch")
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    root.propagate = False
    return handler


__all__ = ["JsonFormatter", "configure"]

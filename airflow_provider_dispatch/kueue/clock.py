"""The controller's sense of time: wall time in a cluster, the lab clock in a rehearsal or a test.

Every timer the controller waits on (a requeue after backoff, the resync, a relist after an error) goes through
one `Clock`, so a lab run whose clock runs a hundred times faster than real time, or jumps, drives the
controller's timers too: a test never sleeps on wall time to let a backoff pass (docs/architecture.md, Tests).
`LabClock` (lab/clock.py) satisfies the protocol as it is. HTTP timeouts stay wall time: they bound a socket,
not the cluster.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Seconds since the epoch."""

    async def sleep(self, seconds: float) -> None:
        """Wait `seconds` of this clock's time."""


class WallClock:
    """Real time: what the controller uses in a cluster."""

    def now(self) -> float:
        return time.time()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(seconds, 0.0))


def timestamp(seconds: float) -> str:
    """RFC 3339 at second precision, as `metav1.Time` serializes (`lastTransitionTime`)."""
    return datetime.fromtimestamp(int(seconds), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def as_datetime(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


__all__ = ["Clock", "WallClock", "as_datetime", "timestamp"]

"""The lab clock: lab time that can run faster than real time and can jump.

Every timestamp the lab writes (creationTimestamp, deletionTimestamp, condition times, heartbeats) and every
timer a simulated controller waits on (a 30 s grace period, the 50 s node monitor grace period, PodGC's 20 s
loop) is lab time. At speed 100 a 30 s grace period passes in 0.3 s of wall time; `advance()` jumps over a wait
at once, which is how a test or a drill crosses an hour without sleeping. Speed 0 stops time: only `advance()`
moves it, which makes a schedule fully reproducible.

Lab time is wall time scaled, plus every jump, with one guard: lab time only passes while the lab's event loop
runs. A ticker task (`run()`) folds the elapsed wall time into lab time every few milliseconds, and never more
than `max_stall` seconds of wall time at once. If the machine starves the lab's loop for half a second (a busy CI
machine), lab time advances by at most `max_stall * speed`, not by fifty lab seconds: otherwise a kubelet whose
heartbeat was merely delayed by the host would look lost to the node lifecycle controller, an artefact no real
cluster has at that scale. Without a running ticker lab time stops after `max_stall`. The clock lives on the lab's
event loop; `advance()` and `set_speed()` are called there (the runtime forwards calls from other threads).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from datetime import UTC, datetime


class LabClock:
    """Lab time in seconds since the epoch, running `speed` times faster than wall time."""

    def __init__(
        self,
        speed: float = 1.0,
        start: datetime | None = None,
        *,
        tick_seconds: float = 0.005,
        max_stall: float = 0.05,
    ) -> None:
        if speed < 0:
            raise ValueError(f"the lab clock's speed must be 0 or more, not {speed}")
        self._speed = speed
        self._origin_lab = (start or datetime.now(UTC)).timestamp()
        self._origin_wall = time.monotonic()
        self._tick_seconds = tick_seconds
        self._max_stall = max_stall
        self._changed = asyncio.Event()

    @property
    def speed(self) -> float:
        return self._speed

    def now(self) -> float:
        """Lab time, in seconds since the epoch."""
        elapsed = min(time.monotonic() - self._origin_wall, self._max_stall)
        return self._origin_lab + elapsed * self._speed

    def _fold(self) -> None:
        """Fold the wall time since the last tick into lab time, at most `max_stall` of it."""
        wall = time.monotonic()
        self._origin_lab += min(wall - self._origin_wall, self._max_stall) * self._speed
        self._origin_wall = wall

    async def run(self) -> None:
        """The ticker: keeps lab time moving while the loop runs. Runs until cancelled."""
        while True:
            await asyncio.sleep(self._tick_seconds)
            self._fold()

    def now_datetime(self) -> datetime:
        return datetime.fromtimestamp(self.now(), UTC)

    def timestamp(self, offset_seconds: float = 0.0) -> str:
        """RFC 3339 at second precision, as `metav1.Time` serializes."""
        return format_timestamp(self.now() + offset_seconds)

    def micro_timestamp(self) -> str:
        """RFC 3339 with microseconds, as `metav1.MicroTime` serializes (Lease renewTime, Event eventTime)."""
        return self.now_datetime().strftime("%Y-%m-%dT%H:%M:%S.%fZ")

    def advance(self, seconds: float) -> None:
        """Jump lab time forward and wake every timer that is now due."""
        if seconds < 0:
            raise ValueError("lab time only moves forward")
        self._origin_lab += seconds
        self._wake()

    def set_speed(self, speed: float) -> None:
        """Change the rate without moving lab time."""
        if speed < 0:
            raise ValueError(f"the lab clock's speed must be 0 or more, not {speed}")
        self._fold()
        self._speed = speed
        self._wake()

    def wall_seconds(self, lab_seconds: float) -> float | None:
        """How long `lab_seconds` take in wall time; None when the clock is stopped."""
        if self._speed == 0:
            return None
        return max(lab_seconds, 0.0) / self._speed

    async def sleep(self, seconds: float) -> None:
        """Wait `seconds` of lab time, waking early on a jump that makes the deadline pass."""
        await self.sleep_until(self.now() + seconds)

    async def sleep_until(self, deadline: float) -> None:
        while (remaining := deadline - self.now()) > 0:
            changed = self._changed
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.wall_seconds(remaining)):
                    await changed.wait()

    def _wake(self) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()


def format_timestamp(epoch_seconds: float) -> str:
    """RFC 3339 at second precision (truncated, as Go's `time.Time.Truncate(time.Second)` in `metav1.Time`)."""
    return datetime.fromtimestamp(int(epoch_seconds), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_timestamp(value: str) -> float:
    """Seconds since the epoch from an RFC 3339 string as the API writes it."""
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()

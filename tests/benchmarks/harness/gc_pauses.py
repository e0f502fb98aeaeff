"""CPython's garbage collections, timed: which part of an event loop's lag is the interpreter's, not the code's.

A full (generation-2) collection traverses every container object the process holds, and it holds the GIL and
so the event loop for all of it. In a triggerer most of those objects are not the triggers': they are Airflow's
and the providers' imports (about 230,000 objects for Airflow, this provider and its clients, before a single
trigger starts), and CPython starts a full collection on its own whenever the objects that survived younger
collections exceed a quarter of those a full collection last saw (the `gc` module's documented threshold,
Python 3.11 `Modules/gcmodule.c`). So 1,000 triggers that start at once can set one off, and it then holds the
loop for as long as the whole heap takes to traverse, with or without them.

`GcPauses` records each collection's generation and its start and end on `time.monotonic()`, the clock
`asyncio`'s loop time uses (`BaseEventLoop.time`), through `gc.callbacks`, so that `harness.loop_lag` can tell
the samples a full collection delayed from those the code itself delayed. `timed_full_collection()` measures
one full collection of the process as it is: the floor, for the same process, that no trigger code can lower.
"""

from __future__ import annotations

import gc
import time
from dataclasses import dataclass
from typing import Any

FULL: int = 2  # the oldest generation: a collection of it traverses the whole heap


@dataclass(frozen=True)
class Pause:
    """One collection: its generation and when it ran (`time.monotonic()` seconds)."""

    generation: int
    start: float
    end: float

    @property
    def seconds(self) -> float:
        return self.end - self.start

    def overlaps(self, start: float, end: float) -> bool:
        return self.start < end and self.end > start


class GcPauses:
    """Every collection between `install()` and `remove()`, phase by phase (`take()`)."""

    def __init__(self) -> None:
        self._pauses: list[Pause] = []
        self._began: tuple[int, float] | None = None

    def install(self) -> None:
        if self._callback not in gc.callbacks:
            gc.callbacks.append(self._callback)

    def remove(self) -> None:
        if self._callback in gc.callbacks:
            gc.callbacks.remove(self._callback)

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        now = time.monotonic()
        if phase == "start":
            self._began = (int(info["generation"]), now)
        elif self._began is not None:
            generation, began = self._began
            self._pauses.append(Pause(generation, began, now))
            self._began = None

    def take(self) -> list[Pause]:
        """The collections since the last `take()`; the next phase starts now."""
        pauses, self._pauses = self._pauses, []
        return pauses


def full(pauses: list[Pause]) -> list[Pause]:
    return [p for p in pauses if p.generation == FULL]


def timed_full_collection() -> dict[str, Any]:
    """One full collection of this process, timed, and the container objects it traversed (counted after)."""
    started = time.perf_counter()
    gc.collect()
    seconds = time.perf_counter() - started
    return {"seconds": seconds, "objects": len(gc.get_objects())}

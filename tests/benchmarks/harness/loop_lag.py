"""Event-loop lag: how late an `asyncio.sleep(interval)` wakes up, sampled for as long as a phase lasts.

A triggerer runs every trigger on one event loop; anything that holds the loop (decoding a large answer,
building a TLS context, a thousand coroutines woken at once) delays every other trigger and the triggerer's
own heartbeat. The way to see it from inside the loop is a task that sleeps `interval` again and again and
records how much longer than `interval` each sleep took (the oversleep). A loop that is never held shows
oversleeps of a fraction of a millisecond; one held for 200 ms shows one sample of about 200 ms.

`LoopLag.start()` begins sampling on the running loop; `take()` returns the samples since the previous `take()`
(one phase of a benchmark: the start-up burst, then the steady window) as a `LagSummary` and starts a new
phase. Sampling uses `loop.time()` (monotonic), the clock `asyncio.sleep` itself uses.

While it samples it also records the process's garbage collections (`harness.gc_pauses`), phase by phase with
the samples, and `take()` splits the samples: those a full collection overlapped (the interpreter traversing
the whole heap, most of it not the code's) and the rest (what the code itself held the loop for), so a results
table can say which of the two a long stretch was.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from dataclasses import dataclass
from typing import Any

from .gc_pauses import GcPauses, full


def percentile(values: list[float], fraction: float) -> float:
    """The nearest-rank percentile (0 for no values): the smallest value at or above `fraction` of them."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]


@dataclass(frozen=True)
class LagSummary:
    """The oversleeps of one phase, in seconds."""

    samples: int
    p50: float
    p99: float
    max: float

    @classmethod
    def of(cls, values: list[float]) -> LagSummary:
        return cls(len(values), percentile(values, 0.50), percentile(values, 0.99), max(values, default=0.0))

    def as_json(self) -> dict[str, Any]:
        return {"samples": self.samples, "p50": self.p50, "p99": self.p99, "max": self.max}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LagSummary:
        return cls(int(data["samples"]), float(data["p50"]), float(data["p99"]), float(data["max"]))


@dataclass(frozen=True)
class PhaseLag:
    """A phase's lag: all samples, and the samples no full collection overlapped, with those collections."""

    all: LagSummary
    outside_full_collections: LagSummary
    full_collections: int
    longest_full_collection: float

    def as_json(self) -> dict[str, Any]:
        return {
            **self.all.as_json(),
            "outsideFullCollections": self.outside_full_collections.as_json(),
            "fullCollections": self.full_collections,
            "longestFullCollection": self.longest_full_collection,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PhaseLag:
        summary = LagSummary.from_json(data)
        outside = data.get("outsideFullCollections")  # absent from runs made before collections were timed
        return cls(
            summary,
            LagSummary.from_json(outside) if outside else summary,
            int(data.get("fullCollections", 0)),
            float(data.get("longestFullCollection", 0.0)),
        )


class LoopLag:
    """Samples the running loop's oversleep of `interval` seconds, phase by phase."""

    def __init__(self, interval: float = 0.01) -> None:
        if interval <= 0:
            raise ValueError("interval must be positive")
        self.interval = interval
        self._samples: list[tuple[float, float, float]] = []  # (slept at, woke at, oversleep)
        self._task: asyncio.Task[None] | None = None
        self._sampled = asyncio.Event()
        self._collections = GcPauses()

    def start(self) -> None:
        if self._task is None:
            self._collections.install()
            self._task = asyncio.get_running_loop().create_task(self._sample(), name="loop-lag sampler")

    async def _sample(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            before = loop.time()
            await asyncio.sleep(self.interval)
            after = loop.time()
            self._samples.append((before, after, max(0.0, after - before - self.interval)))
            sampled, self._sampled = self._sampled, asyncio.Event()
            sampled.set()

    async def next_sample(self) -> None:
        """Wait until the sampler has recorded one more sample (what a test synchronises on)."""
        await self._sampled.wait()

    def take(self) -> PhaseLag:
        """The samples since the last `take()`, split by the phase's full collections; the next phase starts."""
        samples, self._samples = self._samples, []
        collections = full(self._collections.take())
        outside = [lag for start, end, lag in samples if not any(p.overlaps(start, end) for p in collections)]
        return PhaseLag(
            LagSummary.of([lag for _, _, lag in samples]),
            LagSummary.of(outside),
            len(collections),
            max((p.seconds for p in collections), default=0.0),
        )

    async def stop(self) -> None:
        self._collections.remove()
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

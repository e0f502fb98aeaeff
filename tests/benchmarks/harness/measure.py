"""What one call costs the client: CPU, wall time, requests and bytes, peak heap and peak RSS growth.

The protocol, for one case in its own process (`workers.py`), after the caller has warmed the code paths up:

1. Timed runs, repeated up to `repeat` times while the time `budget` lasts (always at least one, so that a
   50,000-pod baseline that takes a minute runs once): per run, the client's CPU time (`time.process_time`: all
   threads of this process, user + system), the wall time, and the traffic the lab's meter counted, read before
   and after the run outside the timed window. `gc.collect()` runs before each run, so that no run pays for
   its predecessor's garbage; the collector stays on during the run, as it is in production.
2. Peak RSS growth, from the first timed run: the process's peak resident set (`ru_maxrss`) after it, minus its
   resident set before it. Coarse (pages, allocator arenas), but it includes memory outside Python's allocators.
3. Peak heap, in one more run of its own: `tracemalloc`'s peak of memory allocated during the run. Precise and
   attributable to the call (Python objects, the bytes read from the socket, the decoded JSON, client models), but
   tracemalloc slows allocation several-fold, so that run is never timed.

Optionally `server_cpu` reads the lab process's CPU seconds, so that a run also says what it cost the server;
that is context, not part of the client's figures.
"""

from __future__ import annotations

import gc
import resource
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import psutil

from .meter import Traffic

T = TypeVar("T")


@dataclass(frozen=True)
class Run:
    """One timed run."""

    cpu_seconds: float
    wall_seconds: float
    traffic: Traffic
    server_cpu_seconds: float | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "cpuSeconds": self.cpu_seconds,
            "wallSeconds": self.wall_seconds,
            "traffic": self.traffic.as_json(),
            "serverCpuSeconds": self.server_cpu_seconds,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Run:
        return cls(
            data["cpuSeconds"], data["wallSeconds"], Traffic.from_json(data["traffic"]), data.get("serverCpuSeconds")
        )


@dataclass(frozen=True)
class Measurement:
    """The runs of one case, and its memory figures."""

    runs: tuple[Run, ...]
    peak_heap_bytes: int
    rss_growth_bytes: int

    @property
    def cpu_seconds(self) -> float:
        """Median client CPU seconds per call."""
        return statistics.median(r.cpu_seconds for r in self.runs)

    @property
    def wall_seconds(self) -> float:
        return statistics.median(r.wall_seconds for r in self.runs)

    @property
    def server_cpu_seconds(self) -> float | None:
        values = [r.server_cpu_seconds for r in self.runs if r.server_cpu_seconds is not None]
        return statistics.median(values) if values else None

    @property
    def traffic(self) -> Traffic:
        """The first run's traffic (`traffic_stable` says whether every run sent the same)."""
        return self.runs[0].traffic

    @property
    def traffic_stable(self) -> bool:
        return all(r.traffic == self.runs[0].traffic for r in self.runs)

    def as_json(self) -> dict[str, Any]:
        return {
            "runs": [r.as_json() for r in self.runs],
            "peakHeapBytes": self.peak_heap_bytes,
            "rssGrowthBytes": self.rss_growth_bytes,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Measurement:
        return cls(tuple(Run.from_json(r) for r in data["runs"]), data["peakHeapBytes"], data["rssGrowthBytes"])


def peak_rss_bytes() -> int:
    """The process's peak resident set so far (`ru_maxrss`: kilobytes on Linux, bytes on macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)


def measure(
    call: Callable[[], T],
    read_meter: Callable[[], Traffic],
    *,
    repeat: int,
    budget_seconds: float,
    server_cpu: Callable[[], float] | None = None,
) -> tuple[Measurement, T]:
    """Measure `call` as the module docstring says; returns the measurement and the last run's result."""
    if repeat < 1:
        raise ValueError("repeat must be at least 1")
    runs: list[Run] = []
    rss_growth = 0
    started = time.perf_counter()
    result: T
    while not runs or (len(runs) < repeat and time.perf_counter() - started < budget_seconds):
        gc.collect()
        rss_before = psutil.Process().memory_info().rss
        traffic_before = read_meter()
        server_before = server_cpu() if server_cpu else None
        cpu_before, wall_before = time.process_time(), time.perf_counter()
        result = call()
        cpu, wall = time.process_time() - cpu_before, time.perf_counter() - wall_before
        server = server_cpu() - server_before if server_cpu and server_before is not None else None
        traffic = read_meter() - traffic_before
        if not runs:
            rss_growth = max(0, peak_rss_bytes() - rss_before)
        runs.append(Run(cpu, wall, traffic, server))
        del result
    gc.collect()
    tracemalloc.start()
    try:
        result = call()
        _, peak_heap = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return Measurement(tuple(runs), peak_heap, rss_growth), result

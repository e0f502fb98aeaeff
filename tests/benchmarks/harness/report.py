"""Ratios, number formatting, Markdown tables and the machine's description, for benchmark results pages.

Every figure a benchmark reports goes next to its baseline from the same run, as `baseline / candidate`: how
many times cheaper the candidate is (a ratio above 1 is better, below 1 worse). A ratio against a zero is
reported as such, never as infinity.
"""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Sequence
from importlib import metadata
from typing import Any

import psutil


def ratio(baseline: float, candidate: float) -> float | None:
    """`baseline / candidate`; None when the candidate is zero (the ratio is unbounded)."""
    if candidate == 0:
        return None
    return baseline / candidate


def format_ratio(value: float | None) -> str:
    if value is None:
        return "unbounded (candidate 0)"
    if value >= 100:
        return f"{value:,.0f}x"
    if value >= 10:
        return f"{value:.1f}x"
    return f"{value:.2f}x"


def format_bytes(count: float) -> str:
    """SI units, as transfer sizes are usually given: 1 kB = 1,000 bytes."""
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(count) >= size:
            return f"{count / size:.1f} {unit}"
    return f"{count:.0f} B"


def format_seconds(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds * 1e6:.0f} µs"


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A GitHub-flavoured Markdown table; numbers right-aligned (every column but the first)."""
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join([":---", *["---:"] * (len(headers) - 1)]) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _version(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "not installed"


def machine(packages: Sequence[str] = ("kubernetes", "kubernetes_asyncio", "aiohttp", "urllib3")) -> dict[str, Any]:
    """Where the figures were measured: CPU, cores, memory, OS, Python and the client libraries."""
    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "memoryBytes": psutil.virtual_memory().total,
        "os": f"{platform.system()} {platform.release()}",
        "python": sys.version.split()[0],
        "packages": {name: _version(name) for name in packages},
    }


def describe_machine(info: dict[str, Any]) -> str:
    packages = ", ".join(f"{name} {version}" for name, version in info["packages"].items())
    described = (
        f"{info['cpu']}, {info['cores']} cores, {format_bytes(info['memoryBytes'])} RAM; {info['os']}; "
        f"Python {info['python']}; {packages}"
    )
    load = info.get("loadAverage")  # recorded by harness.driver; absent from older results
    if load:
        described += f"; load average (1 min) {load['start'][0]:.2f} at the start, {load['end'][0]:.2f} at the end"
    return described

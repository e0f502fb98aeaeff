"""The drain check benchmark (issue 8 item 1): cost of one check at 1,000 / 10,000 / 50,000 pods, against a
baseline measured in the same run.

For each namespace size, smallest first, the namespace grows to that size (`drain_scenario`), then each case of
`drain_cases` runs in a fresh worker process, one at a time, against the lab in its own process. The figures
per case are: API requests and bytes (both directions, at the lab's meter), client CPU seconds (median of the
timed runs), peak heap (tracemalloc) and peak RSS growth of the client, and, as context, the lab's CPU and the
wall time. Ratios are `baseline / case`. Every case must select the same pods as the baseline, or the run fails.

    python tests/benchmarks/drain_check.py --pods 1000,10000,50000 --markdown docs/performance-drain.md

`run(config)` returns the results as JSON-able data; `render_markdown(results)` the tables.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kubernetes

from .drain_cases import CASES
from .drain_scenario import DrainNamespace, build
from .harness import driver
from .harness.lab_process import LabProcess
from .harness.measure import Measurement
from .harness.report import (
    describe_machine,
    format_bytes,
    format_ratio,
    format_seconds,
    machine,
    markdown_table,
    ratio,
)
from .harness.workers import run_worker

BASELINE = "baseline"
DEFAULT_CASES = tuple(CASES)
WORKER = "benchmarks.drain_cases"


@dataclass(frozen=True)
class Config:
    sizes: tuple[int, ...] = (1000, 10000, 50000)
    cases: tuple[str, ...] = DEFAULT_CASES
    job_pods: int = 16
    nodes: int = 4
    repeat: int = 5
    budget_seconds: float = 30.0
    page_size: int = 500
    workdir: Path | None = None
    progress: Callable[[str], None] = field(default=lambda line: None)

    def __post_init__(self) -> None:
        driver.require_known("cases", self.cases, CASES)
        if BASELINE not in self.cases:
            raise ValueError("the baseline case must run: every figure is reported against it")
        if not self.sizes or any(size <= self.job_pods for size in self.sizes):
            raise ValueError(f"each size must be larger than the job's {self.job_pods} pods")


def _measure_case(lab: LabProcess, config: Config, case: str, bench: DrainNamespace, warmup: DrainNamespace) -> Any:
    payload = {
        "case": case,
        "kubeconfig": str(lab.kubeconfig),
        "labUrl": lab.url,
        "token": lab.token,
        "labPid": lab.pid,
        "bench": bench.as_json(),
        "warmup": warmup.as_json(),
        "repeat": config.repeat,
        "budgetSeconds": config.budget_seconds,
        "pageSize": config.page_size,
    }
    return run_worker(WORKER, payload)


def run(config: Config) -> dict[str, Any]:
    """Seed, measure every case at every size; the results (see `render_markdown`)."""
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="dispatch-bench-") as scratch:
        workdir = config.workdir or Path(scratch)
        with LabProcess.start(workdir) as lab:
            api = kubernetes.config.new_client_from_config(config_file=str(lab.kubeconfig))
            try:
                warmup = build(api, lab.endpoint, "bench-warmup", job_pods=config.job_pods, nodes=config.nodes)
                warmup.grow(lab.endpoint, 2 * config.job_pods)
                bench = build(api, lab.endpoint, "bench", job_pods=config.job_pods, nodes=config.nodes)
            finally:
                api.close()
            sizes = []
            for size in sorted(config.sizes):
                seeded = time.perf_counter()
                bench.grow(lab.endpoint, size)
                config.progress(f"{size} pods seeded in {time.perf_counter() - seeded:.1f} s")
                cases = {}
                for case in config.cases:
                    result = _measure_case(lab, config, case, bench, warmup)
                    cases[case] = result
                    m = Measurement.from_json(result["measurement"])
                    config.progress(
                        f"  {case}: {m.traffic.requests} requests, {format_bytes(m.traffic.bytes)}, "
                        f"CPU {format_seconds(m.cpu_seconds)}, heap {format_bytes(m.peak_heap_bytes)}"
                    )
                expected = cases[BASELINE]["selected"]
                wrong = {c: r["selected"] for c, r in cases.items() if r["selected"] != expected}
                if wrong or len(expected) != config.job_pods:
                    raise RuntimeError(f"at {size} pods the cases disagree with the baseline {expected}: {wrong}")
                sizes.append({"pods": size, "cases": cases, "labRssBytes": lab.rss_bytes()})
    return {
        "benchmark": "drain-check",
        "machine": machine(),
        "config": {
            "sizes": list(config.sizes),
            "cases": list(config.cases),
            "jobPods": config.job_pods,
            "nodes": config.nodes,
            "repeat": config.repeat,
            "budgetSeconds": config.budget_seconds,
            "pageSize": config.page_size,
        },
        "podBytes": bench.pod_bytes,
        "sizes": sizes,
        "elapsedSeconds": time.perf_counter() - started,
    }


# --- the results page -----------------------------------------------------------------------------------------

#: (key, title, the figure read off a measurement, how it prints)
Figure = tuple[str, str, Callable[[Measurement], float], Callable[[Any], str]]
FIGURES: tuple[Figure, ...] = (
    ("requests", "API requests", lambda m: m.traffic.requests, str),
    ("bytes", "bytes transferred", lambda m: m.traffic.bytes, format_bytes),
    ("cpu", "client CPU", lambda m: m.cpu_seconds, format_seconds),
    ("heap", "peak heap", lambda m: m.peak_heap_bytes, format_bytes),
)


def _cell(value: float, baseline: float, fmt: Callable[[Any], str], is_baseline: bool) -> str:
    return fmt(value) if is_baseline else f"{fmt(value)} ({format_ratio(ratio(baseline, value))})"


SUMMARY_CASES = ("pinned", "check")


def render_summary(results: dict[str, Any], case: str) -> str:
    """One row per figure, one column per namespace size: `baseline -> case (ratio)`."""
    sizes = results["sizes"]
    headers = ["figure", *(f"{size['pods']:,} pods" for size in sizes)]
    rows = []
    for _, title, get, fmt in FIGURES:
        cells = [title]
        for size in sizes:
            base = Measurement.from_json(size["cases"][BASELINE]["measurement"])
            other = Measurement.from_json(size["cases"][case]["measurement"])
            cells.append(f"{fmt(get(base))} → {fmt(get(other))} ({format_ratio(ratio(get(base), get(other)))})")
        rows.append(cells)
    return markdown_table(headers, rows)


def render_markdown(results: dict[str, Any], command: str) -> str:
    """One table per namespace size: each case's figures, with `baseline / case` in brackets."""
    config = results["config"]
    lines = [
        f"Machine: {describe_machine(results['machine'])}.",
        "",
        f"Command: `{command}` ({results['elapsedSeconds'] / 60:.1f} min including seeding).",
        "",
        f"The job has {config['jobPods']} pods on {config['nodes']} nodes; one pod is {results['podBytes']:,} bytes "
        f"as served. Page size {config['pageSize']}. CPU is the median of up to {config['repeat']} timed runs "
        f"within {config['budgetSeconds']:.0f} s per case (runs in brackets).",
    ]
    for case in SUMMARY_CASES:
        if all(case in size["cases"] for size in results["sizes"]):
            lines += ["", f"#### `{case}` against `{BASELINE}`, by namespace size", "", render_summary(results, case)]
    for size in results["sizes"]:
        cases = {name: Measurement.from_json(r["measurement"]) for name, r in size["cases"].items()}
        base = cases[BASELINE]
        headers = ["case", *(title for _, title, _, _ in FIGURES), "RSS growth", "lab CPU", "wall"]
        rows = []
        for name, m in cases.items():
            cells = [f"`{name}` ({len(m.runs)})"]
            cells += [_cell(get(m), get(base), fmt, name == BASELINE) for _, _, get, fmt in FIGURES]
            server = m.server_cpu_seconds
            cells += [
                format_bytes(m.rss_growth_bytes),
                format_seconds(server) if server is not None else "n/a",
                format_seconds(m.wall_seconds),
            ]
            rows.append(cells)
        lines += ["", f"#### {size['pods']:,} pods in the namespace", "", markdown_table(headers, rows)]
    return "\n".join(lines) + "\n"


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = driver.parser("drain_check.py", "Cost of one drain check (issue 8 item 1).")
    parser.add_argument("--pods", default="1000,10000,50000", help="namespace sizes, comma-separated")
    parser.add_argument("--cases", default=",".join(DEFAULT_CASES), help=f"of: {', '.join(CASES)}")
    parser.add_argument("--job-pods", type=int, default=16)
    parser.add_argument("--nodes", type=int, default=4, help="Nodes the job's pods run on")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per case, at most")
    parser.add_argument("--budget", type=float, default=30.0, help="seconds of timed runs per case, at most")
    parser.add_argument("--page-size", type=int, default=500)
    return parser.parse_args(argv)


def configure(options: argparse.Namespace, progress: driver.Progress) -> Config:
    return Config(
        sizes=driver.counts(options.pods),
        cases=driver.names(options.cases),
        job_pods=options.job_pods,
        nodes=options.nodes,
        repeat=options.repeat,
        budget_seconds=options.budget,
        page_size=options.page_size,
        progress=progress,
    )


def main(argv: Sequence[str]) -> int:
    return driver.main("drain_check.py", argv, parse=parse_args, configure=configure, run=run, render=render_markdown)

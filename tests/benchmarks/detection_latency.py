"""Detection latency: from the last blocking pod's removal to the waiter's event, watch against poll (issue 8, 2).

    python tests/benchmarks/detection_latency.py [--repeat 20] [--poll-interval 2] [--speed 100]
        [--json out.json] [--markdown out.md] [--from-json out.json]

The lab runs in its own process (`harness.lab_process`) with the clock probe (`harness.lab_clock`), each case
in a fresh worker process (`benchmarks.latency_cases`, which says what one sample is). Reported per case: the
median, p95 and worst of the wall time and of the lab time from the removal to the `drained` event, the
DELETE's own round trip (the removal is timed from its sending, so the figures are upper bounds by that much),
and the checks each waiter made; the baseline (`poll`) over the candidate (`watch`) as a ratio.

The sensor's success comes after the event: see `slot_seconds.py`, whose deferrable run times the removal to
the task instance's end under `dag.test()`.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: make `benchmarks` importable

from benchmarks.harness import driver
from benchmarks.harness.environment import scoped_env
from benchmarks.harness.lab_clock import CLOCK_PROBE, RemoteClock, clock_file
from benchmarks.harness.lab_process import LabProcess
from benchmarks.harness.report import (
    describe_machine,
    format_ratio,
    format_seconds,
    machine,
    markdown_table,
    ratio,
)
from benchmarks.harness.workers import run_worker

WORKER: Final = "benchmarks.latency_cases"
#: the cases (`latency_cases` runs them; named here so that the driver never imports Airflow)
CASES: Final = {
    "watch": "PodsDrainedTrigger: shared watch of pods and nodes, consistent re-check on a change",
    "poll": "baseline: the same drain check every poll_interval (cncf KubernetesPodTrigger's way, default 2 s)",
}
BASELINE: Final = "poll"
CANDIDATE: Final = "watch"


@dataclass
class Config:
    repeat: int = 20
    poll_interval: float = 2.0
    speed: float = 100.0
    cases: Sequence[str] = (CANDIDATE, BASELINE)
    seed: int = 8
    workdir: Path | None = None
    progress: Callable[[str], None] = field(default=lambda line: None)

    def __post_init__(self) -> None:
        driver.require_known("cases", self.cases, CASES)
        if BASELINE not in self.cases:
            raise ValueError("the baseline case must run: every figure is reported against it")
        if self.repeat < 1 or self.poll_interval <= 0 or self.speed <= 0:
            raise ValueError("repeat must be >= 1, poll_interval and speed > 0")


def percentile(values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile (the smallest value with at least `fraction` of the samples at or below it)."""
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * fraction // 1))
    return ordered[int(rank) - 1]


def summary(samples: Sequence[dict[str, Any]], key: str) -> dict[str, float]:
    values = [float(s[key]) for s in samples]
    return {
        "median": statistics.median(values),
        "p95": percentile(values, 0.95),
        "max": max(values),
        "min": min(values),
    }


def run(config: Config) -> dict[str, Any]:
    """Every case once, in a fresh worker against one lab; the results (see `render_markdown`)."""
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="dispatch-latency-") as scratch:
        workdir = config.workdir or Path(scratch)
        workdir.mkdir(parents=True, exist_ok=True)
        clock_path = workdir / "clock.json"
        with clock_file(clock_path), LabProcess.start(workdir, speed=config.speed, controllers=[CLOCK_PROBE]) as lab:
            clock = RemoteClock.from_file(clock_path)
            cases: dict[str, Any] = {}
            with scoped_env(AIRFLOW_HOME=str(workdir / "airflow-home")):
                for case in config.cases:
                    payload = {
                        "case": case,
                        "kubeconfig": str(lab.kubeconfig),
                        "clockUrl": clock.url,
                        "repeat": config.repeat,
                        "pollInterval": config.poll_interval,
                        "seed": config.seed,
                    }
                    result = run_worker(WORKER, payload, timeout=600.0 + 5 * config.repeat * config.poll_interval)
                    samples = result["samples"]
                    wrong = [s["status"] for s in samples if s["status"] != "drained"]
                    if len(samples) != config.repeat or wrong:
                        raise RuntimeError(f"{case}: {len(samples)} samples, statuses other than drained: {wrong}")
                    cases[case] = {
                        "samples": samples,
                        "wall": summary(samples, "wallSeconds"),
                        "lab": summary(samples, "labSeconds"),
                        "deleteRoundTrip": summary(samples, "deleteRoundTripSeconds"),
                        "checks": summary(samples, "checks"),
                    }
                    wall = cases[case]["wall"]
                    config.progress(
                        f"{case}: median {format_seconds(wall['median'])}, p95 {format_seconds(wall['p95'])} wall"
                    )
    return {
        "benchmark": "detection-latency",
        "machine": machine(),
        "config": {
            "repeat": config.repeat,
            "pollInterval": config.poll_interval,
            "speed": config.speed,
            "seed": config.seed,
        },
        "cases": cases,
        "seconds": time.perf_counter() - started,
    }


def _figure(stats: dict[str, float], which: str) -> str:
    return format_seconds(stats[which])


def render_markdown(results: dict[str, Any], command: str) -> str:
    command = results.get("command", command)  # the command that measured, when re-rendered from JSON
    config, cases = results["config"], results["cases"]
    base = cases[BASELINE]
    lines = [
        f"Machine: {describe_machine(results['machine'])}.",
        "",
        f"Command: `{command}` ({results['seconds']:.0f} s). Lab clock at {config['speed']:g}x; "
        f"{config['repeat']} removals per case at phases drawn uniformly in [0, {config['pollInterval']:g} s) after "
        "the waiter's first check (the same draws for both cases), after one warm-up removal.",
        "",
    ]
    headers = ["case", "wall median", "wall p95", "wall max", "lab median", "lab p95", "checks (median)"]
    rows = []
    for name in [c for c in (CANDIDATE, BASELINE) if c in cases] + [c for c in cases if c not in (CANDIDATE, BASELINE)]:
        case = cases[name]
        wall, lab = case["wall"], case["lab"]
        cells = [
            f"`{name}`",
            _figure(wall, "median"),
            _figure(wall, "p95"),
            _figure(wall, "max"),
            _figure(lab, "median"),
            _figure(lab, "p95"),
            f"{case['checks']['median']:g}",
        ]
        if name != BASELINE:
            for index, which in ((1, "median"), (2, "p95"), (4, "median"), (5, "p95")):
                source = base["wall"] if index < 4 else base["lab"]
                stats = wall if index < 4 else lab
                cells[index] += f" ({format_ratio(ratio(source[which], stats[which]))})"
        rows.append(cells)
    lines.append(markdown_table(headers, rows))
    trip = base["deleteRoundTrip"]
    lines += [
        "",
        f"The DELETE's round trip (included above: each sample starts when the DELETE is sent) had a median of "
        f"{format_seconds(trip['median'])} and a worst of {format_seconds(trip['max'])} in the baseline's run.",
    ]
    return "\n".join(lines) + "\n"


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = driver.parser("detection_latency.py", __doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20, help="removals per case (after one warm-up)")
    parser.add_argument("--poll-interval", type=float, default=2.0, help="the baseline's interval, wall seconds")
    parser.add_argument("--speed", type=float, default=100.0, help="lab seconds per wall second")
    parser.add_argument("--cases", default=",".join((CANDIDATE, BASELINE)))
    parser.add_argument("--seed", type=int, default=8)
    return parser.parse_args(argv)


def configure(options: argparse.Namespace, progress: driver.Progress) -> Config:
    return Config(
        repeat=options.repeat,
        poll_interval=options.poll_interval,
        speed=options.speed,
        cases=driver.names(options.cases),
        seed=options.seed,
        progress=progress,
    )


def main(argv: Sequence[str]) -> int:
    return driver.main(
        "detection_latency.py", argv, parse=parse_args, configure=configure, run=run, render=render_markdown
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Worker slot-seconds of PodsDrainedSensor during a one-hour wait (lab clock): poke, reschedule, deferrable (8, 4).

    python tests/benchmarks/slot_seconds.py [--wait 3600] [--speed 100] [--poke-interval 60] [--recheck 300]
        [--modes poke,reschedule,deferrable] [--repeat 1] [--json out.json] [--markdown out.md] [--from-json out.json]

`--wait`, `--poke-interval` and `--recheck` are lab seconds; Airflow's intervals are wall seconds, so the DAG
gets them divided by `--speed` (at 100x: a lab hour is 36 s of wall time, a 60 s poke interval 0.6 s, the
trigger's 300 s safety-net re-check 3 s). The lab runs in its own process with the clock probe; the modes run
in one worker process with an Airflow home and metadata DB of its own (`benchmarks.slot_cases`, which says
how the slots are read from Airflow's records). Baseline: poke mode.
"""

from __future__ import annotations

import argparse
import json
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

WORKER: Final = "benchmarks.slot_cases"
BASELINE: Final = "poke"
#: the sensor's modes (`slot_cases` runs them; named here so that the driver never imports Airflow)
MODES: Final = ("poke", "reschedule", "deferrable")


@dataclass
class Config:
    wait: float = 3600.0
    speed: float = 100.0
    poke_interval: float = 60.0
    recheck_interval: float = 300.0
    modes: Sequence[str] = MODES
    repeat: int = 1
    seed: int = 8
    workdir: Path | None = None
    progress: Callable[[str], None] = field(default=lambda line: None)

    def __post_init__(self) -> None:
        driver.require_known("modes", self.modes, MODES)
        if BASELINE not in self.modes:
            raise ValueError("the baseline (poke) must run: every figure is reported against it")
        if min(self.wait, self.speed, self.poke_interval, self.recheck_interval) <= 0 or self.repeat < 1:
            raise ValueError("wait, speed and the intervals must be > 0, repeat >= 1")


def airflow_environment(home: Path, dags: Path, kubeconfig: Path) -> dict[str, str]:
    """An Airflow of its own for one worker: home, sqlite DB, the bundle folder, the lab as kubernetes_default."""
    bundle = {
        "name": "slot-bench",
        "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle",
        "kwargs": {"path": str(dags), "refresh_interval": 0},
    }
    return {
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
        "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(home / "logs"),
        "AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST": json.dumps([bundle]),
        "AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE": "False",
        "AIRFLOW_CONN_KUBERNETES_DEFAULT": json.dumps(
            {"conn_type": "kubernetes", "extra": {"kube_config_path": str(kubeconfig)}}
        ),
    }


def derive(run: dict[str, Any], config: Config) -> dict[str, Any]:
    """The figures of one `dag.test()` run, from what Airflow recorded of it."""
    records, actor, slots = run["records"], run["actor"], run["slots"]
    runs = [slot["end"] - slot["start"] for slot in slots]
    end = records["endDate"]
    return {
        "runs": len(runs),
        "slotSeconds": run["slotSeconds"],
        "slotLabSeconds": run["slotSeconds"] * config.speed,
        "runMedianSeconds": statistics.median(runs),
        "taskSeconds": slots[-1]["end"] - slots[0]["start"],
        "waitWallSeconds": actor["removedWall"] - actor["firstCheckWall"],
        "waitLabSeconds": actor["removedLab"] - actor["firstCheckLab"],
        "removalToSuccessSeconds": end - actor["removedWall"],
        "reschedules": len(records["reschedules"]),
    }


def aggregate(per_run: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The median of each figure over the runs; the removal-to-success latency also as p95 and worst."""
    figures: dict[str, Any] = {key: statistics.median(f[key] for f in per_run) for key in per_run[0]}
    latencies = sorted(f["removalToSuccessSeconds"] for f in per_run)
    figures["removalToSuccessP95Seconds"] = latencies[max(0, -(-len(latencies) * 95 // 100) - 1)]
    figures["removalToSuccessMaxSeconds"] = latencies[-1]
    figures["repeat"] = len(per_run)
    return figures


def run(config: Config) -> dict[str, Any]:
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="dispatch-slots-") as scratch:
        workdir = config.workdir or Path(scratch)
        workdir.mkdir(parents=True, exist_ok=True)
        clock_path = workdir / "clock.json"
        modes: dict[str, Any] = {}
        with clock_file(clock_path), LabProcess.start(workdir, speed=config.speed, controllers=[CLOCK_PROBE]) as lab:
            clock = RemoteClock.from_file(clock_path)
            home, dags = workdir / "airflow-home", workdir / "dags"
            dags.mkdir(parents=True, exist_ok=True)
            payload = {
                "modes": list(config.modes),
                "kubeconfig": str(lab.kubeconfig),
                "clockUrl": clock.url,
                "speed": config.speed,
                "waitLabSeconds": config.wait,
                "pokeIntervalLab": config.poke_interval,
                "recheckIntervalLab": config.recheck_interval,
                "dagsFolder": str(dags),
                "repeat": config.repeat,
                "seed": config.seed,
            }
            bound = 900.0 + 2 * len(config.modes) * config.repeat * (config.wait + config.poke_interval) / config.speed
            with scoped_env(**airflow_environment(home, dags, lab.kubeconfig)):
                result = run_worker(WORKER, payload, timeout=bound)
            timings = result["timings"]
            for mode in config.modes:
                runs = result["modes"][mode]["runs"]
                failed = [r["records"]["state"] for r in runs if r["records"]["state"] != "success"]
                if failed or len(runs) != config.repeat:
                    raise RuntimeError(f"{mode}: {len(runs)} runs, sensor states other than success: {failed}")
                figures = aggregate([derive(r, config) for r in runs])
                modes[mode] = {"figures": figures, "runs": runs}
                config.progress(
                    f"{mode}: {figures['runs']} worker runs, {format_seconds(figures['slotSeconds'])} of slot time, "
                    f"wait {format_seconds(figures['waitWallSeconds'])} wall"
                )
    return {
        "benchmark": "slot-seconds",
        "machine": machine(("apache-airflow", "kubernetes", "kubernetes_asyncio")),
        "config": {
            "wait": config.wait,
            "speed": config.speed,
            "pokeInterval": config.poke_interval,
            "recheckInterval": config.recheck_interval,
            "repeat": config.repeat,
        },
        "modes": modes,
        "workerTimings": timings,
        "seconds": time.perf_counter() - started,
    }


def projected_hour(mode: str, figures: dict[str, Any], config: dict[str, Any]) -> float:
    """Slot-seconds of the same wait in real time (clock at 1x, same lab intervals), from the measured runs.

    Poke holds the slot for the whole wait, which scales with the clock: the measured slot time at lab scale.
    A reschedule or deferrable run is a start, one check and an exit, whose wall cost does not scale with the
    clock: the measured median run times the runs a real hour takes (reschedule: one per poke interval plus the
    last; deferrable: the measured number, the poke before deferring and the resume)."""
    if mode == "poke":
        return float(figures["slotLabSeconds"])
    if mode == "reschedule":
        runs = int(config["wait"] // config["pokeInterval"]) + 1
        return float(figures["runMedianSeconds"]) * runs
    return float(figures["slotSeconds"])


def render_markdown(results: dict[str, Any], command: str) -> str:
    command = results.get("command", command)  # the command that measured, when re-rendered from JSON
    config, modes = results["config"], results["modes"]
    speed = config["speed"]
    base = modes[BASELINE]["figures"]
    lines = [
        f"Machine: {describe_machine(results['machine'])}.",
        "",
        f"Command: `{command}` ({results['seconds']:.0f} s). Lab clock at {speed:g}x: the wait is "
        f"{config['wait']:g} lab s ({config['wait'] / speed:g} s wall), poke_interval {config['pokeInterval']:g} "
        f"lab s ({config['pokeInterval'] / speed:g} s wall), the trigger's recheck_interval "
        f"{config['recheckInterval']:g} lab s ({config['recheckInterval'] / speed:g} s wall). "
        f"{config['repeat']} dag.test() run(s) per mode, each against a fresh wait; medians over the runs.",
        "",
    ]
    headers = [
        "mode",
        "worker runs",
        "slot-seconds (wall)",
        "slot-seconds x speed (lab)",
        "median run",
        "projected at 1x",
        "first running → success (wall)",
        "removal → success (wall, median / p95)",
    ]
    rows = []
    for name in [m for m in MODES if m in modes]:
        f = modes[name]["figures"]
        projection = projected_hour(name, f, config)
        cells = [
            f"`{name}`",
            f"{f['runs']:g}",
            format_seconds(f["slotSeconds"]),
            format_seconds(f["slotLabSeconds"]),
            format_seconds(f["runMedianSeconds"]),
            format_seconds(projection),
            format_seconds(f["taskSeconds"]),
            f"{format_seconds(f['removalToSuccessSeconds'])} / {format_seconds(f['removalToSuccessP95Seconds'])}",
        ]
        if name != BASELINE:
            cells[2] += f" ({format_ratio(ratio(base['slotSeconds'], f['slotSeconds']))})"
            cells[3] += f" ({format_ratio(ratio(base['slotLabSeconds'], f['slotLabSeconds']))})"
            cells[5] += f" ({format_ratio(ratio(projected_hour(BASELINE, base, config), projection))})"
        rows.append(cells)
    lines.append(markdown_table(headers, rows))
    waits = ", ".join(
        f"{name} {modes[name]['figures']['waitLabSeconds']:.0f} lab s / "
        f"{format_seconds(modes[name]['figures']['waitWallSeconds'])} wall"
        for name in modes
    )
    lines += ["", f"The wait as the lab clock measured it, first check to removal: {waits}."]
    return "\n".join(lines) + "\n"


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = driver.parser("slot_seconds.py", __doc__.splitlines()[0])
    parser.add_argument("--wait", type=float, default=3600.0, help="the wait, lab seconds")
    parser.add_argument("--speed", type=float, default=100.0, help="lab seconds per wall second")
    parser.add_argument("--poke-interval", type=float, default=60.0, help="lab seconds (Airflow's default 60)")
    parser.add_argument("--recheck", type=float, default=300.0, help="the trigger's re-check, lab seconds")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--repeat", type=int, default=1, help="dag.test() runs per mode (medians reported)")
    return parser.parse_args(argv)


def configure(options: argparse.Namespace, progress: driver.Progress) -> Config:
    return Config(
        wait=options.wait,
        speed=options.speed,
        poke_interval=options.poke_interval,
        recheck_interval=options.recheck,
        modes=driver.names(options.modes),
        repeat=options.repeat,
        progress=progress,
    )


def main(argv: Sequence[str]) -> int:
    return driver.main("slot_seconds.py", argv, parse=parse_args, configure=configure, run=run, render=render_markdown)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

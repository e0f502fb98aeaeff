"""Triggerer capacity (issue 8 item 3): 1, 100 and 1,000 waiting PodsDrainedTriggers in one event loop.

    python tests/benchmarks/triggerer_capacity.py --triggers 1,100,1000 --json out.json --markdown out.md

The lab runs in its own process with no controllers: every TrainJob is held and keeps its one pod forever, so no
trigger ever finishes and what is measured is what waiting costs. Each case runs in a fresh worker process
(`capacity_cases`): the shared trigger (one connection, one watch per namespace) with the triggers in one
namespace and spread over `--namespaces`, and two baselines in the same run, the trigger with a connection per
trigger (`unshared`) and a cncf-style poll per trigger (`poll`). See docs/performance.md (section 3).

`run(config)` returns the results as JSON-able data; `render_markdown(results, command)` the tables.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: make `benchmarks` importable

import kubernetes

from airflow_provider_dispatch.dispatch import vocabulary as v
from airflow_provider_dispatch_lab.scenario import manifests
from benchmarks.capacity_cases import CASES
from benchmarks.harness import driver
from benchmarks.harness.lab_process import LabEndpoint, LabProcess
from benchmarks.harness.loop_lag import LagSummary, PhaseLag
from benchmarks.harness.report import (
    describe_machine,
    format_bytes,
    format_ratio,
    format_seconds,
    machine,
    markdown_table,
    ratio,
)
from benchmarks.harness.series import byte_count, request_count
from benchmarks.harness.workers import run_worker
from benchmarks.pods import pod_template

WORKER = "benchmarks.capacity_cases"
ONE_NAMESPACE = "cap-one"
SPREAD_PREFIX = "cap-spread"
WARMUP_NAMESPACE = "cap-warmup"
NODES = 4


@dataclass(frozen=True)
class Config:
    triggers: tuple[int, ...] = (1, 100, 1000)
    baseline_triggers: tuple[int, ...] = (1, 100)
    namespaces: int = 10
    window_seconds: float = 60.0
    recheck_interval: float = 300.0
    poll_interval: float = 2.0
    #: also run `shared` at the largest count with this recheck_interval, to measure the safety net's load (0: no)
    recheck_probe: float = 30.0
    startup_timeout: float = 600.0
    baselines: tuple[str, ...] = ("unshared", "poll")
    workdir: Path | None = None
    progress: Callable[[str], None] = field(default=lambda line: None)

    def __post_init__(self) -> None:
        if not self.triggers or min(self.triggers) < 1:
            raise ValueError("--triggers: counts of at least 1")
        if any(b not in CASES or b == "shared" for b in self.baselines):
            raise ValueError(f"baselines are of: {', '.join(c for c in CASES if c != 'shared')}")
        if self.namespaces < 1 or self.window_seconds <= 0:
            raise ValueError("--namespaces must be at least 1 and --window positive")

    @property
    def population(self) -> int:
        """TrainJobs seeded per layout: enough for the largest case."""
        return max((*self.triggers, *self.baseline_triggers))


# --- the cluster ------------------------------------------------------------------------------------------------


def seed_namespace(api: kubernetes.client.ApiClient, lab: LabEndpoint, namespace: str, count: int) -> None:
    """`count` held dispatch TrainJobs `tj-<i>`, each with one running pod on one of the NODES nodes."""
    kubernetes.client.CoreV1Api(api).create_namespace({"metadata": {"name": namespace}})
    trainjob = manifests.trainjob("tj-{i}", job_id="tj-{i}", num_nodes=1, admission=1)
    lab.seed(v.TRAINJOB.path(namespace), trainjob, count)
    pod = pod_template("tj-{i}", job_id="tj-{i}", rank="0", name="tj-{i}-node-0-0-x7k2p", node="cap-node-{g}")
    lab.seed(v.POD.path(namespace), pod, count, group_size=max(1, -(-count // NODES)))


def targets(layout: str, count: int, namespaces: int) -> list[tuple[str, str]]:
    """The (namespace, TrainJob) pairs of a case: the first `count` of one namespace, or dealt round the spread."""
    if layout == "one":
        return [(ONE_NAMESPACE, f"tj-{i}") for i in range(count)]
    return [(f"{SPREAD_PREFIX}-{i % namespaces}", f"tj-{i // namespaces}") for i in range(count)]


def cases(config: Config) -> list[tuple[str, str, int, float]]:
    """(case, layout, triggers, recheck_interval), smallest first; the spread layout only where it spreads; last,
    the recheck probe (`shared` at the largest count with a short recheck_interval)."""
    planned: list[tuple[str, str, int, float]] = []
    recheck = config.recheck_interval
    for count in sorted(set(config.triggers) | set(config.baseline_triggers)):
        if count in config.triggers:
            planned.append(("shared", "one", count, recheck))
            if config.namespaces > 1 and count >= config.namespaces:
                planned.append(("shared", "spread", count, recheck))
        if count in config.baseline_triggers:
            planned += [(baseline, "one", count, recheck) for baseline in config.baselines]
    if config.recheck_probe > 0:
        planned.append(("shared", "one", max(config.triggers), config.recheck_probe))
    return planned


def run(config: Config) -> dict[str, Any]:
    started = time.perf_counter()
    population = config.population
    per_namespace = -(-population // config.namespaces)
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="dispatch-capacity-") as scratch:
        workdir = config.workdir or Path(scratch)
        with LabProcess.start(workdir) as lab:
            api = kubernetes.config.new_client_from_config(config_file=str(lab.kubeconfig))
            try:
                core = kubernetes.client.CoreV1Api(api)
                for k in range(NODES):
                    core.create_node(manifests.node(f"cap-node-{k}", gpus=8))
                seed_namespace(api, lab.endpoint, WARMUP_NAMESPACE, 1)
                seed_namespace(api, lab.endpoint, ONE_NAMESPACE, population)
                if config.namespaces > 1:
                    for k in range(config.namespaces):
                        seed_namespace(api, lab.endpoint, f"{SPREAD_PREFIX}-{k}", per_namespace)
            finally:
                api.close()
            config.progress(
                f"seeded {population} TrainJobs and pods per layout in {time.perf_counter() - started:.1f} s"
            )
            for case, layout, count, recheck in cases(config):
                lab_cpu = lab.cpu_seconds()
                payload = {
                    "case": case,
                    "kubeconfig": str(lab.kubeconfig),
                    "labUrl": lab.url,
                    "token": lab.token,
                    "targets": targets(layout, count, config.namespaces),
                    "warmup": [WARMUP_NAMESPACE, "tj-0"],
                    "windowSeconds": config.window_seconds,
                    "recheckInterval": recheck,
                    "pollInterval": config.poll_interval,
                    "startupTimeout": config.startup_timeout,
                }
                result = run_worker(WORKER, payload, timeout=config.startup_timeout + config.window_seconds + 300)
                result["layout"] = layout
                result["recheckInterval"] = recheck
                result["labCpuSeconds"] = lab.cpu_seconds() - lab_cpu
                if result["events"]:
                    raise RuntimeError(f"{case} x{count}: a trigger ended although every pod stays: {result['events']}")
                results.append(result)
                steady = result["steady"]
                config.progress(
                    f"  {case} {layout} x{count}: start-up {format_seconds(result['startup']['wallSeconds'])}, "
                    f"{requests(steady) / steady['wallSeconds']:.2f} req/s steady, "
                    f"{result['watches']['streams']} watches, lag p99 {format_seconds(steady['lag']['p99'])}"
                )
    return {
        "benchmark": "triggerer-capacity",
        "machine": machine(("kubernetes_asyncio", "aiohttp", "apache-airflow")),
        "config": {
            "triggers": list(config.triggers),
            "baselineTriggers": list(config.baseline_triggers),
            "namespaces": config.namespaces,
            "windowSeconds": config.window_seconds,
            "recheckInterval": config.recheck_interval,
            "pollInterval": config.poll_interval,
            "recheckProbe": config.recheck_probe,
            "baselines": list(config.baselines),
        },
        "cases": results,
        "elapsedSeconds": time.perf_counter() - started,
    }


# --- the results page -------------------------------------------------------------------------------------------


def requests(phase: dict[str, Any], verbs: Sequence[str] | None = None) -> int:
    return request_count(phase["traffic"], verbs)


def traffic_bytes(phase: dict[str, Any]) -> int:
    return byte_count(phase["traffic"])


def rate(phase: dict[str, Any], verbs: Sequence[str] | None = None) -> float:
    return requests(phase, verbs) / float(phase["wallSeconds"])


def is_probe(result: dict[str, Any], config: dict[str, Any]) -> bool:
    return bool(result["case"] == "shared" and result["recheckInterval"] != config["recheckInterval"])


def label(result: dict[str, Any], config: dict[str, Any]) -> str:
    where = f"{result['namespaces']} ns"
    if is_probe(result, config):
        where += f", recheck {result['recheckInterval']:.0f} s"
    return f"`{result['case']}` {result['triggers']:,} ({where})"


def _lag(summary: dict[str, Any]) -> str:
    lag = LagSummary.from_json(summary)
    return f"{format_seconds(lag.p50)} / {format_seconds(lag.p99)} / {format_seconds(lag.max)}"


def _lag_outside_collections(summary: dict[str, Any]) -> list[str]:
    """Two cells: the max of the samples no full collection overlapped; the phase's full collections (longest)."""
    lag = PhaseLag.from_json(summary)
    collections = (
        f"{lag.full_collections} ({format_seconds(lag.longest_full_collection)})" if lag.full_collections else "0"
    )
    return [format_seconds(lag.outside_full_collections.max), collections]


def collection_rows(results: dict[str, Any]) -> list[list[str]]:
    """One full collection timed in each case's worker: before its triggers started, and with them waiting."""
    rows = []
    for r in results["cases"]:
        timed = r.get("fullCollection")
        if not timed:
            continue
        before, waiting = timed["beforeTriggers"], timed["triggersWaiting"]
        rows.append(
            [
                label(r, results["config"]),
                f"{before['objects']:,}",
                f"{waiting['objects']:,}",
                f"{(waiting['objects'] - before['objects']) / r['triggers']:,.0f}",
                format_seconds(before["seconds"]),
                format_seconds(waiting["seconds"]),
                format_ratio(ratio(waiting["seconds"], before["seconds"])),
            ]
        )
    return rows


def steady_rows(results: dict[str, Any]) -> list[list[str]]:
    rows = []
    for r in results["cases"]:
        steady = r["steady"]
        rows.append(
            [
                label(r, results["config"]),
                f"{rate(steady):.2f}",
                f"{rate(steady, ('get',)):.2f} / {rate(steady, ('list',)):.2f}",
                f"{steady['checks'] / steady['wallSeconds']:.2f}",
                str(r["watches"]["streams"]),
                format_bytes(traffic_bytes(steady) / steady["wallSeconds"]) + "/s",
                _lag(steady["lag"]),
                *_lag_outside_collections(steady["lag"]),
                f"{100 * steady['cpuSeconds'] / steady['wallSeconds']:.1f} %",
                format_bytes(r["rssSteadyBytes"]),
                format_bytes(r["rssSteadyBytes"] - r["rssBeforeBytes"]),
            ]
        )
    return rows


def startup_rows(results: dict[str, Any]) -> list[list[str]]:
    rows = []
    for r in results["cases"]:
        startup = r["startup"]
        rows.append(
            [
                label(r, results["config"]),
                format_seconds(startup["wallSeconds"]),
                f"{requests(startup):,}",
                f"{requests(startup, ('get',)):,} / {requests(startup, ('list',)):,}",
                format_bytes(traffic_bytes(startup)),
                format_seconds(startup["cpuSeconds"]),
                _lag(startup["lag"]),
                *_lag_outside_collections(startup["lag"]),
                format_seconds(r["labCpuSeconds"]),
            ]
        )
    return rows


def find(results: dict[str, Any], case: str, count: int, layout: str = "one") -> dict[str, Any] | None:
    r: dict[str, Any]
    for r in results["cases"]:
        probe = is_probe(r, results["config"])
        if r["case"] == case and r["triggers"] == count and r["layout"] == layout and not probe:
            return r
    return None


def ratio_rows(results: dict[str, Any]) -> list[list[str]]:
    """`baseline / shared` at each trigger count both ran, for the figures that should differ."""
    figures: list[tuple[str, Callable[[dict[str, Any]], float], Callable[[float], str]]] = [
        ("steady requests/s", lambda r: rate(r["steady"]), lambda x: f"{x:.2f}"),
        ("open watches", lambda r: float(r["watches"]["streams"]), lambda x: f"{x:.0f}"),
        ("start-up requests", lambda r: float(requests(r["startup"])), lambda x: f"{x:.0f}"),
        ("start-up wall time", lambda r: r["startup"]["wallSeconds"], format_seconds),
        ("steady CPU", lambda r: r["steady"]["cpuSeconds"], format_seconds),
        ("RSS growth", lambda r: float(r["rssSteadyBytes"] - r["rssBeforeBytes"]), format_bytes),
        ("steady lag p99", lambda r: r["steady"]["lag"]["p99"], format_seconds),
    ]
    rows = []
    for baseline in results["config"]["baselines"]:
        for count in results["config"]["baselineTriggers"]:
            base, shared = find(results, baseline, count), find(results, "shared", count)
            if base is None or shared is None:
                continue
            cells = [f"`{baseline}` / `shared`, {count:,}"]
            for _, get, fmt in figures:
                b, s = get(base), get(shared)
                shown = "both 0" if b == s == 0 else format_ratio(ratio(b, s))
                cells.append(f"{fmt(b)} → {fmt(s)} ({shown})")
            rows.append(cells)
    return [["comparison", *(name for name, _, _ in figures)], *rows]


def render_markdown(results: dict[str, Any], command: str) -> str:
    config = results["config"]
    lines = [
        f"Machine: {describe_machine(results['machine'])}.",
        "",
        f"Command: `{command}` ({results['elapsedSeconds'] / 60:.1f} min including seeding).",
        "",
        f"Steady window {config['windowSeconds']:.0f} s; recheck_interval {config['recheckInterval']:.0f} s "
        f"(jittered by 10%); poll interval of the `poll` baseline {config['pollInterval']:.0f} s; the spread layout "
        f"deals the triggers over {config['namespaces']} namespaces. Lag is the oversleep of "
        '`asyncio.sleep(0.01)`, p50 / p99 / max; "max outside full GCs" leaves out the samples a full (generation-2) '
        "garbage collection overlapped, which are the interpreter traversing the whole heap.",
        "",
        f"#### Steady state ({config['windowSeconds']:.0f} s, after every trigger's first check)",
        "",
        markdown_table(
            [
                "case",
                "requests/s",
                "get / list per s",
                "checks/s",
                "open watches",
                "bytes/s",
                "loop lag p50 / p99 / max",
                "max outside full GCs",
                "full GCs (longest)",
                "CPU",
                "RSS",
                "RSS growth",
            ],
            steady_rows(results),
        ),
        "",
        "#### Start-up burst (until every trigger has answered its first check)",
        "",
        markdown_table(
            [
                "case",
                "wall",
                "requests",
                "get / list",
                "bytes",
                "CPU",
                "loop lag p50 / p99 / max",
                "max outside full GCs",
                "full GCs (longest)",
                "lab CPU (whole case)",
            ],
            startup_rows(results),
        ),
    ]
    collections = collection_rows(results)
    if collections:
        lines += [
            "",
            "#### Full garbage collections (one `gc.collect()` timed in each worker, outside the phases)",
            "",
            markdown_table(
                [
                    "case",
                    "objects, no trigger yet",
                    "objects, triggers waiting",
                    "objects per trigger",
                    "full GC, no trigger yet",
                    "full GC, triggers waiting",
                    "ratio",
                ],
                collections,
            ),
        ]
    table = ratio_rows(results)
    if len(table) > 1:
        lines += ["", "#### Baselines against `shared` (`baseline → shared (baseline / shared)`)", ""]
        lines.append(markdown_table(table[0], table[1:]))
    return "\n".join(lines) + "\n"


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = driver.parser("triggerer_capacity.py", __doc__.splitlines()[0])
    parser.add_argument("--triggers", default="1,100,1000", help="trigger counts of the shared case")
    parser.add_argument("--baseline-triggers", default="1,100", help="trigger counts of the baselines")
    parser.add_argument("--baselines", default="unshared,poll", help="of: unshared, poll ('' for none)")
    parser.add_argument("--namespaces", type=int, default=10, help="namespaces of the spread layout")
    parser.add_argument("--window", type=float, default=60.0, help="seconds of the steady window")
    parser.add_argument("--recheck-interval", type=float, default=300.0, help="the triggers' recheck_interval")
    parser.add_argument("--poll-interval", type=float, default=2.0, help="the poll baseline's interval")
    parser.add_argument(
        "--recheck-probe", type=float, default=30.0, help="recheck_interval of one more shared case (0: none)"
    )
    return parser.parse_args(argv)


def configure(options: argparse.Namespace, progress: driver.Progress) -> Config:
    return Config(
        triggers=driver.counts(options.triggers),
        baseline_triggers=driver.counts(options.baseline_triggers),
        baselines=driver.names(options.baselines),
        namespaces=options.namespaces,
        window_seconds=options.window,
        recheck_interval=options.recheck_interval,
        poll_interval=options.poll_interval,
        recheck_probe=options.recheck_probe,
        progress=progress,
    )


def main(argv: Sequence[str]) -> int:
    return driver.main(
        "triggerer_capacity.py", argv, parse=parse_args, configure=configure, run=run, render=render_markdown
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

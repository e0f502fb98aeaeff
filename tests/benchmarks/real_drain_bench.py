"""The drain check's cost to the real API server and etcd (issue 16 item 6), next to the lab's.

The lab benchmark (`drain_bench.py`) measures the client; this one measures the server: a real kube-apiserver
and etcd (`RealCluster(apiserver_only=True)`: no controller, scheduler or kubelet, whose reads would be noise),
the CRDs installed, and the namespace `drain_scenario` builds for the lab (one TrainJob's 16 ranks among
neighbours of other TrainJobs), seeded through the API (`real_seeding.py`, not measured). For each size and
case, in windows of `calls` calls (`real_meter.py`): the API server's CPU seconds, etcd's CPU seconds, the
bytes etcd sent, and where the pod lists were served (watch cache or etcd), less the same counters' idle rate
measured in the same run, per call; the median window is reported, and the ratio `baseline / case`.

Two states of the cluster, because the API server serves the pinned read's second list (`resourceVersionMatch=
Exact`) from a snapshot of its watch cache only while it keeps one (`ListFromCacheSnapshot`, on by default since
Kubernetes 1.34), and drops every snapshot older than etcd's compaction revision (`cacher/watch_cache.go`
`Compact`, `store.RemoveLess`):

* `active`: a pod of the cluster was written just before each window (a touch of a warm-up pod, outside the
  window), as on any cluster whose pods change every few minutes;
* `quiet`: no pod written since the last compaction; the run waits, probing with a pinned read of the small
  warm-up namespace, until the Exact list is served by etcd. The API server compacts every
  `--etcd-compaction-interval` (5 min by default; `compaction_interval` shortens it so the run does not wait
  ten minutes per size).

`run(config)` returns the results as JSON-able data; `render_markdown(results, command)` the tables.
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kubernetes

from airflow_provider_dispatch.dispatch.selection import Selection
from airflow_provider_dispatch_lab.real import RealCluster
from airflow_provider_dispatch_lab.real.binaries import ControlPlaneBuild

from .drain_cases import pod_names, selection_of, sync_reader
from .drain_scenario import DrainNamespace, build
from .harness import driver
from .harness.report import describe_machine, format_bytes, format_ratio, format_seconds, machine, markdown_table, ratio
from .real_meter import ServerMeter, ServerReading
from .real_seeding import RealEndpoint

BASELINE = "baseline"
CASES = {
    "baseline": "one unpaged namespace list, resourceVersion unset (what CoreV1Api.list_namespaced_pod sends)",
    "pinned": "the adapter's pinned read: two selector lists, the second resourceVersionMatch=Exact",
    "full": "the adapter's full read: the namespace list paged by page_size, resourceVersion unset",
    "hold-read": "the hold's one read: TrainJob, JobSet or runtime, full namespace list by lineage",
    "check": "the whole drain check: TrainJob, pinned read, each remaining pod's Node",
}
STATES = ("active", "quiet")
CHEAP = ("pinned", "check")
"""Cases whose one call is too small for the CPU clock's 10 ms tick: `calls` of them share a window."""
LAB_RESULTS = Path(__file__).resolve().parents[2] / "docs" / "benchmark-results" / "hold-read.json"
"""The lab's run of the same cases (`drain_check.py --cases baseline,pinned,full,check,hold-read`)."""


@dataclass(frozen=True)
class Config:
    sizes: tuple[int, ...] = (10000, 50000)
    cases: tuple[str, ...] = tuple(CASES)
    states: tuple[str, ...] = STATES
    job_pods: int = 16
    nodes: int = 4
    windows: int = 3
    calls: int = 5
    page_size: int = 500
    idle_seconds: float = 10.0
    compaction_interval: str = "60s"
    quiet_timeout: float = 400.0
    concurrency: int = 16
    build: ControlPlaneBuild | None = None
    workdir: Path | None = None
    progress: Callable[[str], None] = field(default=lambda line: None)

    def __post_init__(self) -> None:
        driver.require_known("cases", self.cases, CASES)
        driver.require_known("states", self.states, STATES)
        if BASELINE not in self.cases:
            raise ValueError("the baseline case must run: every figure is reported against it")
        if not self.sizes or any(size <= 2 * self.job_pods for size in self.sizes):
            raise ValueError(f"each size must be larger than twice the job's {self.job_pods} pods")
        if self.windows < 1 or self.calls < 1 or self.idle_seconds <= 0:
            raise ValueError("windows and calls must be at least 1, idle_seconds above 0")


Reader = Callable[[Mapping[str, Any]], list[str]]


def baseline_reader(kubeconfig: str) -> tuple[Reader, Callable[[], None]]:
    """The baseline's request as `CoreV1Api.list_namespaced_pod(ns)` sends it, the answer read in full and
    selected as raw JSON: the server's work is the same; building client models (a minute of client CPU and
    3 GB at 50,000 pods, `drain_bench.py`) would only slow this run, on the CPUs the server shares."""
    api = kubernetes.config.new_client_from_config(config_file=kubeconfig)
    core = kubernetes.client.CoreV1Api(api)

    def read(spec: Mapping[str, Any]) -> list[str]:
        selection: Selection = selection_of(spec)
        answer = core.list_namespaced_pod(selection.namespace, _preload_content=False)
        pods = json.loads(answer.data)["items"]
        return pod_names(selection.select(pods))

    return read, api.close


def reader(case: str, kubeconfig: str, page_size: int) -> tuple[Reader, Callable[[], None]]:
    if case == BASELINE:
        return baseline_reader(kubeconfig)
    return sync_reader(case, kubeconfig, page_size)


@dataclass
class Bench:
    """The running cluster and what the measurements need of it."""

    config: Config
    cluster: RealCluster
    endpoint: RealEndpoint
    meter: ServerMeter
    bench: DrainNamespace
    warmup: DrainNamespace
    readers: dict[str, Reader]
    probe: Reader

    def touch(self) -> None:
        """Write one warm-up pod (an annotation), so that the watch cache takes a fresh snapshot."""
        path = f"/api/v1/namespaces/{self.warmup.namespace}/pods/{self.warmup.trainjob}-node-0-0-x7k2p"
        pod = self.endpoint.call("GET", path)
        annotations = pod["metadata"].setdefault("annotations", {})
        annotations["bench.dispatch.invalid/touched"] = str(time.time_ns())
        self.endpoint.call("PUT", path, pod)

    def count_pods(self) -> int:
        """The benchmark namespace's pods as the API server lists them (one item and the count of the rest)."""
        first = self.endpoint.call("GET", f"{self.bench.pods_path()}?limit=1")
        return len(first["items"]) + int(first["metadata"].get("remainingItemCount") or 0)

    def idle_rate(self) -> ServerReading:
        """The counters' growth per second with nobody reading (the API server's and etcd's own work)."""
        before = self.meter.opening()
        started = time.perf_counter()
        time.sleep(self.config.idle_seconds)  # the idle window itself, not a wait for anything
        after = self.meter.closing()
        return (after - before).scaled(1 / (time.perf_counter() - started))

    def settle(self, timeout: float = 120.0) -> None:
        """Wait until the API server's CPU falls under 5 % over 2 s (after seeding it digests the writes)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            before = self.meter.opening()
            started = time.perf_counter()
            time.sleep(2.0)  # a sampling window
            cpu = (self.meter.closing() - before).apiserver_cpu / (time.perf_counter() - started)
            if cpu < 0.05:
                return
        self.config.progress(f"  the API server did not settle within {timeout:.0f} s; measuring anyway")

    def exact_list_from_etcd(self) -> bool:
        """Probe: a pinned read of the warm-up namespace; True if its Exact list was served by etcd."""
        before = self.meter.opening()
        self.probe(self.warmup.as_json())
        return (self.meter.closing() - before).cache_lists < 2

    def wait_quiet(self) -> float:
        """Wait until the pinned read's Exact list goes to etcd (see the module docstring); the seconds waited."""
        started = time.monotonic()
        while not self.exact_list_from_etcd():
            if time.monotonic() - started > self.config.quiet_timeout:
                raise RuntimeError(f"the watch cache kept its snapshots for {self.config.quiet_timeout:.0f} s")
            time.sleep(5.0)  # the cacher reads the compaction revision every 15 s: poll at a fraction of it
        return time.monotonic() - started

    def window(self, case: str, state: str, idle: ServerReading) -> dict[str, Any]:
        """One window: `calls` calls (1 for the namespace-wide reads), net of idle, per call."""
        calls = self.config.calls if case in CHEAP else 1
        read = self.readers[case]
        for _attempt in range(3):
            if state == "active":
                self.touch()
            before = self.meter.opening()
            started = time.perf_counter()
            selected = [read(self.bench.as_json()) for _ in range(calls)]
            wall = time.perf_counter() - started
            gross = self.meter.closing() - before
            if gross.consistency_checks == 0:  # else the API server's own check of the cache was in the window
                break
            self.config.progress(f"    a watch cache consistency check fell in the {case} window; again")
        else:
            raise RuntimeError("a consistency check fell in three windows in a row")
        net = (gross - idle.scaled(wall)).scaled(1 / calls)
        if any(names != selected[0] for names in selected):
            raise RuntimeError(f"{case} selected different pods in one window: {selected}")
        return {"reading": net.as_json(), "wallSeconds": wall / calls, "calls": calls, "selected": selected[0]}


def median_reading(windows: Sequence[Mapping[str, Any]]) -> ServerReading:
    """Each counter's median over the windows."""
    readings = [ServerReading.from_json(w["reading"]) for w in windows]
    return ServerReading.from_json(
        {name: statistics.median(r.as_json()[name] for r in readings) for name in ServerReading().as_json()}
    )


def _measure_size(bench: Bench, size: int) -> dict[str, Any]:
    config = bench.config
    seeded = time.perf_counter()
    bench.bench.grow(bench.endpoint, size)
    listed = bench.count_pods()
    config.progress(f"{size} pods seeded in {time.perf_counter() - seeded:.1f} s; the API lists {listed}")
    if listed != size:
        raise RuntimeError(f"the namespace should hold {size} pods, the API server lists {listed}")
    bench.settle()
    states: dict[str, Any] = {}
    for state in config.states:
        waited = bench.wait_quiet() if state == "quiet" else 0.0
        if state == "quiet":
            config.progress(f"  quiet after {waited:.0f} s (the Exact list is served by etcd)")
        idle = bench.idle_rate()
        cases: dict[str, Any] = {}
        for case in config.cases:
            windows = [bench.window(case, state, idle) for _ in range(config.windows)]
            median = median_reading(windows)
            cases[case] = {"windows": windows, "median": median.as_json(), "selected": windows[0]["selected"]}
            config.progress(
                f"  {state} {case}: API server CPU {format_seconds(median.apiserver_cpu)}, "
                f"from etcd {format_bytes(median.etcd_sent_bytes)}, lists cache {median.cache_lists:.1f} "
                f"etcd {median.etcd_lists:.1f}"
            )
        expected = cases[BASELINE]["selected"]
        wrong = {c: r["selected"] for c, r in cases.items() if r["selected"] != expected}
        if wrong or len(expected) != config.job_pods:
            raise RuntimeError(f"at {size} pods ({state}) the cases disagree with the baseline {expected}: {wrong}")
        states[state] = {"idlePerSecond": idle.as_json(), "waitedSeconds": waited, "cases": cases}
    return {"pods": size, "listedPods": listed, "states": states}


def lab_figures(sizes: Sequence[int]) -> dict[str, Any]:
    """The lab's server CPU and bytes served per call for the same cases and sizes, from its committed run."""
    if not LAB_RESULTS.is_file():
        return {}
    data = json.loads(LAB_RESULTS.read_text())
    figures: dict[str, Any] = {}
    for size in data["sizes"]:
        if size["pods"] not in sizes:
            continue
        per_case = {}
        for case, result in size["cases"].items():
            runs = result["measurement"]["runs"]
            per_case[case] = {
                "serverCpuSeconds": statistics.median(r["serverCpuSeconds"] for r in runs),
                "responseBytes": statistics.median(r["traffic"]["responseBytes"] for r in runs),
            }
        figures[str(size["pods"])] = per_case
    return figures


def run(config: Config) -> dict[str, Any]:
    """Start the API server and etcd, seed, measure every case in every state at every size."""
    started = time.perf_counter()
    cluster = RealCluster(
        build=config.build,
        apiserver_only=True,
        apiserver_args=[f"--etcd-compaction-interval={config.compaction_interval}"],
        workdir=config.workdir,
    )
    closers: list[Callable[[], None]] = []
    with cluster:
        cluster.install_crds()
        token = cluster.token_for("admin")
        endpoint = RealEndpoint(cluster, concurrency=config.concurrency)
        api = kubernetes.config.new_client_from_config(config_file=str(cluster.kubeconfig("admin")))
        try:
            warmup = build(api, endpoint, "bench-warmup", job_pods=config.job_pods, nodes=config.nodes)
            warmup.grow(endpoint, 2 * config.job_pods)
            namespace = build(api, endpoint, "bench", job_pods=config.job_pods, nodes=config.nodes)
        finally:
            api.close()
        kubeconfig = str(cluster.kubeconfig("admin"))
        meter = ServerMeter(
            cluster.url, token, cluster.ca_file, cluster.etcd_url, cluster.pid("kube-apiserver"), cluster.pid("etcd")
        )
        readers: dict[str, Reader] = {}
        try:
            for case in (*config.cases, "probe"):
                read, close = reader("pinned" if case == "probe" else case, kubeconfig, config.page_size)
                closers.append(close)
                read(warmup.as_json())  # every code path warm before the first window
                readers[case] = read
            probe = readers.pop("probe")
            bench = Bench(config, cluster, endpoint, meter, namespace, warmup, readers, probe)
            sizes = [_measure_size(bench, size) for size in sorted(config.sizes)]
        finally:
            for close in closers:
                close()
        versions = cluster.versions
    return {
        "benchmark": "real-drain-cost",
        "machine": machine(),
        "versions": {key: versions[key] for key in ("KUBERNETES", "ETCD") if key in versions},
        "config": {
            "sizes": list(config.sizes),
            "cases": list(config.cases),
            "states": list(config.states),
            "jobPods": config.job_pods,
            "nodes": config.nodes,
            "windows": config.windows,
            "calls": config.calls,
            "pageSize": config.page_size,
            "idleSeconds": config.idle_seconds,
            "compactionInterval": config.compaction_interval,
        },
        "podBytes": namespace.pod_bytes,
        "sizes": sizes,
        "lab": lab_figures(config.sizes),
        "elapsedSeconds": time.perf_counter() - started,
    }


# --- the results page -----------------------------------------------------------------------------------------


def _ratio_cell(value: float, base: float, fmt: Callable[[float], str], is_baseline: bool) -> str:
    return fmt(value) if is_baseline else f"{fmt(value)} ({format_ratio(ratio(base, value))})"


def render_summary(results: dict[str, Any]) -> str:
    """Per size and case: the API server's CPU and the bytes from etcd in each state, and the lab's CPU."""
    headers = ["pods", "case", "lab server CPU"]
    states = results["config"]["states"]
    for state in states:
        headers += [f"API server CPU ({state})", f"read from etcd ({state})"]
    rows = []
    for size in results["sizes"]:
        lab = results.get("lab", {}).get(str(size["pods"]), {})
        for case in results["config"]["cases"]:
            lab_case = lab.get(case)
            cells = [f"{size['pods']:,}", f"`{case}`"]
            cells.append(format_seconds(lab_case["serverCpuSeconds"]) if lab_case else "n/a")
            for state in states:
                medians = size["states"][state]["cases"]
                m, base = ServerReading.from_json(medians[case]["median"]), medians[BASELINE]["median"]
                is_base = case == BASELINE
                cells.append(_ratio_cell(m.apiserver_cpu, base["apiserver_cpu"], format_seconds, is_base))
                cells.append(format_bytes(max(m.etcd_sent_bytes, 0)))  # no ratio: the baseline's is often ~0
            rows.append(cells)
    return markdown_table(headers, rows)


def render_detail(results: dict[str, Any], size: dict[str, Any], state: str) -> str:
    headers = [
        "case",
        "API server CPU",
        "etcd CPU",
        "read from etcd",
        "lists: cache / etcd",
        "pods fetched from etcd",
        "pods scanned in cache",
        "LIST bytes to client",
        "wall",
    ]
    rows = []
    cases = size["states"][state]["cases"]
    base = cases[BASELINE]["median"]
    for case, result in cases.items():
        m = ServerReading.from_json(result["median"])
        is_base = case == BASELINE
        rows.append(
            [
                f"`{case}`",
                _ratio_cell(m.apiserver_cpu, base["apiserver_cpu"], format_seconds, is_base),
                format_seconds(max(m.etcd_cpu, 0)),
                format_bytes(max(m.etcd_sent_bytes, 0)),
                f"{m.cache_lists:.0f} / {m.etcd_lists:.0f}",
                f"{m.etcd_fetched:,.0f}",
                f"{m.cache_scanned:,.0f}",
                format_bytes(m.list_response_bytes),
                format_seconds(statistics.median(w["wallSeconds"] for w in result["windows"])),
            ]
        )
    return markdown_table(headers, rows)


def render_markdown(results: dict[str, Any], command: str) -> str:
    config = results["config"]
    versions = ", ".join(f"{k.lower()} {v}" for k, v in results.get("versions", {}).items())
    lines = [
        f"Machine: {describe_machine(results['machine'])}. Real control plane: {versions}.",
        "",
        f"Command: `{command}` ({results['elapsedSeconds'] / 60:.1f} min including seeding).",
        "",
        f"The job has {config['jobPods']} pods on {config['nodes']} nodes; one pod is {results['podBytes']:,} bytes "
        f"as served. Page size {config['pageSize']}. Per call, the median of {config['windows']} windows "
        f"({config['calls']} calls per window for {', '.join(f'`{c}`' for c in CHEAP)}), less the idle rate "
        f"measured over {config['idleSeconds']:.0f} s in the same state; etcd compaction every "
        f"{config['compactionInterval']}. Ratios are `{BASELINE} / case`.",
        "",
        render_summary(results),
    ]
    for size in results["sizes"]:
        for state in config["states"]:
            waited = size["states"][state]["waitedSeconds"]
            note = f" (quiet after {waited:.0f} s)" if state == "quiet" else ""
            lines += ["", f"#### {size['pods']:,} pods, {state}{note}", "", render_detail(results, size, state)]
    return "\n".join(lines) + "\n"


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = driver.parser("real_drain_cost.py", "The drain check's cost to the real API server (issue 16 item 6).")
    parser.add_argument("--pods", default="10000,50000", help="namespace sizes, comma-separated")
    parser.add_argument("--cases", default=",".join(CASES), help=f"of: {', '.join(CASES)}")
    parser.add_argument("--states", default=",".join(STATES), help=f"of: {', '.join(STATES)}")
    parser.add_argument("--job-pods", type=int, default=16)
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--windows", type=int, default=3, help="measured windows per case and state")
    parser.add_argument("--calls", type=int, default=5, help="calls per window of the pinned read and the check")
    parser.add_argument("--page-size", type=int, default=500)
    parser.add_argument("--idle", type=float, default=10.0, help="seconds of the idle window")
    parser.add_argument("--compaction-interval", default="60s", help="the API server's --etcd-compaction-interval")
    parser.add_argument("--concurrency", type=int, default=16, help="requests in flight while seeding")
    return parser.parse_args(argv)


def configure(options: argparse.Namespace, progress: driver.Progress) -> Config:
    return Config(
        sizes=driver.counts(options.pods),
        cases=driver.names(options.cases),
        states=driver.names(options.states),
        job_pods=options.job_pods,
        nodes=options.nodes,
        windows=options.windows,
        calls=options.calls,
        page_size=options.page_size,
        idle_seconds=options.idle,
        compaction_interval=options.compaction_interval,
        concurrency=options.concurrency,
        progress=progress,
    )


def main(argv: Sequence[str]) -> int:
    # a SIGTERM unwinds like Ctrl-C, so the cluster's programs are stopped on the way out
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    return driver.main(
        "real_drain_cost.py", argv, parse=parse_args, configure=configure, run=run, render=render_markdown
    )

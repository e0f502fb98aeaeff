"""Admission controller throughput (issue 8 item 5): Workloads reconciled per second with 1,000 pending.

    python tests/benchmarks/controller_throughput.py --workloads 1000 --json out.json --markdown out.md

Each case gets a fresh lab in its own process (no simulated controllers: nothing but the admission controller
touches the Workloads) holding `--workloads` dispatch TrainJobs in Kueue mode, held and with the hold observed,
each owning a Workload with quota reserved and our admission check Pending, as Kueue leaves them for an
admission check controller; half of the TrainJobs have no pod left (the controller raises A and sets Ready),
half keep one Running pod (it leaves the check Pending with the waiting message). Seeding the JobSets restarts
the settle (it counts from their last spec change, dispatch/evidence.py), so before the controller starts the
driver waits on the lab's clock (`harness.lab_clock`) until every hold has settled as the rule judges it: the
controller's first look finds each hold settled however fast or loaded the machine is. The controller then runs
in a fresh worker process (`throughput_cases`) until every Workload is decided, and the driver checks the result
through the API. See docs/performance.md (section 5).

Baseline, in the same run: the same controller with a single pending Workload, one that it admits and one that
must wait (`single-admit`, `single-wait`): the cost of one Workload from a cold start, against which the
per-Workload cost at 1,000 is read. `bulk-1-worker` runs the 1,000 with one worker instead of four: what the
workers' concurrency buys.

`run(config)` returns the results as JSON-able data; `render_markdown(results, command)` the tables.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: make `benchmarks` importable

import kubernetes

from airflow_provider_dispatch.dispatch import vocabulary as v
from airflow_provider_dispatch.dispatch.evidence import HoldEvidence, hold_reached, judge_hold, settles_at
from airflow_provider_dispatch.dispatch.fencing import recorded
from airflow_provider_dispatch.kueue.checks import ADMISSION_CHECK
from airflow_provider_dispatch_lab.scenario import manifests
from benchmarks.harness import driver
from benchmarks.harness.lab_clock import CLOCK_PROBE, RemoteClock, clock_file
from benchmarks.harness.lab_process import LabEndpoint, LabProcess
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

WORKER = "benchmarks.throughput_cases"
NAMESPACE = "adm"
NODE = "adm-node-0"
CHECK = "dispatch-drained"
QUEUE = "user-queue"
RESERVED_AT = "2026-08-21T10:00:00Z"
ADMISSION = 1
#: the line of the waiting message that lists the pods of the previous execution (below what to do first)
WAITING_LINE: Final = "\npods of the previous execution remain: "

#: case -> (Workloads, workers); `bulk` cases take `--workloads`
CASES: Final = {"single-admit": (1, 4), "single-wait": (1, 4), "bulk": (0, 4), "bulk-1-worker": (0, 1)}


@dataclass(frozen=True)
class Config:
    workloads: int = 1000
    cases: tuple[str, ...] = tuple(CASES)
    timeout: float = 1200.0
    workdir: Path | None = None
    progress: Callable[[str], None] = field(default=lambda line: None)

    def __post_init__(self) -> None:
        driver.require_known("cases", self.cases, CASES)
        if self.workloads < 2:
            raise ValueError("--workloads must be at least 2 (half admitted, half waiting)")


# --- the cluster ------------------------------------------------------------------------------------------------


#: the one pod a waiting TrainJob keeps (`{i}`: its index, filled in by the seeding)
WAITING_POD = "tj-{i}-node-0-0-x7k2p"


def held_trainjob(*, keeps_a_pod: bool) -> dict[str, Any]:
    """A dispatch TrainJob in Kueue mode as Kueue holds it: suspended, Trainer has observed it, and the admission
    check recorded execution 1's pods long ago (`keeps_a_pod`: the one pod it keeps, under its node, so the check
    finds its record complete and has nothing to add to it: one write per decision). The hold settles only once its
    JobSet, seeded after it, is as old as the settle (dispatch/evidence.py, 4): `wait_until_settled`."""
    trainjob = manifests.trainjob("tj-{i}", job_id="tj-{i}", num_nodes=1, queue=QUEUE, admission=ADMISSION)
    nodes = {NODE: [WAITING_POD]} if keeps_a_pod else {}
    record = {"admission": ADMISSION, "nodes": nodes, "since": "2026-01-01T00:00:00Z"}
    trainjob["metadata"]["annotations"][v.ANNOTATION_EXECUTION_PODS] = json.dumps(record)
    trainjob["status"] = {
        "conditions": [
            {
                "type": "Suspended",
                "status": "True",
                "reason": "Suspended",
                "message": "TrainJob is suspended",
                "lastTransitionTime": RESERVED_AT,
            }
        ]
    }
    return trainjob


def held_jobset() -> dict[str, Any]:
    """The TrainJob's JobSet as Trainer applied the hold: suspended; no replicated job, so no Jobs to read (the
    benchmark measures the controller, not the Job reads of a real JobSet)."""
    return {
        "apiVersion": v.JOBSET.api_version,
        "kind": "JobSet",
        "metadata": {"name": "tj-{i}"},
        "spec": {"suspend": True, "replicatedJobs": []},
    }


def workload(trainjob: dict[str, Any]) -> dict[str, Any]:
    """The Workload Kueue made for `trainjob`, with quota reserved and our check Pending (kueue v1beta2)."""
    meta = trainjob["metadata"]
    return {
        "apiVersion": manifests.KUEUE_API,
        "kind": "Workload",
        "metadata": {
            "name": f"trainjob-{meta['name']}",
            "labels": {"kueue.x-k8s.io/job-uid": meta["uid"]},
            "ownerReferences": [
                {
                    "apiVersion": manifests.TRAINER_API,
                    "kind": "TrainJob",
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "queueName": QUEUE,
            "podSets": [
                {
                    "name": "node",
                    "count": 1,
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [
                                {"name": "node", "image": "pytorch", "resources": {"requests": {"cpu": "1"}}}
                            ],
                        }
                    },
                }
            ],
        },
        "status": manifests.quota_reserved_status(CHECK, RESERVED_AT),
    }


def build(api: kubernetes.client.ApiClient, lab: LabEndpoint, count: int, waiting: int) -> list[tuple[str, str]]:
    """`count` TrainJobs and their pending Workloads; the last `waiting` keep a pod. Returns the Workloads."""
    core = kubernetes.client.CoreV1Api(api)
    custom = kubernetes.client.CustomObjectsApi(api)
    core.create_namespace({"metadata": {"name": NAMESPACE}})
    core.create_node(manifests.node(NODE, gpus=8))
    runtime = v.CLUSTER_TRAINING_RUNTIME
    custom.create_cluster_custom_object(
        runtime.group, runtime.version, runtime.plural, manifests.cluster_training_runtime()
    )
    check = ADMISSION_CHECK
    custom.create_cluster_custom_object(check.group, check.version, check.plural, manifests.admission_check(CHECK))
    lab.seed(v.TRAINJOB.path(NAMESPACE), held_trainjob(keeps_a_pod=False), count - waiting)
    if waiting:
        lab.seed(v.TRAINJOB.path(NAMESPACE), held_trainjob(keeps_a_pod=True), waiting, start=count - waiting)
    lab.seed(v.JOBSET.path(NAMESPACE), held_jobset(), count)
    if waiting:
        pod = pod_template("tj-{i}", job_id="tj-{i}", rank="0", name=WAITING_POD, node=NODE)
        lab.seed(v.POD.path(NAMESPACE), pod, waiting, start=count - waiting)
    listed = lab.call("GET", v.TRAINJOB.path(NAMESPACE))
    workloads = []
    for trainjob in listed["items"]:
        body = workload(trainjob)
        lab.seed(v.WORKLOAD.path(NAMESPACE), body, 1)
        workloads.append((NAMESPACE, body["metadata"]["name"]))
    return workloads


def wait_until_settled(api: kubernetes.client.ApiClient, clock: RemoteClock) -> datetime:
    """Wait on the lab's clock until every seeded hold has settled by the rule's own definition (`judge_hold`,
    on the API server's clock as the `Date` header gives it: whole seconds); returns that time.

    The record is old, but the JobSets were written at seeding, so each settle counts from their managedFields
    time (`hold_reached`) and ends `wait_seconds` (the settle and the clock skew bound) of lab time later: under
    1 s of wall time at speed 100, or longer when the lab's loop is starved (lab time then runs slower,
    `lab/clock.py`), which is why this waits on lab time and never on wall time."""
    custom = kubernetes.client.CustomObjectsApi(api)
    tj, js = v.TRAINJOB, v.JOBSET
    trainjobs = custom.list_namespaced_custom_object(tj.group, tj.version, NAMESPACE, tj.plural)["items"]
    jobsets = {
        v.name_of(item): item
        for item in custom.list_namespaced_custom_object(js.group, js.version, NAMESPACE, js.plural)["items"]
    }
    holds = []
    for trainjob in trainjobs:
        name = v.name_of(trainjob)
        record = recorded(trainjob, ADMISSION, f"{NAMESPACE}/{name}")
        evidence = HoldEvidence(jobsets.get(name), {}, record)
        until = settles_at(record, evidence.wait_seconds, hold_reached(evidence))
        if until is None:
            raise RuntimeError(f"TrainJob {NAMESPACE}/{name} was seeded without a record of execution {ADMISSION}")
        holds.append((trainjob, evidence, until))
    latest = max(until for _, _, until in holds)
    now = datetime.fromtimestamp(int(clock.wait_until(latest.timestamp()).lab), UTC)
    unsettled = {
        v.name_of(trainjob): verdict.reason
        for trainjob, evidence, _ in holds
        if (verdict := judge_hold(trainjob, replace(evidence, server_now=now), ADMISSION)) is not None
    }
    if unsettled:
        raise RuntimeError(f"at {now} the rule still finds these holds not settled: {unsettled}")
    return now


def verify(api: kubernetes.client.ApiClient, count: int, waiting: int) -> dict[str, int]:
    """The cluster after the run, through the API: check states and A on the TrainJobs, as the run claims."""
    custom = kubernetes.client.CustomObjectsApi(api)
    states = {"ready": 0, "waitingMessage": 0, "raised": 0}
    wl = v.WORKLOAD
    workloads = custom.list_namespaced_custom_object(wl.group, wl.version, NAMESPACE, wl.plural)["items"]
    for item in workloads:
        for entry in v.object_list(item, "status", "admissionChecks"):
            if entry.get("name") != CHECK:
                continue
            if entry.get("state") == "Ready":
                states["ready"] += 1
            elif entry.get("state") == "Pending" and WAITING_LINE in str(entry.get("message", "")):
                states["waitingMessage"] += 1
    trainjobs = custom.list_namespaced_custom_object(
        v.TRAINJOB.group, v.TRAINJOB.version, NAMESPACE, v.TRAINJOB.plural
    )["items"]
    states["raised"] = sum(1 for t in trainjobs if v.annotations_of(t).get(v.ANNOTATION_ADMISSION) == "2")
    wanted = {"ready": count - waiting, "waitingMessage": waiting, "raised": count - waiting}
    if states != wanted:
        raise RuntimeError(f"after the run the cluster holds {states}, not {wanted}")
    return states


def run_case(config: Config, case: str, workdir: Path) -> dict[str, Any]:
    size, workers = CASES[case]
    count = size or config.workloads
    waiting = {"single-admit": 0, "single-wait": 1}.get(case, count // 2)
    clock_path = workdir / case / "clock.json"
    with clock_file(clock_path), LabProcess.start(workdir / case, controllers=[CLOCK_PROBE]) as lab:
        api = kubernetes.config.new_client_from_config(config_file=str(lab.kubeconfig))
        try:
            seeded = time.perf_counter()
            names = build(api, lab.endpoint, count, waiting)
            config.progress(f"{case}: {count} Workloads seeded in {time.perf_counter() - seeded:.1f} s")
            wait_until_settled(api, RemoteClock.from_file(clock_path))
            lab_cpu = lab.cpu_seconds()
            payload = {
                "kubeconfig": str(lab.kubeconfig),
                "labUrl": lab.url,
                "token": lab.token,
                "workloads": names,
                "workers": workers,
                "timeout": config.timeout,
            }
            result = run_worker(WORKER, payload, timeout=config.timeout + 120)
            result["labCpuSeconds"] = lab.cpu_seconds() - lab_cpu
            result["verified"] = verify(api, count, waiting)
        finally:
            api.close()
    result["case"] = case
    config.progress(
        f"  {case}: {result['workloads']} in {format_seconds(result['wallSeconds'])} "
        f"({result['workloads'] / result['wallSeconds']:.1f}/s), {request_count(result['traffic'])} requests"
    )
    return result


def run(config: Config) -> dict[str, Any]:
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="dispatch-throughput-") as scratch:
        workdir = config.workdir or Path(scratch)
        results = [run_case(config, case, workdir) for case in config.cases]
    return {
        "benchmark": "controller-throughput",
        "machine": machine(("kubernetes_asyncio", "aiohttp")),
        "config": {"workloads": config.workloads, "cases": list(config.cases)},
        "cases": results,
        "elapsedSeconds": time.perf_counter() - started,
    }


# --- the results page -------------------------------------------------------------------------------------------


def per_second(result: dict[str, Any]) -> float:
    return float(result["workloads"]) / float(result["wallSeconds"])


def case_rows(results: dict[str, Any]) -> list[list[str]]:
    rows = []
    for r in results["cases"]:
        n = r["workloads"]
        traffic = r["traffic"]
        rows.append(
            [
                f"`{r['case']}` ({n:,}, {r['workers']} worker{'s' if r['workers'] > 1 else ''})",
                f"{per_second(r):.1f}",
                format_seconds(r["wallSeconds"]),
                format_seconds(r["readySeconds"]),
                format_seconds(r["halfSeconds"]),
                f"{r['admitted']} / {r['waiting']}",
                f"{request_count(traffic):,} ({request_count(traffic) / n:.1f})",
                f"{format_bytes(byte_count(traffic))} ({format_bytes(byte_count(traffic) / n)})",
                f"{format_seconds(r['cpuSeconds'])} ({format_seconds(r['cpuSeconds'] / n)})",
                format_seconds(r["labCpuSeconds"]),
                str(r["reconciles"]),
            ]
        )
    return rows


def request_mix(result: dict[str, Any]) -> str:
    parts = [f"{row['verb']} {row['resource']} {row['requests']}" for row in result["traffic"]]
    return ", ".join(parts)


def find(results: dict[str, Any], case: str) -> dict[str, Any] | None:
    return next((r for r in results["cases"] if r["case"] == case), None)


def ratio_rows(results: dict[str, Any]) -> list[list[str]]:
    """Per-Workload cost at the bulk size against a single Workload's (the mean of admit and wait)."""
    bulk = find(results, "bulk")
    singles = [r for r in (find(results, "single-admit"), find(results, "single-wait")) if r is not None]
    if bulk is None or not singles:
        return []
    n = bulk["workloads"]
    figures: list[tuple[str, Callable[[dict[str, Any]], float], Callable[[float], str]]] = [
        ("wall time per Workload", lambda r: r["wallSeconds"] / r["workloads"], format_seconds),
        ("requests per Workload", lambda r: request_count(r["traffic"]) / r["workloads"], lambda x: f"{x:.1f}"),
        ("bytes per Workload", lambda r: byte_count(r["traffic"]) / r["workloads"], format_bytes),
        ("controller CPU per Workload", lambda r: r["cpuSeconds"] / r["workloads"], format_seconds),
    ]
    rows = []
    for title, get, fmt in figures:
        single = sum(get(r) for r in singles) / len(singles)
        at_bulk = get(bulk)
        rows.append([title, fmt(single), f"{fmt(at_bulk)} ({format_ratio(ratio(single, at_bulk))})"])
    return [["figure", "one Workload (mean of admit, wait)", f"at {n:,} (single / bulk)"], *rows]


def render_markdown(results: dict[str, Any], command: str) -> str:
    lines = [
        f"Machine: {describe_machine(results['machine'])}.",
        "",
        f"Command: `{command}` ({results['elapsedSeconds'] / 60:.1f} min including seeding).",
        "",
        "Wall time runs from the controller's start (client built, informers listing) to the last Workload "
        'decided; "synced" is when its caches were filled and its workers started, "half" when half of the '
        "Workloads were decided. Per-Workload figures in brackets.",
        "",
        markdown_table(
            [
                "case",
                "Workloads/s",
                "wall",
                "synced",
                "half",
                "admitted / waiting",
                "requests",
                "bytes",
                "controller CPU",
                "lab CPU",
                "reconciles",
            ],
            case_rows(results),
        ),
    ]
    table = ratio_rows(results)
    if table:
        lines += ["", "#### Per Workload: one pending against many", "", markdown_table(table[0], table[1:])]
    lines += ["", "Requests by verb and resource:", ""]
    lines += [f"* `{r['case']}`: {request_mix(r)}" for r in results["cases"]]
    return "\n".join(lines) + "\n"


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = driver.parser("controller_throughput.py", __doc__.splitlines()[0])
    parser.add_argument("--workloads", type=int, default=1000, help="pending Workloads of the bulk cases")
    parser.add_argument("--cases", default=",".join(CASES), help=f"of: {', '.join(CASES)}")
    parser.add_argument("--timeout", type=float, default=1200.0, help="seconds a case may take to decide all")
    return parser.parse_args(argv)


def configure(options: argparse.Namespace, progress: driver.Progress) -> Config:
    return Config(
        workloads=options.workloads, cases=driver.names(options.cases), timeout=options.timeout, progress=progress
    )


def main(argv: Sequence[str]) -> int:
    return driver.main(
        "controller_throughput.py", argv, parse=parse_args, configure=configure, run=run, render=render_markdown
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""The drain check reads being compared, each measured in a worker process of its own (`python -m` this module).

Cases (what a call does; every case returns the names of the pods it selected, so the driver can check that
all cases found the same pods):

* `baseline`: `CoreV1Api.list_namespaced_pod(ns)`: one namespace-wide list (quorum read), deserialized into the
  `kubernetes` client's models, then the DESIGN §3.3 selection applied to the models locally. What a provider
  written the obvious way does.
* `full`, `full-async`: the adapters' `"full"` read (`programs.read_pods`): the namespace-wide list paged by
  `page_size`, raw JSON (`_preload_content=False`, one `json.loads` per page), selected locally; the fallback
  when a server refuses the pinned read.
* `pinned`, `pinned-async`: the adapters' `"pinned"` read: one server-side list per selector, the first a quorum
  read, the second pinned to the first's resourceVersion with `resourceVersionMatch=Exact`; raw JSON.
* `pinned-disjoint`: a candidate beyond the adapter, measured to see what it would gain: the pinned read with
  the second selector made disjoint from the first (`job-id=..,submission=..,jobset-name!=<name>`, an
  equality-based `!=`, which also matches pods without the JobSet label), so a pod that carries both label sets
  (every pod of a healthy TrainJob) crosses the wire once, not twice. The union is the same set; not adopted
  (see docs/performance.md).
* `check`, `check-async`: the whole read-only drain check as sensors and triggers run it, `remaining_pods`
  (pinned): GET the TrainJob, the pinned pod read, a GET of each remaining pod's Node.
* `hold-read`: what a hold reads once (issue 15): the TrainJob, its JobSet (or its runtime), and the namespace's
  pods in one full list paged by `page_size`, raw JSON, selected by lineage (`programs.read_lineage`: the labels,
  the controller ownerReference, or the name the Job controller gives a pod), so that a pod whose labels someone
  edited is recorded too. Before issue 15 the hold read the pods as `pinned` does.

The sync cases use the `kubernetes` client, the async ones `kubernetes_asyncio` (one event loop and one
`ApiClient` per worker, as a triggerer keeps them). Each worker builds its client, warms every code path up
with one call against the small warm-up namespace, then measures against the benchmark namespace
(`harness.measure`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any, Final

import kubernetes

from airflow_provider_dispatch.dispatch import AsyncDispatchAdapter, DispatchAdapter, programs
from airflow_provider_dispatch.dispatch import vocabulary as v
from airflow_provider_dispatch.dispatch.assessment import managed
from airflow_provider_dispatch.dispatch.programs import PodReadStrategy
from airflow_provider_dispatch.dispatch.selection import Selection
from airflow_provider_dispatch.dispatch.validation import parse_ref

from .harness.lab_process import LabEndpoint, process_cpu_seconds
from .harness.measure import measure
from .harness.workers import serve

Reader = Callable[[Mapping[str, Any]], list[str]]

CASES: Final = {
    "baseline": "CoreV1Api.list_namespaced_pod, client models, local selection",
    "full": "adapter full read, sync: paged namespace list, raw JSON, local selection",
    "full-async": "adapter full read, async (kubernetes_asyncio)",
    "pinned": "adapter pinned read, sync: two selector lists, the second resourceVersionMatch=Exact",
    "pinned-async": "adapter pinned read, async (kubernetes_asyncio)",
    "pinned-disjoint": "candidate: pinned read with a disjoint second selector (jobset-name!=...)",
    "check": "whole drain check, sync: remaining_pods (TrainJob, pinned pod read, Nodes)",
    "check-async": "whole drain check, async: remaining_pods",
    "hold-read": "the hold's one read, sync: TrainJob, JobSet or runtime, full namespace list, lineage selection",
}


def selection_of(spec: Mapping[str, Any]) -> Selection:
    return Selection(spec["namespace"], spec["trainjob"], spec["jobId"], spec["submission"])


def baseline_selected(pods: Any, selection: Selection) -> list[str]:
    """DESIGN §3.3 on client models: either selection, each pod once (by uid)."""
    chosen: dict[str, str] = {}
    for pod in pods.items:
        labels = pod.metadata.labels or {}
        dispatch = (
            labels.get(v.LABEL_JOB_ID) == selection.job_id and labels.get(v.LABEL_SUBMISSION) == selection.submission
        )
        if dispatch or labels.get(v.LABEL_JOBSET_NAME) == selection.name:
            chosen[pod.metadata.uid or pod.metadata.name] = pod.metadata.name
    return sorted(chosen.values())


def pod_names(pods: Any) -> list[str]:
    return sorted(v.name_of(pod) for pod in pods)


def _pages(
    namespace: str, selector: str, resource_version: str | None, match: str | None, page_size: int
) -> programs.Program[tuple[list[Mapping[str, Any]], str]]:
    """A paged list's items and resourceVersion (benchmark candidate only: failures are not classified)."""
    items: list[Mapping[str, Any]] = []
    token: str | None = None
    list_rv = ""
    while True:
        pinned = (resource_version, match) if token is None else (None, None)
        page = yield programs.ListObjects(v.POD, namespace, selector, *pinned, limit=page_size, continue_=token)
        if isinstance(page, programs.ApiFailure):
            raise RuntimeError(f"list {selector} failed: {page}")
        items.extend(v.object_list(page, "items"))
        list_rv = list_rv or str(v.field(page, "metadata", "resourceVersion"))
        token = v.field(page, "metadata", "continue") or None
        if token is None:
            return items, list_rv


def disjoint_pinned_read(selection: Selection, page_size: int) -> programs.Program[list[str]]:
    """The `pinned-disjoint` candidate: the JobSet selector (quorum), then the dispatch selector minus the JobSet
    one, pinned to the first list's resourceVersion; the local matcher re-applied to the union."""
    assert selection.dispatch_selector is not None
    second = f"{selection.dispatch_selector},{v.LABEL_JOBSET_NAME}!={selection.name}"
    found, rv = yield from _pages(selection.namespace, selection.jobset_selector, None, None, page_size)
    rest, pinned_rv = yield from _pages(selection.namespace, second, rv, "Exact", page_size)
    if pinned_rv != rv:
        raise RuntimeError(f"the server answered resourceVersion {pinned_rv} to a list pinned at {rv}")
    return pod_names(selection.select(found, rest))


def lineage_read(spec: Mapping[str, Any], page_size: int) -> programs.Program[list[str]]:
    """The `hold-read` case: the reads a hold makes before its one write (`programs.read_lineage`)."""
    trainjob = yield from programs.read_trainjob(parse_ref(f"{spec['namespace']}/{spec['trainjob']}"))
    pods, _ = yield from programs.read_lineage(managed(trainjob), trainjob, page_size=page_size)
    return pod_names(pods)


def sync_reader(case: str, kubeconfig: str, page_size: int) -> tuple[Reader, Callable[[], None]]:
    if case == "baseline":
        api = kubernetes.config.new_client_from_config(config_file=kubeconfig)
        core = kubernetes.client.CoreV1Api(api)

        def baseline(spec: Mapping[str, Any]) -> list[str]:
            selection = selection_of(spec)
            return baseline_selected(core.list_namespaced_pod(selection.namespace), selection)

        return baseline, api.close
    strategy: PodReadStrategy = "full" if case in ("full", "hold-read") else "pinned"
    adapter = DispatchAdapter.from_kubeconfig(kubeconfig, pod_read=strategy, page_size=page_size)

    def read(spec: Mapping[str, Any]) -> list[str]:
        if case == "check":
            report = adapter.remaining_pods(f"{spec['namespace']}/{spec['trainjob']}")
            return sorted(p.name for p in report.remaining)
        selection = selection_of(spec)
        if case == "pinned-disjoint":
            return adapter.run(disjoint_pinned_read(selection, page_size))
        if case == "hold-read":
            return adapter.run(lineage_read(spec, page_size))
        program = programs.read_pods(selection, ref=spec["namespace"], strategy=strategy, page_size=page_size)
        return pod_names(adapter.run(program).pods)

    return read, adapter.close


def async_reader(case: str, kubeconfig: str, page_size: int) -> tuple[Reader, Callable[[], None]]:
    loop = asyncio.new_event_loop()
    strategy: PodReadStrategy = "full" if case == "full-async" else "pinned"
    adapter = loop.run_until_complete(
        AsyncDispatchAdapter.from_kubeconfig(kubeconfig, pod_read=strategy, page_size=page_size)
    )

    def read(spec: Mapping[str, Any]) -> list[str]:
        if case == "check-async":
            report = loop.run_until_complete(adapter.remaining_pods(f"{spec['namespace']}/{spec['trainjob']}"))
            return sorted(p.name for p in report.remaining)
        selection = selection_of(spec)
        program = programs.read_pods(selection, ref=spec["namespace"], strategy=strategy, page_size=page_size)
        return pod_names(loop.run_until_complete(adapter.run(program)).pods)

    def close() -> None:
        loop.run_until_complete(adapter.close())
        loop.close()

    return read, close


def run_case(payload: dict[str, Any]) -> dict[str, Any]:
    """Warm up, then measure one case; the worker's JSON result."""
    case = payload["case"]
    if case not in CASES:
        raise SystemExit(f"unknown case {case!r}; known: {', '.join(CASES)}")
    make = async_reader if case.endswith("-async") else sync_reader
    read, close = make(case, payload["kubeconfig"], payload["pageSize"])
    lab = LabEndpoint(payload["labUrl"], payload["token"])
    try:
        warm = read(payload["warmup"])
        measurement, selected = measure(
            lambda: read(payload["bench"]),
            lab.traffic,
            repeat=payload["repeat"],
            budget_seconds=payload["budgetSeconds"],
            server_cpu=lambda: process_cpu_seconds(payload["labPid"]),
        )
    finally:
        close()
    return {"case": case, "measurement": measurement.as_json(), "selected": selected, "warmupSelected": warm}


if __name__ == "__main__":
    serve(run_case)

"""The two consistent pod reads (DESIGN §3.2, programs/pods.py) give the same answer through the real clients, and the
pinned read stays one snapshot while the namespace changes between its two lists."""

from __future__ import annotations

import pytest
from aiohttp import web

from airflow_provider_dispatch.dispatch import vocabulary as v
from airflow_provider_dispatch.dispatch.assessment import Execution
from airflow_provider_dispatch_lab.apiserver.errors import ApiError
from airflow_provider_dispatch_lab.client import LabClient
from airflow_provider_dispatch_lab.runtime import DEFAULT_TOKEN
from airflow_provider_dispatch_lab.scenario import manifests

from .cluster import JOB_TRACKING_FINALIZER, Cluster
from .conftest import DispatchLab, Handler, MakeAdapter


def busy_namespace(cluster: Cluster) -> tuple[str, set[str]]:
    """The object's pods found each way, finished ranks, and neighbours that are not the object's."""
    runtime = cluster.runtime()
    ready, lost = cluster.node("n1"), cluster.node("n2")
    execution, terminating = cluster.held_after_execution("ft-7", runtime=runtime, admission=2, pods_on=[ready, lost])
    cluster.lose_node(lost)
    hidden = cluster.pod("ft-7", node=ready, execution=None, index=5)
    relabelled = cluster.pod("ft-7", node=lost, execution=execution, jobset_label=False, index=6)
    unscheduled = cluster.pod("ft-7", node=None, execution=execution, phase="Pending", index=7)
    for i in range(3):
        finalizers = [JOB_TRACKING_FINALIZER] if i == 0 else []
        done = cluster.pod(
            "ft-7", node=ready, execution=execution, phase="Succeeded", index=10 + i, finalizers=finalizers
        )
        if finalizers:
            cluster.job_controller_deletes(done)  # a finished rank waiting for deletion
    for i in range(4):
        cluster.pod("ft-8", node=ready, execution=Execution("ft-8", "1", 1), index=i)
        cluster.pod("other", node=ready, execution=Execution("ft-7", "2", 1), index=i)
    return f"{cluster.namespace}/ft-7", {*terminating, hidden, relabelled, unscheduled}


@pytest.mark.parametrize("page_size", [1, 3, 500])
async def test_pinned_and_full_reads_agree(
    make_adapter: MakeAdapter, kind: str, cluster: Cluster, dispatch_lab: DispatchLab, page_size: int
) -> None:
    ref, expected = busy_namespace(cluster)
    answers = {}
    for pod_read in ("pinned", "full"):
        adapter = await make_adapter(kind, pod_read=pod_read, page_size=page_size)
        mark = dispatch_lab.recorder.mark()
        report = await adapter.remaining_pods(ref)
        status = await adapter.inspect(ref)
        lists = [c for c in dispatch_lab.recorder.since(mark) if c.path == v.POD.path(cluster.namespace)]
        answers[pod_read] = (
            sorted((p.name, p.node.label, p.blocking.value) for p in report.remaining),
            sorted(p.name for p in status.remaining),
            report.ceased,
        )
        assert {p.name for p in report.remaining} == expected
        first_pages = [c for c in lists if "continue" not in c.query]
        assert all(c.query.get("resourceVersion") != "0" for c in lists)  # never a cache read
        if pod_read == "pinned":
            selectors = {c.query.get("labelSelector") for c in first_pages}
            assert selectors == {
                f"{v.LABEL_JOB_ID}=ft-7,{v.LABEL_SUBMISSION}=1",
                f"{v.LABEL_JOBSET_NAME}=ft-7",
            }
            quorum = [c for c in first_pages if "resourceVersion" not in c.query]
            pinned = [c for c in first_pages if c.query.get("resourceVersionMatch") == "Exact"]
            assert len(quorum) == len(pinned) == 2  # one pair for remaining_pods, one for inspect
        else:
            assert all("labelSelector" not in c.query and "resourceVersion" not in c.query for c in first_pages)
        if page_size == 1:
            assert any("continue" in c.query for c in lists)
    assert answers["pinned"] == answers["full"]


# --- one snapshot while the namespace changes (DESIGN §3.2) ----------------------------------------------------


def pod_labels(cluster: Cluster, name: str) -> dict[str, str]:
    return dict(cluster.core.read_namespaced_pod(name, cluster.namespace).metadata.labels or {})


def exact(request: web.Request) -> bool:
    return request.method == "GET" and request.query.get("resourceVersionMatch") == "Exact"


async def change_namespace(dispatch_lab: DispatchLab, namespace: str, node: str, gone: str, new: str) -> None:
    """What other clients do between the pinned read's two lists: a pod found only by the dispatch selector is
    force-deleted, and a pod found only by the JobSet selector is created. A read that mixed the two moments
    (the first list before, the second after) would report both the deleted pod and the new one."""
    admin = LabClient(dispatch_lab.lab.url, DEFAULT_TOKEN)
    try:
        await admin.delete(v.POD, namespace, gone, grace_period_seconds=0)
        labels = {v.LABEL_JOBSET_NAME: "ft-7", "jobset.sigs.k8s.io/replicatedjob-name": "node"}
        await admin.create(v.POD, namespace, manifests.pod(new, node_name=node, labels=labels))
    finally:
        await admin.close()


@pytest.mark.parametrize("server", ["pins", "ignores-exact", "refuses-exact"])
async def test_pinned_read_is_one_snapshot_while_the_namespace_changes(
    make_adapter: MakeAdapter, kind: str, cluster: Cluster, dispatch_lab: DispatchLab, server: str
) -> None:
    """Pods deleted and created between the two selector lists. A server that honours `resourceVersionMatch=Exact`
    answers the second list from the first list's snapshot: the pinned read is the namespace as it was (what the
    full read saw just before). A server that ignores Exact (answers a newer resourceVersion) or refuses it makes
    the read fall back to one full list, after the change: the namespace as it is now. Never a mix of the two."""
    ref, expected = busy_namespace(cluster)
    full = await make_adapter(kind, pod_read="full")
    before = await full.remaining_pods(ref)
    assert {p.name for p in before.remaining} == expected
    gone = next(name for name in sorted(expected) if v.LABEL_JOBSET_NAME not in pod_labels(cluster, name))
    new, node = f"late-{cluster.suffix}", cluster.node_name("n1")
    changed: list[str] = []

    async def change_then_serve(request: web.Request, handler: Handler) -> web.StreamResponse:
        if not changed:
            changed.append(request.query["resourceVersion"])
            await change_namespace(dispatch_lab, cluster.namespace, node, gone, new)
        if server == "refuses-exact":
            raise ApiError(400, "BadRequest", 'resourceVersionMatch: Unsupported value: "Exact"')
        if server == "ignores-exact":
            latest = request.rel_url.without_query_params("resourceVersion", "resourceVersionMatch")
            return await handler(request.clone(rel_url=latest))
        return await handler(request)

    dispatch_lab.hooks.add(change_then_serve, when=exact)
    pinned = await make_adapter(kind, pod_read="pinned")
    mark = dispatch_lab.recorder.mark()
    report = await pinned.remaining_pods(ref)
    lists = [c for c in dispatch_lab.recorder.since(mark) if c.path == v.POD.path(cluster.namespace)]
    after = await full.remaining_pods(ref)

    names = {p.name for p in report.remaining}
    assert changed, "the pinned read sent no Exact list"
    assert {p.name for p in after.remaining} == (expected - {gone}) | {new}  # the change happened
    namespace_wide = [c for c in lists if "labelSelector" not in c.query]
    if server == "pins":
        assert names == expected  # the snapshot of the first list: the deleted pod, not the new one
        assert report.resource_version == changed[0]
        assert int(report.resource_version) < int(after.resource_version)
        assert not namespace_wide
    else:
        assert names == (expected - {gone}) | {new}  # fell back to one full list, taken after the change
        assert namespace_wide
        assert "resourceVersion" not in namespace_wide[0].query
    assert names != expected | {new}  # never the torn mix: the deleted pod from before and the new one from after

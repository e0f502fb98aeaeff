"""The two consistent pod reads (DESIGN §3.2, programs.py) give the same answer through the real clients."""

from __future__ import annotations

import pytest

from airflow_provider_dispatch.dispatch import vocabulary as v
from airflow_provider_dispatch.dispatch.assessment import Execution

from .cluster import JOB_TRACKING_FINALIZER, Cluster
from .conftest import DispatchLab, MakeAdapter


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

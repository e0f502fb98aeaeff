"""API faults (`lab.apiserver.faults`) through the real clients: retryable errors, and never an admission without a full
check.

Each fault applies to the adapter's requests only (conftest `Hooks`), so the state a test builds is not faulted.
"""

from __future__ import annotations

import pytest
from aiohttp import web

from airflow_provider_dispatch.dispatch import vocabulary as v
from airflow_provider_dispatch.dispatch.assessment import Execution
from airflow_provider_dispatch.dispatch.errors import PodsRemainError, UnreachableError
from airflow_provider_dispatch_lab.apiserver.errors import ApiError
from airflow_provider_dispatch_lab.apiserver.faults import FaultRule

from .cluster import Cluster
from .conftest import DispatchLab, Handler, MakeAdapter

PODS = frozenset({"pods"})
LIST = frozenset({"list"})


def continued(request: web.Request) -> bool:
    return "continue" in request.query


def exact(request: web.Request) -> bool:
    return request.query.get("resourceVersionMatch") == "Exact"


def held_with_pods(cluster: Cluster, *, finished: int = 0, blocking: int = 1) -> tuple[str, list[str]]:
    """A held object whose finished ranks sort first and whose remaining pods sort last: a read that stopped
    early would see only the finished ones and wrongly find nothing remaining."""
    runtime = cluster.runtime()
    node = cluster.node("n1")
    execution, _ = cluster.held_after_execution("ft-7", runtime=runtime, admission=1)
    for i in range(finished):
        cluster.pod("ft-7", node=node, execution=execution, phase="Succeeded", name=f"a-done-{i}")
    remaining = [cluster.pod("ft-7", node=node, execution=execution, name=f"z-running-{i}") for i in range(blocking)]
    return f"{cluster.namespace}/ft-7", remaining


async def test_500_on_the_trainjob_read(
    make_adapter: MakeAdapter, kind: str, cluster: Cluster, dispatch_lab: DispatchLab
) -> None:
    adapter = await make_adapter(kind)
    ref, _ = held_with_pods(cluster, blocking=0)
    dispatch_lab.hooks.faults(FaultRule("500", verbs=frozenset({"get"}), resources=frozenset({"trainjobs"}), count=1))
    revision = dispatch_lab.revision()
    with pytest.raises(UnreachableError, match="500 InternalError"):
        await adapter.release(ref)
    assert dispatch_lab.revision() == revision
    assert await adapter.release(ref) == Execution("ft-7", "1", 2)  # the fault was spent


@pytest.mark.parametrize("pod_read", ["pinned", "full"])
async def test_429_on_the_pod_list(
    make_adapter: MakeAdapter, kind: str, cluster: Cluster, dispatch_lab: DispatchLab, pod_read: str
) -> None:
    adapter = await make_adapter(kind, pod_read=pod_read)
    ref, _ = held_with_pods(cluster, blocking=0)
    dispatch_lab.hooks.faults(FaultRule("429", verbs=LIST, resources=PODS, count=1, retry_after_seconds=2))
    revision = dispatch_lab.revision()
    with pytest.raises(UnreachableError, match="throttling"):
        await adapter.release(ref)
    assert dispatch_lab.revision() == revision


async def test_500_on_the_pinned_list_is_raised_not_taken_for_a_refusal(
    make_adapter: MakeAdapter, kind: str, cluster: Cluster, dispatch_lab: DispatchLab
) -> None:
    adapter = await make_adapter(kind, pod_read="pinned")
    ref, _ = held_with_pods(cluster, blocking=0)
    dispatch_lab.hooks.faults(FaultRule("500", count=1), when=exact)
    revision = dispatch_lab.revision()
    with pytest.raises(UnreachableError, match="500"):
        await adapter.release(ref)
    assert dispatch_lab.revision() == revision


async def test_409_on_the_admitting_write_then_one_admission(
    make_adapter: MakeAdapter, kind: str, cluster: Cluster, dispatch_lab: DispatchLab
) -> None:
    adapter = await make_adapter(kind)
    ref, _ = held_with_pods(cluster, blocking=0)
    dispatch_lab.hooks.faults(
        FaultRule("409", verbs=frozenset({"update"}), resources=frozenset({"trainjobs"}), count=1)
    )
    mark = dispatch_lab.recorder.mark()
    # the injected 409 is retried inside the release (conflicts.py): the check runs again, one admission
    assert await adapter.release(ref) == Execution("ft-7", "1", 2)
    assert [str(c.status) for c in dispatch_lab.recorder.since(mark) if c.writes] == ["409", "200"]
    assert cluster.trainjob_object("ft-7")["metadata"]["annotations"][v.ANNOTATION_ADMISSION] == "2"


@pytest.mark.parametrize("pod_read", ["pinned", "full"])
async def test_410_on_a_continue_token_restarts_the_read(
    make_adapter: MakeAdapter, kind: str, cluster: Cluster, dispatch_lab: DispatchLab, pod_read: str
) -> None:
    """A page expires mid-list: the read starts over (full) or falls back to the full list (pinned); the pod
    on the last page is still found."""
    adapter = await make_adapter(kind, pod_read=pod_read, page_size=1)
    ref, remaining = held_with_pods(cluster, finished=3)
    injector = dispatch_lab.hooks.faults(FaultRule("410", verbs=LIST, resources=PODS, count=1), when=continued)
    mark = dispatch_lab.recorder.mark()
    with pytest.raises(PodsRemainError) as refused:
        await adapter.release(ref)
    assert [p.name for p in refused.value.remaining] == remaining
    assert [kind for _, _, kind in injector.log] == ["410"]
    lists = [c for c in dispatch_lab.recorder.since(mark) if c.path.endswith("/pods")]
    expired = next(i for i, c in enumerate(lists) if c.status == 410)
    after = lists[expired + 1]
    assert "continue" not in after.query
    assert "labelSelector" not in after.query


@pytest.mark.parametrize("pod_read", ["pinned", "full"])
async def test_pages_that_keep_expiring_give_up_without_admitting(
    make_adapter: MakeAdapter, kind: str, cluster: Cluster, dispatch_lab: DispatchLab, pod_read: str
) -> None:
    adapter = await make_adapter(kind, pod_read=pod_read, page_size=1)
    ref, _ = held_with_pods(cluster, finished=2, blocking=0)
    dispatch_lab.hooks.faults(FaultRule("410", verbs=LIST, resources=PODS), when=continued)
    revision = dispatch_lab.revision()
    with pytest.raises(UnreachableError, match="kept expiring"):
        await adapter.release(ref)
    assert dispatch_lab.revision() == revision


@pytest.mark.parametrize("fault", ["400", "410", "504"])
async def test_a_refused_pinned_list_falls_back_to_the_full_list(
    make_adapter: MakeAdapter, kind: str, cluster: Cluster, dispatch_lab: DispatchLab, fault: str
) -> None:
    """A server that refuses `resourceVersionMatch=Exact` (or whose snapshot expired): the full list decides."""
    adapter = await make_adapter(kind, pod_read="pinned", page_size=2)
    ref, remaining = held_with_pods(cluster, finished=2)

    reasons = {"400": "BadRequest", "410": "Expired", "504": "Timeout"}

    async def refuse(request: web.Request, handler: Handler) -> web.StreamResponse:
        raise ApiError(int(fault), reasons[fault], "resourceVersionMatch=Exact refused by the adapter test")

    dispatch_lab.hooks.add(refuse, when=exact)
    mark = dispatch_lab.recorder.mark()
    with pytest.raises(PodsRemainError) as refused:
        await adapter.release(ref)
    assert [p.name for p in refused.value.remaining] == remaining
    lists = [c for c in dispatch_lab.recorder.since(mark) if c.path.endswith("/pods")]
    assert [str(c.status) for c in lists if exact_query(c.query)] == [fault]
    assert any("labelSelector" not in c.query for c in lists)


def exact_query(query: object) -> bool:
    return isinstance(query, dict) and query.get("resourceVersionMatch") == "Exact"


async def test_a_hanging_call_times_out(
    make_adapter: MakeAdapter, kind: str, cluster: Cluster, dispatch_lab: DispatchLab
) -> None:
    adapter = await make_adapter(kind, request_timeout=(2.0, 0.3))
    ref, _ = held_with_pods(cluster, blocking=0)
    dispatch_lab.hooks.faults(FaultRule("hang", verbs=LIST, resources=PODS, count=1, hang_seconds=1.0))
    revision = dispatch_lab.revision()
    with pytest.raises(UnreachableError, match=r"could not be reached .*timed out"):
        await adapter.release(ref)
    assert dispatch_lab.revision() == revision


async def test_a_dropped_connection_is_retryable(
    make_adapter: MakeAdapter, kind: str, cluster: Cluster, dispatch_lab: DispatchLab
) -> None:
    adapter = await make_adapter(kind)
    ref, _ = held_with_pods(cluster, blocking=0)
    dispatch_lab.hooks.faults(FaultRule("drop", verbs=frozenset({"get"}), resources=frozenset({"nodes", "trainjobs"})))
    revision = dispatch_lab.revision()
    with pytest.raises(UnreachableError, match="could not be reached"):
        await adapter.release(ref)
    assert dispatch_lab.revision() == revision

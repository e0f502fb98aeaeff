"""Release, hold and open through the real clients: one admission per check, duplicates harmless (DESIGN §3.6)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiohttp import web

from airflow_provider_dispatch.dispatch import vocabulary as v
from airflow_provider_dispatch.dispatch.assessment import Execution, State
from airflow_provider_dispatch.dispatch.errors import (
    AlreadyExistsError,
    SuspensionNotObservedError,
    UnreachableError,
)
from airflow_provider_dispatch_lab.scenario import manifests

from .cluster import Cluster
from .conftest import DispatchLab, Handler, MakeAdapter
from .either import Either
from .writers import is_trainjob_put


def manifest(cluster: Cluster, runtime: str, name: str = "ft-7", job_id: str | None = None) -> dict[str, Any]:
    body = manifests.trainjob(name, job_id=job_id, runtime=runtime, suspend=None)
    body["metadata"]["namespace"] = cluster.namespace
    return body


async def test_open_creates_held_then_releases_and_a_retry_continues(
    adapter: Either, cluster: Cluster, dispatch_lab: DispatchLab
) -> None:
    runtime = cluster.runtime()
    body = manifest(cluster, runtime)
    mark = dispatch_lab.recorder.mark()
    # Trainer has not observed the hold of the new object yet: open stops after the create.
    with pytest.raises(SuspensionNotObservedError):
        await adapter.open(body)
    created = cluster.trainjob_object("ft-7")
    assert created["spec"]["suspend"] is True
    assert v.ANNOTATION_ADMISSION not in created["metadata"].get("annotations", {})
    assert [(c.method, c.status) for c in dispatch_lab.recorder.since(mark) if c.writes] == [("POST", 201)]

    cluster.trainer_observes("ft-7")
    cluster.jobset("ft-7")
    mark = dispatch_lab.recorder.mark()
    assert await adapter.open(body) == Execution("ft-7", "1", 1)
    assert [(c.method, c.status) for c in dispatch_lab.recorder.since(mark) if c.writes] == [
        ("POST", 409),
        ("PUT", 200),
    ]
    written = cluster.trainjob_object("ft-7")
    assert (written["metadata"]["annotations"][v.ANNOTATION_ADMISSION], written["spec"]["suspend"]) == ("1", False)
    assert await adapter.open(body) == Execution("ft-7", "1", 1)  # an open retried after success: no admission


async def test_open_refuses_a_namesake_of_another_job(
    adapter: Either, cluster: Cluster, dispatch_lab: DispatchLab
) -> None:
    runtime = cluster.runtime()
    cluster.trainjob("ft-7", runtime=runtime, job_id="someone-else")
    rv, revision = cluster.resource_version("ft-7"), dispatch_lab.revision()
    with pytest.raises(AlreadyExistsError, match="already exists as another object"):
        await adapter.open(manifest(cluster, runtime))
    assert (cluster.resource_version("ft-7"), dispatch_lab.revision()) == (rv, revision)


class Barrier:
    """Holds each matching request until `parties` have arrived, so concurrent checks all read first."""

    def __init__(self, parties: int) -> None:
        self.parties = parties
        self.arrived = 0
        self.event = asyncio.Event()

    async def hook(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        self.arrived += 1
        if self.arrived >= self.parties:
            self.event.set()
        async with asyncio.timeout(30):  # a bound, not a synchronisation
            await self.event.wait()
        return await handler(request)


@pytest.mark.parametrize("kinds", [("sync", "async"), ("async", "async"), ("sync", "sync")])
async def test_concurrent_releases_admit_once(
    make_adapter: MakeAdapter, cluster: Cluster, dispatch_lab: DispatchLab, kinds: tuple[str, str]
) -> None:
    """Two tries release at once (anchors §0.6): both checks pass, the conditional write admits one."""
    runtime = cluster.runtime()
    cluster.held_after_execution("ft-7", runtime=runtime, admission=4)
    first, second = [await make_adapter(kind) for kind in kinds]
    barrier = Barrier(2)
    dispatch_lab.hooks.add(barrier.hook, when=is_trainjob_put)
    mark = dispatch_lab.recorder.mark()
    ref = f"{cluster.namespace}/ft-7"
    results = await asyncio.gather(first.release(ref), second.release(ref), return_exceptions=True)
    # One write wins; the other gets 409, reads the object again, finds it running, and returns the execution
    # the winner admitted: one admission, both callers told the same identity.
    assert results == [Execution("ft-7", "1", 5), Execution("ft-7", "1", 5)]
    assert sorted(str(c.status) for c in dispatch_lab.recorder.since(mark) if c.writes) == ["200", "409"]
    assert cluster.trainjob_object("ft-7")["metadata"]["annotations"][v.ANNOTATION_ADMISSION] == "5"
    dispatch_lab.hooks.clear()
    assert await first.release(ref) == Execution("ft-7", "1", 5)  # and later calls find it running


async def test_release_of_a_running_object_returns_its_execution_and_writes_nothing(
    adapter: Either, cluster: Cluster, dispatch_lab: DispatchLab
) -> None:
    runtime = cluster.runtime()
    node = cluster.node("n1")
    execution = cluster.running_execution("ft-7", runtime=runtime, admission=2, observed=False)
    cluster.pod("ft-7", node=node, execution=execution)
    revision, mark = dispatch_lab.revision(), dispatch_lab.recorder.mark()
    assert await adapter.release(f"{cluster.namespace}/ft-7") == execution
    assert dispatch_lab.revision() == revision
    assert {c.method for c in dispatch_lab.recorder.since(mark)} == {"GET"}


async def test_a_response_lost_after_the_write_is_retried_without_a_second_admission(
    adapter: Either, cluster: Cluster, dispatch_lab: DispatchLab
) -> None:
    async def drop_after_write(request: web.Request, handler: Handler) -> web.StreamResponse:
        await handler(request)
        if request.transport is not None:
            request.transport.abort()
        raise ConnectionResetError("the answer was lost (adapter test)")

    runtime = cluster.runtime()
    cluster.held_after_execution("ft-7", runtime=runtime, admission=1)
    dispatch_lab.hooks.add(drop_after_write, when=is_trainjob_put)
    ref = f"{cluster.namespace}/ft-7"
    mark = dispatch_lab.recorder.mark()
    if adapter.kind == "sync":  # urllib3 retries are off in the adapter's own client: the loss is reported
        with pytest.raises(UnreachableError) as lost:
            await adapter.release(ref)
        assert [str(c.status) for c in dispatch_lab.recorder.since(mark) if c.writes] == ["dropped"]
        assert "may or may not have been applied" in str(lost.value)
    else:
        # aiohttp re-sends an idempotent PUT once on a dropped keep-alive connection; conditional, it is refused
        # with 409, and the release reads the object again: it runs the execution the first PUT admitted.
        assert await adapter.release(ref) == Execution("ft-7", "1", 2)
        assert [str(c.status) for c in dispatch_lab.recorder.since(mark) if c.writes] == ["dropped", "409"]
    assert cluster.trainjob_object("ft-7")["metadata"]["annotations"][v.ANNOTATION_ADMISSION] == "2"
    dispatch_lab.hooks.clear()
    revision = dispatch_lab.revision()
    assert await adapter.release(ref) == Execution("ft-7", "1", 2)
    assert dispatch_lab.revision() == revision


async def test_hold_suspends_once_and_release_waits_for_trainer_to_observe_it(
    adapter: Either, cluster: Cluster, dispatch_lab: DispatchLab
) -> None:
    runtime = cluster.runtime()
    execution = cluster.running_execution("ft-7", runtime=runtime, admission=1)
    cluster.jobset("ft-7", suspend=False)
    ref = f"{cluster.namespace}/ft-7"
    mark = dispatch_lab.recorder.mark()
    assert await adapter.hold(ref) == execution
    assert await adapter.hold(ref) == execution
    assert [(c.method, c.status) for c in dispatch_lab.recorder.since(mark) if c.writes] == [("PUT", 200)]
    assert cluster.trainjob_object("ft-7")["spec"]["suspend"] is True
    status = await adapter.inspect(ref)
    assert (status.state, status.cause) == (State.WAITING, "suspension not yet observed")
    with pytest.raises(SuspensionNotObservedError):
        await adapter.release(ref)

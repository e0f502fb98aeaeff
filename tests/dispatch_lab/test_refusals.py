"""Every refusal writes nothing (DESIGN §5), through the real clients: names, objects, permissions, reachability."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from airflow_provider_dispatch.dispatch import vocabulary as v
from airflow_provider_dispatch.dispatch.errors import (
    FinishedError,
    ForbiddenError,
    InvalidNameError,
    NotFoundError,
    NotManagedError,
    SuspensionNotObservedError,
    UnreachableError,
)
from airflow_provider_dispatch_lab.scenario import manifests

from .cluster import Cluster
from .conftest import NO_NODES, READER, DispatchLab, MakeAdapter


@pytest.mark.parametrize("ref", ["ns/a,b", "ns/x=y", "ns/A", "ns/a b", "a/b/c", "ft-7", "ns/-a", "Ns/a", "ns/a\n"])
@pytest.mark.parametrize("operation", ["release", "hold", "inspect", "ceased", "remaining_pods"])
async def test_an_invalid_reference_is_refused_before_anything_is_sent(
    make_adapter: MakeAdapter, kind: str, dispatch_lab: DispatchLab, ref: str, operation: str
) -> None:
    adapter = await make_adapter(kind)
    mark = dispatch_lab.recorder.mark()
    with pytest.raises(InvalidNameError, match=r"not allowed|is empty"):
        await adapter.call(operation, ref)
    assert dispatch_lab.recorder.since(mark) == []


@pytest.mark.parametrize(("namespace", "job_id"), [("ns", "a,b"), ("ns", "a=b"), ("ns", ""), ("a,b", "job")])
async def test_find_refuses_values_that_would_change_the_selector(
    make_adapter: MakeAdapter, kind: str, dispatch_lab: DispatchLab, namespace: str, job_id: str
) -> None:
    adapter = await make_adapter(kind)
    mark = dispatch_lab.recorder.mark()
    with pytest.raises(InvalidNameError):
        await adapter.find(namespace, job_id)
    assert dispatch_lab.recorder.since(mark) == []


async def test_a_missing_trainjob_is_not_found(make_adapter: MakeAdapter, kind: str, cluster: Cluster) -> None:
    adapter = await make_adapter(kind)
    with pytest.raises(NotFoundError, match=f"TrainJob {cluster.namespace}/ghost was not found"):
        await adapter.release(f"{cluster.namespace}/ghost")
    with pytest.raises(NotFoundError, match=re.escape("carries dispatch.phpboyscout.uk/job-id=ghost")):
        await adapter.find(cluster.namespace, "ghost")


async def test_a_trainjob_without_dispatch_labels_is_not_managed(
    make_adapter: MakeAdapter, kind: str, cluster: Cluster, dispatch_lab: DispatchLab
) -> None:
    adapter = await make_adapter(kind)
    runtime = cluster.runtime()
    cluster.trainjob("ft-7", runtime=runtime, dispatch_labels=False)
    cluster.trainer_observes("ft-7")
    revision = dispatch_lab.revision()
    for operation in ("release", "hold", "inspect"):
        with pytest.raises(NotManagedError, match=re.escape("lacks the label dispatch.phpboyscout.uk/job-id")):
            await adapter.call(operation, f"{cluster.namespace}/ft-7")
    assert dispatch_lab.revision() == revision


async def test_missing_write_permission_is_forbidden_after_the_check(
    make_adapter: MakeAdapter, kind: str, cluster: Cluster, dispatch_lab: DispatchLab
) -> None:
    """A writer adapter whose credentials may only read: the API refuses the write (403), nothing changes."""
    adapter = await make_adapter(kind, user=READER)
    runtime = cluster.runtime()
    cluster.held_after_execution("ft-7", runtime=runtime, admission=1)
    revision = dispatch_lab.revision()
    with pytest.raises(
        ForbiddenError, match=re.escape("lack the permission `update trainjobs.trainer.kubeflow.org`")
    ) as refused:
        await adapter.release(f"{cluster.namespace}/ft-7")
    assert not refused.value.retryable
    assert dispatch_lab.revision() == revision


@pytest.mark.parametrize("operation", ["release", "hold", "open"])
async def test_a_read_only_adapter_refuses_writes_before_sending_anything(
    make_adapter: MakeAdapter, kind: str, cluster: Cluster, dispatch_lab: DispatchLab, operation: str
) -> None:
    adapter = await make_adapter(kind, user=READER, read_only=True)
    runtime = cluster.runtime()
    cluster.held_after_execution("ft-7", runtime=runtime, admission=1)
    target: object = f"{cluster.namespace}/ft-7"
    if operation == "open":
        target = {
            **manifests.trainjob("ft-7", runtime=runtime),
            "metadata": {"name": "ft-7", "namespace": cluster.namespace},
        }
    mark = dispatch_lab.recorder.mark()
    with pytest.raises(ForbiddenError, match=f"{cluster.namespace}/ft-7: this dispatch adapter is read-only"):
        await adapter.call(operation, target)
    assert dispatch_lab.recorder.since(mark) == []


async def test_a_read_only_adapter_reads(
    make_adapter: MakeAdapter, kind: str, cluster: Cluster, dispatch_lab: DispatchLab
) -> None:
    adapter = await make_adapter(kind, user=READER, read_only=True)
    runtime = cluster.runtime()
    node = cluster.node("n1")
    _, (pod,) = cluster.held_after_execution("ft-7", runtime=runtime, admission=1, pods_on=[node])
    mark = dispatch_lab.recorder.mark()
    ref = f"{cluster.namespace}/ft-7"
    assert (await adapter.inspect(ref)).remaining[0].name == pod
    assert (await adapter.find(cluster.namespace, "ft-7")).ref == ref
    assert not await adapter.ceased(ref)
    assert [p.name for p in (await adapter.remaining_pods(ref)).remaining] == [pod]
    assert {c.method for c in dispatch_lab.recorder.since(mark)} == {"GET"}


async def test_without_node_permission_cessation_is_not_proven(
    make_adapter: MakeAdapter, kind: str, cluster: Cluster
) -> None:
    adapter = await make_adapter(kind, user=NO_NODES, read_only=True)
    runtime = cluster.runtime()
    node = cluster.node("n1")
    cluster.held_after_execution("ft-7", runtime=runtime, admission=1, pods_on=[node])
    cluster.lose_node(node)
    cluster.taint_out_of_service(node)
    ref = f"{cluster.namespace}/ft-7"
    assert not await adapter.ceased(ref)
    assert f"on {node} (not readable)" in (await adapter.inspect(ref)).detail


async def test_an_unreachable_api_is_retryable(
    make_adapter: MakeAdapter, kind: str, closed_port_kubeconfig: Path
) -> None:
    adapter = await make_adapter(kind, kubeconfig=closed_port_kubeconfig)
    for operation in ("release", "inspect", "ceased"):
        with pytest.raises(UnreachableError, match="could not be reached") as failed:
            await adapter.call(operation, "ml/ft-7")
        assert failed.value.retryable
        assert "writer-token" not in str(failed.value)
        assert "Connection refused" in str(failed.value) or "Connect" in str(failed.value)


@pytest.mark.parametrize("case", ["no Suspended condition", "Suspended False", "JobSet running"])
async def test_suspension_not_yet_observed_is_retryable_and_writes_nothing(
    make_adapter: MakeAdapter, kind: str, cluster: Cluster, dispatch_lab: DispatchLab, case: str
) -> None:
    """dispatch held it, but Trainer/JobSet have not caught up: Jobs may still create pods (DESIGN §3.1). The
    TrainJob carries no record of its execution's pods (held by someone else), so release writes that first,
    and nothing else (fencing.py)."""
    adapter = await make_adapter(kind)
    runtime = cluster.runtime()
    cluster.trainjob("ft-7", runtime=runtime, admission=1)
    if case == "Suspended False":
        cluster.trainer_observes("ft-7", suspended=False)
    if case == "JobSet running":
        cluster.trainer_observes("ft-7")
        cluster.jobset("ft-7", suspend=False)
    before = cluster.trainjob_object("ft-7")
    revision = dispatch_lab.revision()
    with pytest.raises(SuspensionNotObservedError, match="Nothing was admitted") as refused:
        await adapter.release(f"{cluster.namespace}/ft-7")
    assert refused.value.retryable
    assert dispatch_lab.revision() == revision + 1
    after = cluster.trainjob_object("ft-7")
    added = set(after["metadata"]["annotations"]) - set(before["metadata"]["annotations"])
    assert added == {v.ANNOTATION_EXECUTION_PODS}
    assert (after["spec"], after["metadata"]["labels"]) == (before["spec"], before["metadata"]["labels"])
    # a retry writes nothing more: the record is there
    with pytest.raises(SuspensionNotObservedError):
        await adapter.release(f"{cluster.namespace}/ft-7")
    assert dispatch_lab.revision() == revision + 1


async def test_a_finished_trainjob_is_refused(
    make_adapter: MakeAdapter, kind: str, cluster: Cluster, dispatch_lab: DispatchLab
) -> None:
    adapter = await make_adapter(kind)
    runtime = cluster.runtime()
    cluster.held_after_execution("ft-7", runtime=runtime, admission=1)
    cluster.trainer_finishes("ft-7")
    revision = dispatch_lab.revision()
    with pytest.raises(FinishedError, match="has finished"):
        await adapter.release(f"{cluster.namespace}/ft-7")
    assert dispatch_lab.revision() == revision

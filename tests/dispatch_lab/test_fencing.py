"""Node fencing through both real clients (dispatch/fencing.py, anchors §8.1): the hold records the pods it
saw, and a pod whose object vanished while its node could not confirm its end keeps blocking.

Each test drives a TrainJob from running to held through dispatch's own `hold`, so the record is the one the
hold writes; then pods vanish as the hostile cases of anchors §6 make them vanish (a force deletion with grace
0, which is also the second half of Kueue's failure recovery, k8s-apis §4.7), and the node recovers, is fenced
or is deleted.
"""

from __future__ import annotations

import json

import pytest

from airflow_provider_dispatch.dispatch import vocabulary as v
from airflow_provider_dispatch.dispatch.assessment import Execution, State
from airflow_provider_dispatch.dispatch.blocking import Blocking
from airflow_provider_dispatch.dispatch.errors import PodsRemainError
from airflow_provider_dispatch.dispatch.nodes import DEFAULT_CLOCK_SKEW_SECONDS, RETURN_MARGIN_SECONDS
from airflow_provider_dispatch.dispatch.vocabulary import parse_time

from .cluster import A_DAY, Cluster
from .conftest import DispatchLab
from .either import Either


def _running_then_held(cluster: Cluster) -> tuple[str, dict[str, str]]:
    """Execution 1 running with a pod on n1 and one on n2 (and a finished rank on n1); held through dispatch is
    the caller's step. Returns the ref and {node: pod}."""
    execution = cluster.running_execution("ft-7", runtime=cluster.runtime(), admission=1)
    n1, n2 = cluster.node("n1"), cluster.node("n2")
    pods = {
        n1: cluster.pod("ft-7", node=n1, index=0, execution=execution),
        n2: cluster.pod("ft-7", node=n2, index=1, execution=execution),
    }
    cluster.pod("ft-7", node=n1, index=2, execution=execution, phase="Succeeded", name="finished-rank")
    return f"{cluster.namespace}/ft-7", pods


def _observed(cluster: Cluster, pods: dict[str, str], dispatch_lab: DispatchLab) -> None:
    """Trainer and JobSet observe the hold; the Job controller deletes the pods gracefully (Terminating); the
    hold settles (evidence.py)."""
    cluster.trainer_observes("ft-7")
    cluster.jobset("ft-7")
    for pod in pods.values():
        cluster.job_controller_deletes(pod)
    dispatch_lab.settle()


async def test_the_hold_records_the_pods_that_were_not_finished_by_node(adapter: Either, cluster: Cluster) -> None:
    """The hold's record: the unfinished pods by node, their uids, and the API server's time."""
    ref, pods = _running_then_held(cluster)
    assert await adapter.hold(ref) == Execution("ft-7", "1", 1)
    held = cluster.trainjob_object("ft-7")
    assert held["spec"]["suspend"] is True
    record = json.loads(held["metadata"]["annotations"][v.ANNOTATION_EXECUTION_PODS])
    assert (record["admission"], record["nodes"]) == (1, {node: [pod] for node, pod in sorted(pods.items())})
    live = {p.metadata.name: p.metadata.uid for p in cluster.core.list_namespaced_pod(cluster.namespace).items}
    assert record["uids"] == {pod: live[pod] for pod in pods.values()}
    assert record["since"].endswith("Z")  # the API server's time, for the settle (evidence.py)
    # each node's Ready transition as read for the record, and the longest grace of its pods (fencing.py)
    transitions = {node: cluster.core.read_node(node).status.conditions[0].last_transition_time for node in pods}
    assert {node: parse_time(t) for node, t in record["ready"].items()} == transitions
    assert record["grace"] == dict.fromkeys(pods, 30)

    # a second hold (a retry) leaves the object and its record as they are
    rv = cluster.resource_version("ft-7")
    await adapter.hold(ref)
    assert cluster.resource_version("ft-7") == rv


async def test_a_pod_force_deleted_on_a_lost_node_blocks_until_the_node_is_fenced(
    adapter: Either, cluster: Cluster, dispatch_lab: DispatchLab
) -> None:
    ref, pods = _running_then_held(cluster)
    await adapter.hold(ref)
    _observed(cluster, pods, dispatch_lab)
    (lost, healthy) = sorted(pods)
    cluster.lose_node(lost)
    # the healthy node's kubelet confirms its pod's end; the lost node's pod is force-deleted
    cluster.core.delete_namespaced_pod(pods[healthy], cluster.namespace, grace_period_seconds=0)
    cluster.core.delete_namespaced_pod(pods[lost], cluster.namespace, grace_period_seconds=0)
    assert pods[lost] not in cluster.pod_names()

    rv, revision, mark = cluster.resource_version("ft-7"), dispatch_lab.revision(), dispatch_lab.recorder.mark()
    with pytest.raises(PodsRemainError) as refused:
        await adapter.release(ref)
    (remaining,) = refused.value.remaining
    assert (remaining.name, remaining.node.name, remaining.node.label) == (pods[lost], lost, "Ready=Unknown")
    assert remaining.blocking is Blocking.VANISHED
    assert not refused.value.ceased
    assert f"{pods[lost]} on {lost} (Ready=Unknown)" in str(refused.value)
    assert "deleted from the API" in str(refused.value)
    assert (cluster.resource_version("ft-7"), dispatch_lab.revision()) == (rv, revision)
    assert not [c for c in dispatch_lab.recorder.since(mark) if c.writes]

    report = await adapter.remaining_pods(ref)
    assert [(p.name, p.node.name) for p in report.remaining] == [(pods[lost], lost)]
    status = await adapter.inspect(ref)
    assert status.state is State.WAITING
    assert pods[lost] in status.detail
    assert not await adapter.ceased(ref)

    # the operator confirms the shutdown and fences the node: proof; nothing is left for PodGC to delete
    cluster.taint_out_of_service(lost)
    assert await adapter.ceased(ref)
    execution = await adapter.release(ref)
    assert execution == Execution("ft-7", "1", 2)
    admitted = cluster.trainjob_object("ft-7")
    assert v.ANNOTATION_EXECUTION_PODS not in admitted["metadata"]["annotations"]


@pytest.mark.parametrize("recovery", ["Ready again", "deleted"])
async def test_a_vanished_pod_stops_blocking_when_its_node_recovers_or_is_deleted(
    adapter: Either, cluster: Cluster, dispatch_lab: DispatchLab, recovery: str
) -> None:
    ref, pods = _running_then_held(cluster)
    await adapter.hold(ref)
    _observed(cluster, pods, dispatch_lab)
    lost = sorted(pods)[0]
    cluster.lose_node(lost)
    for pod in pods.values():
        cluster.core.delete_namespaced_pod(pod, cluster.namespace, grace_period_seconds=0)
    with pytest.raises(PodsRemainError):
        await adapter.release(ref)

    if recovery == "Ready again":
        # back from the partition: its kubelet stops what was deleted meanwhile once it relists, within the pod's
        # grace (the default 30 s here), so the node must have reported Ready for that plus the margin first
        cluster.set_ready(lost, "True", ready_for=0)
        with pytest.raises(PodsRemainError) as refused:
            await adapter.release(ref)
        assert "has been Ready only briefly (0s so far" in str(refused.value)
        cluster.set_ready(lost, "True", ready_for=30 + int(RETURN_MARGIN_SECONDS) - 1)
        with pytest.raises(PodsRemainError):
            await adapter.release(ref)
        cluster.set_ready(lost, "True", ready_for=30 + int(RETURN_MARGIN_SECONDS))
    else:
        # a deleted Node is proof only once the pods' grace plus the margin and the skew bound have passed since a
        # writer's check first found it gone (nodes.py): the release records when, and refuses until then
        cluster.delete_node(lost)
        with pytest.raises(PodsRemainError) as refused:
            await adapter.release(ref)
        assert f"on {lost} (gone, not yet proof)" in str(refused.value)
        wait = 30 + RETURN_MARGIN_SECONDS + DEFAULT_CLOCK_SKEW_SECONDS
        dispatch_lab.lab.call(lambda: dispatch_lab.lab.clock.advance(wait))
    assert await adapter.release(ref) == Execution("ft-7", "1", 2)


@pytest.mark.parametrize("ready_for", [A_DAY, 0], ids=["ready-for-long", "ready-just-before-the-hold"])
async def test_a_ready_node_with_the_pods_gone_costs_one_node_read_and_admits(
    adapter: Either, cluster: Cluster, dispatch_lab: DispatchLab, ready_for: int
) -> None:
    """The common path: every kubelet confirmed; the recorded nodes are read once each, and are Ready. A node
    that became Ready just before the hold (a new node, one back from a repair) costs nothing more: the record
    kept its Ready transition, and a node Ready throughout since saw every deletion as it happened."""
    ref, pods = _running_then_held(cluster)
    for node in pods:
        cluster.set_ready(node, "True", ready_for=ready_for)
    await adapter.hold(ref)
    _observed(cluster, pods, dispatch_lab)
    for pod in pods.values():
        cluster.core.delete_namespaced_pod(pod, cluster.namespace, grace_period_seconds=0)
    mark = dispatch_lab.recorder.mark()
    assert await adapter.release(ref) == Execution("ft-7", "1", 2)
    node_reads = sorted(c.path for c in dispatch_lab.recorder.since(mark) if c.path.startswith("/api/v1/nodes/"))
    assert node_reads == sorted(f"/api/v1/nodes/{node}" for node in pods)

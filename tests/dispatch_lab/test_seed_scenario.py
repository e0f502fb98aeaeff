"""The seed's scenario in API terms, through both real clients: a lost node, its taint, PodGC, the one write.

never-two-executions.txt: a suspended TrainJob's pods stay Terminating on a lost node; nothing re-admits the
object until they are gone; the wait ends when the operator taints the node out-of-service and PodGC removes
the pods. DESIGN §3-§4; k8s-apis §5.3-§5.4.
"""

from __future__ import annotations

import pytest

from airflow_provider_dispatch.dispatch import vocabulary as v
from airflow_provider_dispatch.dispatch.assessment import Execution, State
from airflow_provider_dispatch.dispatch.errors import PodsRemainError

from .cluster import NOT_READY, Cluster
from .conftest import DispatchLab
from .either import Either


async def test_lost_node_blocks_until_tainted_and_gc_then_one_write_admits(
    adapter: Either, cluster: Cluster, dispatch_lab: DispatchLab
) -> None:
    runtime = cluster.runtime(jobs=("launcher", "node"))
    node = cluster.node("n1")
    ref = f"{cluster.namespace}/ft-7"
    _, pods = cluster.held_after_execution(
        "ft-7", runtime=runtime, admission=1, pods_on=[node, node], jobs=("launcher", "node")
    )
    cluster.lose_node(node)

    # A pod Terminating on a node whose Ready=Unknown: release refused, pods and node named, nothing written.
    rv, revision, mark = cluster.resource_version("ft-7"), dispatch_lab.revision(), dispatch_lab.recorder.mark()
    with pytest.raises(PodsRemainError) as refused:
        await adapter.release(ref)
    assert sorted(p.name for p in refused.value.remaining) == sorted(pods)
    assert {p.node.name for p in refused.value.remaining} == {node}
    for pod in pods:
        assert pod in str(refused.value)
    assert f"on {node} (Ready=Unknown)" in str(refused.value)
    assert refused.value.retryable
    assert not refused.value.ceased
    assert (cluster.resource_version("ft-7"), dispatch_lab.revision()) == (rv, revision)
    assert not [c for c in dispatch_lab.recorder.since(mark) if c.writes]
    assert not await adapter.ceased(ref)

    # The operator confirms the shutdown: out-of-service and not Ready is proof; the pods are still there.
    cluster.taint_out_of_service(node)
    assert await adapter.ceased(ref)
    with pytest.raises(PodsRemainError) as still:
        await adapter.release(ref)
    assert still.value.ceased
    assert "Ready=Unknown, out-of-service" in str(still.value)
    assert cluster.resource_version("ft-7") == rv

    # PodGC force-deletes them: the next release admits A+1 in one write, with the runtime patch.
    for pod in pods:
        cluster.podgc_force_deletes(pod)
    revision, mark = dispatch_lab.revision(), dispatch_lab.recorder.mark()
    execution = await adapter.release(ref)
    assert execution == Execution("ft-7", "1", 2)
    writes = [c for c in dispatch_lab.recorder.since(mark) if c.writes]
    assert [(c.method, c.path, c.status) for c in writes] == [("PUT", v.TRAINJOB.path(cluster.namespace, "ft-7"), 200)]
    assert dispatch_lab.revision() == revision + 1
    written = cluster.trainjob_object("ft-7")
    assert written["metadata"]["annotations"][v.ANNOTATION_ADMISSION] == "2"
    assert written["spec"]["suspend"] is False
    (patch,) = [p for p in written["spec"]["runtimePatches"] if p["manager"] == v.RUNTIME_PATCH_MANAGER]
    jobs = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    assert [job["name"] for job in jobs] == ["launcher", "node"]
    for job in jobs:
        assert job["template"]["spec"]["template"]["metadata"]["labels"] == {
            v.LABEL_JOB_ID: "ft-7",
            v.LABEL_SUBMISSION: "1",
            v.POD_LABEL_ADMISSION: "2",
        }


async def test_out_of_service_on_a_ready_node_is_not_proof(adapter: Either, cluster: Cluster) -> None:
    runtime = cluster.runtime()
    node = cluster.node("n1")
    cluster.held_after_execution("ft-7", runtime=runtime, admission=1, pods_on=[node])
    cluster.taint_out_of_service(node)
    ref = f"{cluster.namespace}/ft-7"
    assert not await adapter.ceased(ref)
    report = await adapter.remaining_pods(ref)
    (pod,) = report.remaining
    assert (pod.node.label, pod.ceased) == ("Ready=True, out-of-service", False)


@pytest.mark.parametrize(
    ("ready", "taint", "ceased", "label"),
    [
        ("True", None, False, "Ready=True"),
        ("True", "NoExecute", False, "Ready=True, out-of-service"),
        ("False", None, False, "Ready=False"),
        ("False", "NoExecute", True, "Ready=False, out-of-service"),
        ("Unknown", None, False, "Ready=Unknown"),
        ("Unknown", "NoExecute", True, "Ready=Unknown, out-of-service"),
        ("Unknown", "NoSchedule", True, "Ready=Unknown, out-of-service"),
        (None, "NoSchedule", True, "Ready=Unknown, out-of-service"),
        # a Node deleted is proof only once a writer's check recorded since when and the wait passed (nodes.py)
        ("gone", None, False, "gone, not yet proof"),
    ],
)
async def test_cessation_by_node_state(
    adapter: Either, cluster: Cluster, ready: str | None, taint: str | None, ceased: bool, label: str
) -> None:
    """DESIGN §4 through the API: deleted (not on a single 404: test_fencing.py), or out-of-service (any value, any
    effect) and not Ready."""
    runtime = cluster.runtime()
    node = cluster.node("n1", ready="True" if ready == "gone" else ready)
    cluster.held_after_execution("ft-7", runtime=runtime, admission=3, pods_on=[node])
    if ready == "False":
        cluster.add_taint(node, NOT_READY)
    if taint is not None:
        cluster.taint_out_of_service(node, effect=taint, value="anything")
    if ready == "gone":
        cluster.delete_node(node)
    ref = f"{cluster.namespace}/ft-7"
    assert await adapter.ceased(ref) is ceased
    status = await adapter.inspect(ref)
    assert status.state is State.WAITING
    assert f"on {node} ({label})" in status.detail
    assert status.ceased is ceased
    assert status.execution == Execution("ft-7", "1", 3)

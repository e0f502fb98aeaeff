"""Which pods block, through the real clients: the two selections (DESIGN §3.3) and the phases (§3.4)."""

from __future__ import annotations

import pytest

from airflow_provider_dispatch.dispatch import vocabulary as v
from airflow_provider_dispatch.dispatch.assessment import Execution
from airflow_provider_dispatch.dispatch.errors import PodsRemainError

from .cluster import JOB_TRACKING_FINALIZER, TIMESTAMP, Cluster
from .conftest import DispatchLab
from .either import Either

OTHER_MANAGER = "platform.example.com/node-pinning"


def other_patch() -> dict[str, object]:
    """A runtime patch of another manager that sets its own pod labels and none of dispatch's."""
    labels = {"platform.example.com/pool": "a100"}
    return {
        "manager": OTHER_MANAGER,
        "trainingRuntimeSpec": {
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {"name": "node", "template": {"spec": {"template": {"metadata": {"labels": labels}}}}}
                    ]
                }
            }
        },
    }


async def test_a_rewritten_runtime_patch_does_not_hide_pods(
    adapter: Either, cluster: Cluster, dispatch_lab: DispatchLab
) -> None:
    """Someone replaced dispatch's patch: the Job controller's pods carry jobset-name but no dispatch labels."""
    runtime = cluster.runtime()
    node = cluster.node("n1")
    cluster.trainjob("ft-7", runtime=runtime, admission=1, runtime_patches=[other_patch()])
    cluster.trainer_observes("ft-7")
    cluster.jobset("ft-7")
    hidden = cluster.pod("ft-7", node=node, execution=None)
    cluster.job_controller_deletes(hidden)
    cluster.dispatch_recorded_hold("ft-7", 1)
    revision = dispatch_lab.revision()
    with pytest.raises(PodsRemainError) as refused:
        await adapter.release(f"{cluster.namespace}/ft-7")
    assert [p.name for p in refused.value.remaining] == [hidden]
    assert dispatch_lab.revision() == revision


async def test_pods_that_lost_the_jobset_label_are_found_by_dispatch_labels(adapter: Either, cluster: Cluster) -> None:
    runtime = cluster.runtime()
    node = cluster.node("n1")
    execution, _ = cluster.held_after_execution("ft-7", runtime=runtime, admission=1)
    relabelled = cluster.pod("ft-7", node=node, execution=execution, jobset_label=False)
    with pytest.raises(PodsRemainError) as refused:
        await adapter.release(f"{cluster.namespace}/ft-7")
    assert [p.name for p in refused.value.remaining] == [relabelled]


async def test_other_objects_pods_do_not_block(adapter: Either, cluster: Cluster) -> None:
    """Another TrainJob's pods, another submission of the same job id, and pods elsewhere do not count."""
    runtime = cluster.runtime()
    node = cluster.node("n1")
    cluster.held_after_execution("ft-7", runtime=runtime, admission=1)
    cluster.pod("ft-8", node=node, execution=Execution("ft-8", "1", 1))
    cluster.pod("ft-7x", node=node, execution=Execution("ft-7", "2", 1))
    cluster.pod("ft-7-node", node=node, execution=None)
    elsewhere = Cluster(cluster.api, f"{cluster.namespace}-b")
    elsewhere.core.create_namespace({"metadata": {"name": elsewhere.namespace}})
    elsewhere.pod("ft-7", node=node, execution=Execution("ft-7", "1", 1))
    assert await adapter.release(f"{cluster.namespace}/ft-7") == Execution("ft-7", "1", 2)


@pytest.mark.parametrize("phase", ["Succeeded", "Failed"])
async def test_a_finished_ranks_pod_does_not_block(adapter: Either, cluster: Cluster, phase: str) -> None:
    """The kubelet reported the rank's end; the pod waits for deletion behind the Job's finalizer."""
    runtime = cluster.runtime()
    node = cluster.node("n1")
    execution, _ = cluster.held_after_execution("ft-7", runtime=runtime, admission=1)
    finished = cluster.pod("ft-7", node=node, execution=execution, phase=phase, finalizers=[JOB_TRACKING_FINALIZER])
    cluster.job_controller_deletes(finished)
    assert cluster.core.read_namespaced_pod(finished, cluster.namespace).metadata.deletion_timestamp is not None
    ref = f"{cluster.namespace}/ft-7"
    assert (await adapter.remaining_pods(ref)).drained
    assert await adapter.release(ref) == Execution("ft-7", "1", 2)


async def test_a_kueue_failure_recovery_pod_blocks_until_its_node_ceased(adapter: Either, cluster: Cluster) -> None:
    """Kueue's failure recovery wrote Failed on an unreachable node without proof (k8s-apis §4.7): it blocks
    until the node is out-of-service and not Ready; then release admits although the pod object lingers."""
    runtime = cluster.runtime()
    node = cluster.node("n1")
    execution, _ = cluster.held_after_execution("ft-7", runtime=runtime, admission=1)
    recovery = {
        "type": v.CONDITION_KUEUE_FAILURE_RECOVERY,
        "status": "True",
        "reason": "KueueForcefullyDeleted",
        "message": "set by the adapter tests",
        "lastTransitionTime": TIMESTAMP,
    }
    cluster.lose_node(node)
    failed = cluster.pod(
        "ft-7",
        node=node,
        execution=execution,
        phase="Failed",
        conditions=[recovery],
        finalizers=[JOB_TRACKING_FINALIZER],
    )
    cluster.core.delete_namespaced_pod(failed, cluster.namespace, grace_period_seconds=0)
    ref = f"{cluster.namespace}/ft-7"
    with pytest.raises(PodsRemainError) as refused:
        await adapter.release(ref)
    (pod,) = refused.value.remaining
    assert (pod.name, pod.phase, pod.blocking.value) == (
        failed,
        "Failed",
        "marked Failed by Kueue failure recovery without proof of cessation",
    )
    cluster.taint_out_of_service(node)
    assert await adapter.release(ref) == Execution("ft-7", "1", 2)
    assert failed in cluster.pod_names()


async def test_an_unscheduled_pod_blocks_but_counts_as_ceased(adapter: Either, cluster: Cluster) -> None:
    """A Pending pod with no node runs nothing, but could still be bound: release waits for its deletion."""
    runtime = cluster.runtime()
    execution, _ = cluster.held_after_execution("ft-7", runtime=runtime, admission=1)
    pending = cluster.pod("ft-7", node=None, execution=execution, phase="Pending")
    ref = f"{cluster.namespace}/ft-7"
    with pytest.raises(PodsRemainError) as refused:
        await adapter.release(ref)
    assert f"{pending} on no node (not scheduled)" in str(refused.value)
    assert await adapter.ceased(ref)

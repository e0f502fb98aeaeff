"""The garbage collector and the three propagation policies, on Jobs owning pods (no Job controller here)."""

from __future__ import annotations

from typing import Any

from airflow_provider_dispatch_lab.scenario import manifests
from airflow_provider_dispatch_lab.simulated.workloads.garbage_collector import GarbageCollector

from .waiting import wait_for
from .workload_steps import Workloads, unique

CONTROLLERS = [GarbageCollector]


def _owner(workloads: Workloads) -> Any:
    """A suspended Job: with no Job controller running it is just an owner."""
    name = unique("owner")
    body = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "suspend": True,
            "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox:1.36"}]}},
        },
    }
    return workloads.batch.create_namespaced_job(workloads.namespace, body)


def _reference(owner: Any, *, block: bool = True) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": owner.metadata.name,
        "uid": owner.metadata.uid,
        "controller": True,
        "blockOwnerDeletion": block,
    }


def _dependent(workloads: Workloads, *references: dict[str, Any], node: str | None = None) -> str:
    name = unique("dep")
    pod = manifests.pod(name, node_name=node, grace_seconds=30)
    pod["metadata"]["ownerReferences"] = list(references)
    workloads.core.create_namespaced_pod(workloads.namespace, pod)
    return name


def _pod(workloads: Workloads, name: str, predicate: Any) -> Any:
    return wait_for(workloads.core.list_namespaced_pod, name, predicate, namespace=workloads.namespace)


def _job(workloads: Workloads, name: str, predicate: Any) -> Any:
    return wait_for(workloads.batch.list_namespaced_job, name, predicate, namespace=workloads.namespace)


def test_background_deletes_the_dependents_of_a_deleted_owner(workloads: Workloads) -> None:
    owner = _owner(workloads)
    pods = [_dependent(workloads, _reference(owner)) for _ in range(2)]
    workloads.batch.delete_namespaced_job(owner.metadata.name, workloads.namespace, propagation_policy="Background")
    for pod in pods:
        assert _pod(workloads, pod, lambda p: p is None) is None


def test_foreground_keeps_the_owner_until_its_blocking_dependents_are_gone(workloads: Workloads) -> None:
    owner = _owner(workloads)
    pod = _dependent(workloads, _reference(owner), node="n1")  # scheduled: its deletion is graceful
    workloads.batch.delete_namespaced_job(owner.metadata.name, workloads.namespace, propagation_policy="Foreground")
    terminating = _pod(workloads, pod, lambda p: p is not None and p.metadata.deletion_timestamp is not None)
    assert terminating.metadata.deletion_timestamp is not None
    waiting = workloads.batch.read_namespaced_job(owner.metadata.name, workloads.namespace)
    assert waiting.metadata.deletion_timestamp is not None
    assert waiting.metadata.finalizers == ["foregroundDeletion"]
    workloads.confirm_termination(pod)
    assert _job(workloads, owner.metadata.name, lambda j: j is None) is None


def test_a_non_blocking_dependent_does_not_hold_a_foreground_deletion(workloads: Workloads) -> None:
    owner = _owner(workloads)
    pod = _dependent(workloads, _reference(owner, block=False), node="n1")
    workloads.batch.delete_namespaced_job(owner.metadata.name, workloads.namespace, propagation_policy="Foreground")
    assert _job(workloads, owner.metadata.name, lambda j: j is None) is None
    assert _pod(workloads, pod, lambda p: p is not None and p.metadata.deletion_timestamp).metadata.deletion_timestamp


def test_orphan_strips_the_owner_reference_and_keeps_the_dependents(workloads: Workloads) -> None:
    owner = _owner(workloads)
    pod = _dependent(workloads, _reference(owner))
    # A Job deleted without a policy is orphaning (`DefaultGarbageCollectionPolicy`, k8s-apis §6).
    workloads.batch.delete_namespaced_job(owner.metadata.name, workloads.namespace)
    assert _job(workloads, owner.metadata.name, lambda j: j is None) is None
    orphaned = _pod(workloads, pod, lambda p: p is not None and not p.metadata.owner_references)
    assert orphaned.metadata.deletion_timestamp is None


def test_a_dependent_with_another_owner_only_loses_the_dangling_reference(workloads: Workloads) -> None:
    gone, kept = _owner(workloads), _owner(workloads)
    pod = _dependent(workloads, _reference(gone), {**_reference(kept), "controller": False})
    workloads.batch.delete_namespaced_job(gone.metadata.name, workloads.namespace, propagation_policy="Background")
    left = _pod(workloads, pod, lambda p: p is not None and len(p.metadata.owner_references or []) == 1)
    assert left.metadata.owner_references[0].uid == kept.metadata.uid
    assert left.metadata.deletion_timestamp is None

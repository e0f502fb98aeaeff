"""Kueue mode through the real clients (DESIGN §6): hold and release toggle the Workload, kueue_admit raises A."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_dispatch.dispatch import vocabulary as v
from airflow_provider_dispatch.dispatch.assessment import Execution
from airflow_provider_dispatch.dispatch.errors import PodsRemainError

from .cluster import Cluster
from .conftest import DispatchLab, Either, MakeAdapter

KUEUE_PATCH = {
    "manager": v.KUEUE_RUNTIME_PATCH_MANAGER,
    "trainingRuntimeSpec": {"template": {"spec": {}}},
}


def queued(cluster: Cluster) -> tuple[str, dict[str, Any]]:
    """A TrainJob in a LocalQueue as Kueue leaves it before admission: suspended by Kueue's webhook, with
    Kueue's runtime patch appended (k8s-apis §4.6), observed by Trainer; and the Workload Kueue created for
    it, named `trainjob-<name>-<hash>`, labelled with the job's uid and owned by it (§4.2)."""
    runtime = cluster.runtime()
    created = cluster.trainjob("ft-7", runtime=runtime, queue="user-queue", runtime_patches=[KUEUE_PATCH])
    cluster.trainer_observes("ft-7")
    cluster.jobset("ft-7")
    uid = created["metadata"]["uid"]
    workload = {
        "apiVersion": v.WORKLOAD.api_version,
        "kind": "Workload",
        "metadata": {
            "name": "trainjob-ft-7-3f9a1",
            "labels": {v.LABEL_KUEUE_JOB_UID: uid},
            "ownerReferences": [
                {
                    "apiVersion": v.TRAINJOB.api_version,
                    "kind": "TrainJob",
                    "name": "ft-7",
                    "uid": uid,
                    "controller": True,
                }
            ],
        },
        "spec": {
            "active": True,
            "queueName": "user-queue",
            "podSets": [
                {
                    "name": "node",
                    "count": 2,
                    "template": {"spec": {"containers": [{"name": "node", "image": "pytorch/pytorch:2.7.1"}]}},
                }
            ],
        },
    }
    cluster.custom.create_namespaced_custom_object(
        v.WORKLOAD.group, v.WORKLOAD.version, cluster.namespace, v.WORKLOAD.plural, workload
    )
    return f"{cluster.namespace}/ft-7", workload


def workload_active(cluster: Cluster) -> bool:
    live = cluster.custom.get_namespaced_custom_object(
        v.WORKLOAD.group, v.WORKLOAD.version, cluster.namespace, v.WORKLOAD.plural, "trainjob-ft-7-3f9a1"
    )
    return bool(live["spec"]["active"])


async def test_hold_and_release_toggle_the_workload_only(adapter: Either, cluster: Cluster) -> None:
    ref, _ = queued(cluster)
    rv = cluster.resource_version("ft-7")
    assert await adapter.hold(ref) == Execution("ft-7", "1", 0)
    assert not workload_active(cluster)
    assert await adapter.release(ref) == Execution("ft-7", "1", 0)
    assert workload_active(cluster)
    assert cluster.resource_version("ft-7") == rv  # Kueue owns suspend: the TrainJob is not written


async def test_kueue_admit_raises_a_once_per_workload_admission(
    make_adapter: MakeAdapter, kind: str, cluster: Cluster, dispatch_lab: DispatchLab
) -> None:
    adapter = await make_adapter(kind)
    ref, _ = queued(cluster)
    key = "wl-uid/2026-08-21T10:00:00Z"
    assert await adapter.call("kueue_admit", ref, admission_key=key) == Execution("ft-7", "1", 1)
    written = cluster.trainjob_object("ft-7")
    assert written["spec"]["suspend"] is True
    assert written["metadata"]["annotations"][v.ANNOTATION_ADMISSION_KEY] == key
    assert [p["manager"] for p in written["spec"]["runtimePatches"]] == [
        v.KUEUE_RUNTIME_PATCH_MANAGER,
        v.RUNTIME_PATCH_MANAGER,
    ]
    revision = dispatch_lab.revision()
    assert await adapter.call("kueue_admit", ref, admission_key=key) == Execution("ft-7", "1", 1)
    assert dispatch_lab.revision() == revision  # the same Workload admission: A is not raised again


async def test_kueue_admit_waits_for_remaining_pods(make_adapter: MakeAdapter, kind: str, cluster: Cluster) -> None:
    adapter = await make_adapter(kind)
    ref, _ = queued(cluster)
    node = cluster.node("n1")
    pod = cluster.pod("ft-7", node=node, execution=None)
    cluster.job_controller_deletes(pod)
    with pytest.raises(PodsRemainError) as refused:
        await adapter.call("kueue_admit", ref, admission_key="k1")
    assert [p.name for p in refused.value.remaining] == [pod]
    assert v.ANNOTATION_ADMISSION not in cluster.trainjob_object("ft-7")["metadata"].get("annotations", {})

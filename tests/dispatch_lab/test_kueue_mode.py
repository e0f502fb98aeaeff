"""Kueue mode through the real clients (DESIGN §6): hold and release toggle the Workload, kueue_admit raises A."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_dispatch.dispatch import AsyncDispatchAdapter, payloads
from airflow_provider_dispatch.dispatch import vocabulary as v
from airflow_provider_dispatch.dispatch.assessment import Execution
from airflow_provider_dispatch.dispatch.errors import PodsRemainError
from airflow_provider_dispatch.hooks.checks import outcome_check
from airflow_provider_dispatch.kueue.api import KubeApi
from airflow_provider_dispatch.kueue.clock import WallClock
from airflow_provider_dispatch.kueue.reconciler import Reconciler
from airflow_provider_dispatch.kueue.verdicts import Retry
from airflow_provider_dispatch.kueue.waiting import WaitingIndex
from airflow_provider_dispatch_lab.scenario import manifests

from .cluster import Cluster
from .conftest import DispatchLab, MakeAdapter
from .either import Either

CHECK = "dispatch-drained"
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


async def test_the_admission_check_message_stays_within_its_limit_with_hundreds_of_pods(
    make_adapter: MakeAdapter, cluster: Cluster
) -> None:
    """300 pods of the previous execution on 100 nodes (one lost, one Ready=False, one fenced): the admission check
    controller's reconcile leaves our check Pending with a message within its limit (far below the API's) that
    still gives the count, the first pods by name with node and node state, and every node state."""
    adapter = await make_adapter("async")
    async_adapter = adapter.adapter
    assert isinstance(async_adapter, AsyncDispatchAdapter)
    _, workload = queued(cluster)
    name = workload["metadata"]["name"]
    status = manifests.quota_reserved_status(CHECK, "2026-08-21T10:00:00Z", count=2)
    cluster.merge_patch(v.WORKLOAD.path(cluster.namespace, name) + "/status", {"status": status})
    nodes = cluster.nodes_in_states(100)
    pods = [cluster.pod("ft-7", node=nodes[i % len(nodes)], index=i) for i in range(300)]

    reconciler = Reconciler(
        KubeApi(async_adapter.api_client),
        async_adapter,
        WallClock(),
        lambda: frozenset({CHECK}),
        WaitingIndex(),
        "dispatch-admission-controller",
    )
    outcome = await reconciler.reconcile((cluster.namespace, name))
    assert (outcome.retry, outcome.written) == (Retry.WAITING, True)

    live = cluster.custom.get_namespaced_custom_object(
        v.WORKLOAD.group, v.WORKLOAD.version, cluster.namespace, v.WORKLOAD.plural, name
    )
    (entry,) = live["status"]["admissionChecks"]
    message = entry["message"]
    assert entry["state"] == "Pending"
    assert len(message) <= payloads.KUEUE_MESSAGE_LIMIT < payloads.KUEUE_MESSAGE_API_LIMIT
    first = sorted(pods)[0]
    node = nodes[pods.index(first) % len(nodes)]
    special = {nodes[0]: "Ready=Unknown", nodes[1]: "Ready=False", nodes[2]: "Ready=Unknown, out-of-service"}
    state = special.get(node, "Ready=True")
    # what to do first (the lost node, the most urgent), then the pods of the previous execution
    assert message.startswith(f"Confirm {nodes[0]} is powered off, then taint it out-of-service (Ready=Unknown)\n")
    assert f"\npods of the previous execution remain: {first} on {node} ({state}), " in message
    assert " more; 300 pods on 100 nodes: Ready=Unknown (1 node: " in message
    for group in ("Ready=False (1 node: ", "Ready=Unknown, out-of-service (1 node: ", "Ready=True (97 nodes)"):
        assert group in message


async def test_the_outcome_check_names_a_workload_not_admitted_and_then_evicted(
    adapter: Either, cluster: Cluster
) -> None:
    """The outcome check through either adapter, under Kueue: while no quota is reserved the explanation names the
    Workload and Kueue's message; once admitted and running, an eviction is named with its reason."""
    ref, workload = queued(cluster)

    def set_conditions(*conditions: dict[str, str]) -> None:
        cluster.custom.patch_namespaced_custom_object_status(
            v.WORKLOAD.group,
            v.WORKLOAD.version,
            cluster.namespace,
            v.WORKLOAD.plural,
            workload["metadata"]["name"],
            {"status": {"conditions": [{**c, "lastTransitionTime": "2026-08-21T10:00:00Z"} for c in conditions]}},
            _content_type="application/merge-patch+json",
        )

    set_conditions(
        {"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": "insufficient nvidia.com/gpu"}
    )
    check = await adapter.call("run", outcome_check(ref, adapter.adapter.operations))
    assert check.outcome is None
    assert check.waiting["headline"] == (
        "Free or add quota in its ClusterQueue: Workload trainjob-ft-7-3f9a1 has no quota reserved"
    )
    assert "QuotaReserved=False: Pending: insufficient nvidia.com/gpu" in check.waiting["detail"]

    set_conditions({"type": "Evicted", "status": "True", "reason": "Preempted", "message": "preempted by ml/big"})
    check = await adapter.call("run", outcome_check(ref, adapter.adapter.operations))
    assert check.waiting["headline"] == (
        "Waiting for Kueue to admit Workload trainjob-ft-7-3f9a1 again: it was evicted (Preempted)"
    )
    assert "Evicted: Preempted: preempted by ml/big" in check.waiting["detail"]

"""Graceful deletion exactly as research k8s-apis.md section 5.2 describes it, through the official client."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import kubernetes
import pytest
from api_answers import expect_answer
from kubernetes.client import ApiException
from servers import SERVERS, make_pod

from airflow_provider_dispatch_lab.runtime import Lab
from airflow_provider_dispatch_lab.scenario import manifests

TRAINER = ("trainer.kubeflow.org", "v1alpha1")
#: a finalizer no controller acts on (the real Job controller strips its own `batch.kubernetes.io/job-tracking`
#: from pods no Job owns)
KEEP = "example.com/keep"

API_SERVERS = SERVERS


def _gone(core_v1: kubernetes.client.CoreV1Api, namespace: str, name: str) -> bool:
    try:
        core_v1.read_namespaced_pod(name, namespace)
    except ApiException as error:
        return error.status == 404
    return False


def test_scheduled_pod_stays_terminating_for_its_grace_period(
    core_v1: kubernetes.client.CoreV1Api, namespace: str
) -> None:
    created = core_v1.create_namespaced_pod(namespace, make_pod("p", node_name="n1", grace_seconds=30))
    core_v1.patch_namespaced_pod_status("p", namespace, {"status": {"phase": "Running"}})
    core_v1.delete_namespaced_pod("p", namespace)
    pod = core_v1.read_namespaced_pod("p", namespace)
    assert pod.metadata.deletion_grace_period_seconds == 30
    assert pod.metadata.deletion_timestamp is not None
    assert pod.metadata.deletion_timestamp - created.metadata.creation_timestamp >= timedelta(seconds=29)
    assert pod.status.phase == "Running"  # the phase does not change on delete
    assert pod.metadata.generation == created.metadata.generation + 1


@pytest.fixture
def stopped_clock(lab: Lab) -> Iterator[Lab]:
    """Lab time stands still during the test, except where it advances it (the session lab runs at speed 100)."""
    speed = lab.clock.speed
    lab.call(lambda: lab.clock.set_speed(0.0))
    yield lab
    lab.call(lambda: lab.clock.set_speed(speed))


def test_only_a_shorter_grace_period_changes_anything(
    core_v1: kubernetes.client.CoreV1Api, namespace: str, stopped_clock: Lab
) -> None:
    # The clock stands still: the shorter deadline below stays in the future (a past one is clamped, next test).
    core_v1.create_namespaced_pod(namespace, make_pod("p", node_name="n1", grace_seconds=30))
    core_v1.delete_namespaced_pod("p", namespace)
    first = core_v1.read_namespaced_pod("p", namespace)
    core_v1.delete_namespaced_pod("p", namespace, grace_period_seconds=60)
    longer = core_v1.read_namespaced_pod("p", namespace)
    assert longer.metadata.deletion_timestamp == first.metadata.deletion_timestamp
    assert longer.metadata.resource_version == first.metadata.resource_version
    core_v1.delete_namespaced_pod("p", namespace, grace_period_seconds=10)
    shorter = core_v1.read_namespaced_pod("p", namespace)
    assert shorter.metadata.deletion_grace_period_seconds == 10
    assert first.metadata.deletion_timestamp - shorter.metadata.deletion_timestamp == timedelta(seconds=20)
    core_v1.delete_namespaced_pod("p", namespace, grace_period_seconds=0)
    assert _gone(core_v1, namespace, "p")


def test_a_shortened_deadline_in_the_past_becomes_now(
    core_v1: kubernetes.client.CoreV1Api, namespace: str, stopped_clock: Lab
) -> None:
    """`BeforeDelete` (k8s.io/apiserver v0.36.3): a shorter grace whose deadline has already passed moves the
    deadline to now with grace 1 s, so the pod is still deleted gracefully and its kubelet deletes it."""
    core_v1.create_namespaced_pod(namespace, make_pod("p", node_name="n1", grace_seconds=300))
    core_v1.delete_namespaced_pod("p", namespace)
    stopped_clock.call(lambda: stopped_clock.clock.advance(100))
    now = datetime.fromtimestamp(int(stopped_clock.call(stopped_clock.clock.now)), UTC)
    core_v1.delete_namespaced_pod("p", namespace, grace_period_seconds=30)  # requested 100 s ago + 30 s: past
    pod = core_v1.read_namespaced_pod("p", namespace)
    assert (pod.metadata.deletion_timestamp, pod.metadata.deletion_grace_period_seconds) == (now, 1)
    core_v1.delete_namespaced_pod("p", namespace, grace_period_seconds=-5)  # negative counts as 1: no change
    assert core_v1.read_namespaced_pod("p", namespace).metadata.resource_version == pod.metadata.resource_version
    core_v1.delete_namespaced_pod("p", namespace, grace_period_seconds=0)
    assert _gone(core_v1, namespace, "p")


@pytest.mark.parametrize("case", ["unscheduled", "succeeded", "failed"])
def test_grace_is_forced_to_zero(core_v1: kubernetes.client.CoreV1Api, namespace: str, case: str) -> None:
    core_v1.create_namespaced_pod(
        namespace, make_pod("p", node_name=None if case == "unscheduled" else "n1", grace_seconds=30)
    )
    if case != "unscheduled":
        core_v1.patch_namespaced_pod_status("p", namespace, {"status": {"phase": case.capitalize()}})
    core_v1.delete_namespaced_pod("p", namespace)
    assert _gone(core_v1, namespace, "p")


def test_finalizers_delay_removal(core_v1: kubernetes.client.CoreV1Api, namespace: str) -> None:
    core_v1.create_namespaced_pod(namespace, make_pod("p", node_name="n1", finalizers=[KEEP]))
    core_v1.delete_namespaced_pod("p", namespace, grace_period_seconds=0)
    held = core_v1.read_namespaced_pod("p", namespace)
    assert held.metadata.deletion_timestamp is not None
    assert held.metadata.deletion_grace_period_seconds == 0
    with pytest.raises(ApiException) as raised:
        core_v1.patch_namespaced_pod("p", namespace, {"metadata": {"finalizers": ["x.example/new"]}})
    expect_answer(raised.value, 422)  # no new finalizer once deletion started
    core_v1.patch_namespaced_pod(
        "p",
        namespace,
        {"metadata": {"$deleteFromPrimitiveList/finalizers": [KEEP]}},
    )
    assert _gone(core_v1, namespace, "p")


def test_preconditions_and_propagation(custom_objects: kubernetes.client.CustomObjectsApi, namespace: str) -> None:
    created = custom_objects.create_namespaced_custom_object(*TRAINER, namespace, "trainjobs", manifests.trainjob("tj"))
    with pytest.raises(ApiException) as raised:
        custom_objects.delete_namespaced_custom_object(
            *TRAINER, namespace, "trainjobs", "tj", body={"preconditions": {"uid": "not-the-uid"}}
        )
    expect_answer(raised.value, 409)
    answer = custom_objects.delete_namespaced_custom_object(
        *TRAINER,
        namespace,
        "trainjobs",
        "tj",
        body={"preconditions": {"uid": created["metadata"]["uid"]}, "propagationPolicy": "Foreground"},
    )
    # 200 with the object as it is kept (202 only after an explicit `orphanDependents: false`, delete.go)
    assert answer["metadata"]["uid"] == created["metadata"]["uid"]
    assert answer["metadata"]["finalizers"] == ["foregroundDeletion"]
    deleted = custom_objects.get_namespaced_custom_object(*TRAINER, namespace, "trainjobs", "tj")
    # Foreground deletion keeps the object, with the garbage collector's finalizer, until its dependents are gone.
    assert deleted["metadata"]["finalizers"] == ["foregroundDeletion"]
    assert deleted["metadata"]["deletionTimestamp"]


def test_dry_run_writes_nothing(core_v1: kubernetes.client.CoreV1Api, namespace: str) -> None:
    core_v1.create_namespaced_pod(namespace, make_pod("p"), dry_run="All")
    assert _gone(core_v1, namespace, "p")


def test_delete_collection_by_selector(core_v1: kubernetes.client.CoreV1Api, namespace: str) -> None:
    core_v1.create_namespaced_pod(namespace, make_pod("a", labels={"x": "1"}))
    core_v1.create_namespaced_pod(namespace, make_pod("b", labels={"x": "2"}))
    core_v1.delete_collection_namespaced_pod(namespace, label_selector="x=1")
    assert [p.metadata.name for p in core_v1.list_namespaced_pod(namespace).items] == ["b"]

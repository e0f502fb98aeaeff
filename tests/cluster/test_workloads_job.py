"""The batch/v1 Job controller on its own (k8s-apis.md §3, §6 rule 6), through the official client."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import pytest

from airflow_provider_dispatch_lab.clock import format_timestamp
from airflow_provider_dispatch_lab.runtime import Lab
from airflow_provider_dispatch_lab.simulated.workloads.job import JobController

from .workload_steps import Workloads, job_condition, unique

CONTROLLERS = [JobController]
FINALIZER = "batch.kubernetes.io/job-tracking"
INDEX = "batch.kubernetes.io/job-completion-index"


def _job(
    name: str,
    *,
    parallelism: int = 2,
    completions: int | None = 2,
    indexed: bool = True,
    backoff_limit: int = 6,
    **spec: Any,
) -> dict[str, Any]:
    job_spec: dict[str, Any] = {
        "parallelism": parallelism,
        "completionMode": "Indexed" if indexed else "NonIndexed",
        "backoffLimit": backoff_limit,
        "template": {
            "metadata": {"labels": {"app": name}},
            "spec": {
                "restartPolicy": "Never",
                "terminationGracePeriodSeconds": 30,
                "containers": [{"name": "main", "image": "busybox:1.36"}],
            },
        },
        **spec,
    }
    if completions is not None:
        job_spec["completions"] = completions
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}, "spec": job_spec}


def _start(workloads: Workloads, name: str, count: int) -> list[Any]:
    pods = workloads.wait_pods(f"app={name}", lambda pods: len(pods) == count)
    workloads.start(pods)
    workloads.wait_job(name, lambda j: j is not None and j.status.ready == count)
    return pods


def test_indexed_pods_carry_index_finalizer_and_controller_reference(workloads: Workloads) -> None:
    name = unique("job")
    created = workloads.batch.create_namespaced_job(workloads.namespace, _job(name))
    pods = workloads.wait_pods(f"app={name}", lambda pods: len(pods) == 2)
    by_index = {p.metadata.annotations[INDEX]: p for p in pods}
    assert sorted(by_index) == ["0", "1"]
    for index, pod in by_index.items():
        assert re.fullmatch(rf"{name}-{index}-[a-z0-9]{{5}}", pod.metadata.name)
        assert pod.metadata.labels[INDEX] == index
        assert pod.spec.hostname == f"{name}-{index}"
        assert pod.metadata.finalizers == [FINALIZER]
        (owner,) = pod.metadata.owner_references
        assert (owner.kind, owner.name, owner.uid) == ("Job", name, created.metadata.uid)
        assert owner.controller is True
        assert owner.block_owner_deletion is True
    job = workloads.wait_job(name, lambda j: j is not None and j.status.active == 2)
    assert job.status.start_time is not None


def test_non_indexed_pods_are_named_by_the_job(workloads: Workloads) -> None:
    name = unique("job")
    workloads.batch.create_namespaced_job(workloads.namespace, _job(name, indexed=False))
    pods = workloads.wait_pods(f"app={name}", lambda pods: len(pods) == 2)
    assert all(re.fullmatch(rf"{name}-[a-z0-9]{{5}}", p.metadata.name) for p in pods)
    assert all(INDEX not in (p.metadata.annotations or {}) for p in pods)


def test_suspend_drops_active_at_once_and_counts_the_pods_terminating(workloads: Workloads) -> None:
    name = unique("job")
    workloads.batch.create_namespaced_job(workloads.namespace, _job(name))
    _start(workloads, name, 2)
    workloads.batch.patch_namespaced_job(name, workloads.namespace, {"spec": {"suspend": True}})
    job = workloads.wait_job(name, lambda j: j.status.active == 0 and j.status.terminating)
    assert job.status.terminating == 2  # written in the same sync that deleted them
    assert (job.status.ready, job_condition(job, "Suspended").reason) == (0, "JobSuspended")
    pods = workloads.pods(f"app={name}")
    assert len(pods) == 2
    assert all(p.metadata.deletion_timestamp is not None and not p.metadata.finalizers for p in pods)
    assert all(p.status.phase == "Running" for p in pods)


@pytest.mark.parametrize(
    ("policy", "replaced_at_once"), [("TerminatingOrFailed", True), ("Failed", False)], ids=["default", "failed"]
)
def test_an_evicted_pod_is_replaced_per_the_replacement_policy(
    workloads: Workloads, cluster_lab: Lab, policy: str, replaced_at_once: bool
) -> None:
    name = unique("job")
    workloads.batch.create_namespaced_job(workloads.namespace, _job(name, podReplacementPolicy=policy))
    first, _second = sorted(_start(workloads, name, 2), key=lambda p: p.metadata.annotations[INDEX])
    # At wall speed until the status during the 10 s pod-failure backoff is read: at the module's speed the
    # backoff is 0.1 s of wall time, and a loaded machine read the status after the replacement (active 2).
    with _real_time(cluster_lab):
        workloads.core.delete_namespaced_pod(first.metadata.name, workloads.namespace)  # an eviction, graceful
        job = workloads.wait_job(name, lambda j: j.status.terminating == 1)
    if replaced_at_once:
        # Counted as failed and replaced (after the 10 s pod-failure backoff) while it still terminates.
        # During the backoff `manageJob` reports the pods it has: the other one runs (Kubernetes v1.36.3; up to
        # v1.36.0 it reported 0 there).
        assert job.status.active == 1
        pods = workloads.wait_pods(f"app={name}", lambda pods: len(pods) == 3)
        assert sum(1 for p in pods if p.metadata.annotations[INDEX] == "0") == 2
        job = workloads.wait_job(name, lambda j: j.status.failed == 1 and j.status.active == 2)
    else:
        assert (job.status.active, job.status.failed) == (1, None)
        assert len(workloads.pods(f"app={name}")) == 2
        workloads.confirm_termination(first.metadata.name)  # the kubelet reports Failed and deletes it
        pods = workloads.wait_pods(
            f"app={name}", lambda pods: len(pods) == 2 and first.metadata.name not in {p.metadata.name for p in pods}
        )
        assert sorted(p.metadata.annotations[INDEX] for p in pods) == ["0", "1"]
        # The status of the sync that created the replacement: the one before it (during the backoff) has
        # `failed: 1` too, with the pods it had (Kubernetes v1.36.3 reports them there).
        job = workloads.wait_job(name, lambda j: j.status.failed == 1 and j.status.active == 2)
    assert job.status.active == 2


def test_failed_pods_count_against_the_backoff_limit(workloads: Workloads) -> None:
    name = unique("job")
    workloads.batch.create_namespaced_job(
        workloads.namespace, _job(name, parallelism=1, completions=1, indexed=False, backoff_limit=1)
    )
    (first,) = _start(workloads, name, 1)
    workloads.report_finished(first.metadata.name, "Failed")
    pods = workloads.wait_pods(f"app={name}", lambda pods: len(pods) == 2)  # replaced after the backoff
    (second,) = [p for p in pods if p.metadata.name != first.metadata.name]
    workloads.start([second])
    workloads.report_finished(second.metadata.name, "Failed")
    job = workloads.wait_job(name, lambda j: job_condition(j, "Failed") is not None)
    failed = job_condition(job, "Failed")
    assert (failed.reason, failed.message) == ("BackoffLimitExceeded", "Job has reached the specified backoff limit")
    assert job.status.failed == 2
    assert job_condition(job, "FailureTarget").reason == "BackoffLimitExceeded"
    assert all(not p.metadata.finalizers for p in workloads.pods(f"app={name}"))


@contextmanager
def _real_time(lab: Lab) -> Iterator[float]:
    """Lab time at wall speed, so a test's few seconds are a few lab seconds (the module runs at speed 100)."""
    speed = lab.clock.speed
    lab.call(lambda: lab.clock.set_speed(1.0))
    try:
        yield lab.call(lab.clock.now)
    finally:
        lab.call(lambda: lab.clock.set_speed(speed))


def _fail(workloads: Workloads, pod: str, at: float) -> None:
    """What the kubelet reports when the container exited 1 at lab time `at`."""
    terminated = {"exitCode": 1, "reason": "Error", "finishedAt": format_timestamp(at)}
    container = {"name": "main", "ready": False, "restartCount": 0, "image": "busybox:1.36", "imageID": ""}
    status = {
        "phase": "Failed",
        "conditions": [{"type": "Ready", "status": "False"}],
        "containerStatuses": [{**container, "state": {"terminated": terminated}}],
    }
    workloads.core.patch_namespaced_pod_status(pod, workloads.namespace, {"status": status})


def test_the_pod_failure_backoff_is_capped_at_ten_minutes(workloads: Workloads, cluster_lab: Lab) -> None:
    """`MaxJobPodFailureBackOff` is 10 min in Kubernetes v1.36.3 (it was 6 min before): seven failures at once
    wait min(10 s * 2^6, 10 min) from the last one before any pod is replaced."""
    name = unique("job")
    job = _job(name, parallelism=8, completions=8, backoff_limit=10, podReplacementPolicy="Failed")
    workloads.batch.create_namespaced_job(workloads.namespace, job)
    pods = sorted(_start(workloads, name, 8), key=lambda p: int(p.metadata.annotations[INDEX]))
    failing, last = pods[:7], pods[7]
    # At wall speed, a sync that saw only the first failures (10 s of back-off for one) cannot let a replacement in
    # before the other failures are reported.
    with _real_time(cluster_lab) as failed_at:
        for pod in failing:
            _fail(workloads, pod.metadata.name, failed_at)
        workloads.wait_job(name, lambda j: j.status.failed == 7)  # the Job syncs 1 lab second after pod events
        now = cluster_lab.call(cluster_lab.clock.now)
        cluster_lab.call(lambda: cluster_lab.clock.advance(failed_at + 500 - now))  # past the old 6 min cap
        # A change the Job controller must write (its pods' readiness, synced 1 lab second after the pod event),
        # so that a sync after the jump is seen:
        not_ready = {"status": {"conditions": [{"type": "Ready", "status": "False"}]}}
        workloads.core.patch_namespaced_pod_status(last.metadata.name, workloads.namespace, not_ready)
        during = workloads.wait_job(name, lambda j: j.status.ready == 0)
        assert during.status.active == 1  # still backing off: nothing created, and the running pod counted
        assert len(workloads.pods(f"app={name}")) == 8
        now = cluster_lab.call(cluster_lab.clock.now)
        cluster_lab.call(lambda: cluster_lab.clock.advance(failed_at + 600 - now))
        after = workloads.wait_pods(f"app={name}", lambda ps: len(ps) == 15)
    replacements = [p for p in after if p.metadata.name not in {f.metadata.name for f in pods}]
    assert sorted(int(p.metadata.annotations[INDEX]) for p in replacements) == list(range(7))
    earliest = datetime.fromtimestamp(int(failed_at) + 600, UTC)
    assert all(p.metadata.creation_timestamp >= earliest for p in replacements)


def test_complete_waits_until_no_pod_is_terminating(workloads: Workloads) -> None:
    name = unique("job")
    workloads.batch.create_namespaced_job(workloads.namespace, _job(name, completions=None, indexed=False))
    done, other = _start(workloads, name, 2)
    workloads.report_finished(done.metadata.name, "Succeeded")
    workloads.wait_job(name, lambda j: j.status.succeeded == 1)
    workloads.core.delete_namespaced_pod(other.metadata.name, workloads.namespace)
    job = workloads.wait_job(name, lambda j: job_condition(j, "SuccessCriteriaMet") is not None)
    assert job_condition(job, "Complete") is None
    assert job.status.terminating == 1
    workloads.confirm_termination(other.metadata.name)
    job = workloads.wait_job(name, lambda j: job_condition(j, "Complete") is not None)
    complete = job_condition(job, "Complete")
    assert (complete.reason, complete.message) == ("CompletionsReached", "Reached expected number of succeeded pods")
    assert job.status.completion_time is not None
    assert job.status.terminating == 0


def test_pods_of_a_deleted_job_lose_the_tracking_finalizer(workloads: Workloads) -> None:
    name = unique("job")
    workloads.batch.create_namespaced_job(workloads.namespace, _job(name))
    _start(workloads, name, 2)
    workloads.batch.delete_namespaced_job(name, workloads.namespace, propagation_policy="Background")
    pods = workloads.wait_pods(f"app={name}", lambda pods: all(not p.metadata.finalizers for p in pods))
    assert len(pods) == 2  # no garbage collector here: they stay, but nothing holds them any more


@pytest.mark.parametrize("removed", ["controller-uid", "job-name only"])
def test_a_pod_relabelled_out_of_the_selector_is_released(workloads: Workloads, removed: str) -> None:
    """`ClaimPods` (controller_ref_manager.go): a pod whose labels no longer match the Job's selector
    (`batch.kubernetes.io/controller-uid`) loses its owner reference and the tracking finalizer, and its index is
    replaced; removing a label the selector does not use (`batch.kubernetes.io/job-name`) changes nothing."""
    name = unique("job")
    created = workloads.batch.create_namespaced_job(workloads.namespace, _job(name, podReplacementPolicy="Failed"))
    first, _second = sorted(_start(workloads, name, 2), key=lambda p: p.metadata.annotations[INDEX])
    keys = ["batch.kubernetes.io/job-name", "job-name"]
    if removed == "controller-uid":
        keys += ["batch.kubernetes.io/controller-uid", "controller-uid"]
    workloads.core.patch_namespaced_pod(
        first.metadata.name, workloads.namespace, {"metadata": {"labels": dict.fromkeys(keys)}}
    )
    if removed == "controller-uid":
        pods = workloads.wait_pods(f"app={name}", lambda pods: len(pods) == 3)
        released = next(p for p in pods if p.metadata.name == first.metadata.name)
        assert not released.metadata.owner_references
        assert not released.metadata.finalizers
        assert sum(1 for p in pods if p.metadata.annotations[INDEX] == "0") == 2  # its index was replaced
        job = workloads.batch.read_namespaced_job(name, workloads.namespace)
        assert job.metadata.uid == created.metadata.uid
    else:
        job = workloads.wait_job(name, lambda j: j.status.active == 2)
        kept = workloads.core.read_namespaced_pod(first.metadata.name, workloads.namespace)
        assert [o.uid for o in kept.metadata.owner_references] == [created.metadata.uid]
        assert kept.metadata.finalizers == [FINALIZER]
        assert len(workloads.pods(f"app={name}")) == 2

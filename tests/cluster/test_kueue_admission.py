"""Kueue alone (no workload or node controllers): the webhook, the Workload, quota, checks and evictions.

The test plays Trainer's part where Kueue reads it (`jobsStatus`, `Complete`), as `kueue_steps.py` describes.
Expected values are upstream's (k8s-apis.md §4.2-§4.6, §6 rule 10; the module docstrings of
`lab/simulated/kueue/` cite the code).
"""

from __future__ import annotations

from collections.abc import Iterator

import kubernetes
import pytest

from airflow_provider_dispatch_lab.runtime import Lab
from airflow_provider_dispatch_lab.simulated.kueue import constants as k
from airflow_provider_dispatch_lab.simulated.kueue import kueue_controllers
from airflow_provider_dispatch_lab.simulated.kueue.config import KueueConfig
from airflow_provider_dispatch_lab.simulated.kueue.names import workload_name

from .kueue_steps import Kueue, checks, condition, has, kueue_patch, recorded_trainjob_versions

# The granular reasons these tests assert are the `UnadmittedWorkloadsObservability` gate's, off in v0.19.2 and on
# in Kueue's main branch: the tests turn it on, as a cluster that enables it would.
CONFIG = KueueConfig(workload_priority_classes={"high": 1000, "low": 10}, unadmitted_workloads_observability=True)
CONTROLLERS = kueue_controllers(CONFIG)
PENDING_EVALUATION = k.REASON_PENDING_EVALUATION


@pytest.fixture
def kueue(cluster_api: kubernetes.client.ApiClient, cluster_namespace: str, cluster_lab: Lab) -> Iterator[Kueue]:
    steps = Kueue(cluster_api, cluster_namespace, cluster_lab)
    steps.ensure_runtime()
    yield steps
    steps.close()


def reserved(wl: dict | None) -> bool:
    return has(wl, k.QUOTA_RESERVED, "True")


def admitted(wl: dict | None) -> bool:
    return has(wl, k.ADMITTED, "True")


def reserved_and_checked(wl: dict | None) -> bool:
    """Quota reserved, the check entries there and Admitted synced: Kueue's last write after a reservation.

    The scheduler can reserve before the workload controller adds the Pending entries, as upstream's two
    controllers can; and a check written while a Kueue write is in flight can be overwritten, because the lab's
    server does not refuse a stale status apply (see `status_writer.py`), so the test waits for the end.
    """
    return reserved(wl) and bool(checks(wl)) and has(wl, k.ADMITTED, "False", k.REASON_UNSATISFIED_CHECKS)


def _admitted_and_running(kueue: Kueue, *, check: bool = True) -> tuple[str, str, str]:
    """A TrainJob admitted through a Ready check, unsuspended, one Job active (Trainer's report)."""
    setup = kueue.queues(checks=("drained",) if check else ())
    name = kueue.queued_trainjob(setup)
    wl = kueue.workload_name(name)
    kueue.wait_workload(wl, reserved_and_checked if check else reserved)
    check_name = setup.admission_checks[0] if check else ""
    if check:
        kueue.scenario.set_check_state(kueue.namespace, wl, check_name, k.CHECK_READY, "no pods remain")
    kueue.wait_workload(wl, admitted)
    kueue.wait_trainjob(name, lambda tj: tj["spec"].get("suspend") is False)
    kueue.report_jobs(name, active=1, ready=1)
    return name, wl, check_name


def test_the_webhook_suspends_a_queued_trainjob_and_appends_kueues_patch(kueue: Kueue) -> None:
    setup = kueue.queues()
    name = kueue.queued_trainjob(setup, suspend=False)
    stored = kueue.trainjob(name)
    assert stored["spec"]["suspend"] is True
    assert stored["spec"]["runtimePatches"] == [
        {"manager": k.RUNTIME_PATCH_MANAGER, "trainingRuntimeSpec": {"template": {"spec": {}}}}
    ]
    kueue.update_trainjob(name, lambda spec: spec.__setitem__("activeDeadlineSeconds", None))  # an update: no 2nd
    assert [p["manager"] for p in kueue.trainjob(name)["spec"]["runtimePatches"]] == [k.RUNTIME_PATCH_MANAGER]


def test_a_trainjob_without_the_queue_label_is_not_suspended(kueue: Kueue) -> None:
    """Kueue does not manage it, but its webhook appends its empty runtime patch all the same (v0.19.2 `Default`
    appends unconditionally; seen on the real cluster, docs/fidelity.md)."""
    from airflow_provider_dispatch_lab.scenario import manifests

    trainjob = manifests.trainjob("plain-" + kueue.namespace, suspend=False)
    stored = kueue.create_trainjob(trainjob)
    assert stored["spec"]["suspend"] is False
    assert stored["spec"]["runtimePatches"] == [
        {"manager": k.RUNTIME_PATCH_MANAGER, "trainingRuntimeSpec": {"template": {"spec": {}}}}
    ]


def test_kueue_makes_one_workload_owned_by_the_trainjob(kueue: Kueue) -> None:
    setup = kueue.queues()
    name = kueue.queued_trainjob(setup, cpu="3", nodes=2)
    wl = kueue.workload(kueue.workload_name(name))
    uid = kueue.trainjob(name)["metadata"]["uid"]
    assert wl["metadata"]["name"] == workload_name(name, uid)
    assert wl["metadata"]["labels"] == {k.JOB_UID_LABEL: uid}
    assert wl["metadata"]["finalizers"] == [k.RESOURCE_IN_USE_FINALIZER]
    assert wl["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "name": name,
            "uid": uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    [podset] = wl["spec"]["podSets"]
    assert (podset["name"], podset["count"]) == ("node", 2)
    assert podset["template"]["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "3"}}
    assert (wl["spec"]["queueName"], wl["spec"]["priority"], wl["spec"]["active"]) == (setup.local_queue, 0, True)


def test_quota_is_reserved_but_a_pending_check_keeps_the_trainjob_suspended(kueue: Kueue) -> None:
    setup = kueue.queues(checks=("drained",))
    name = kueue.queued_trainjob(setup)
    wl = kueue.wait_workload(
        kueue.workload_name(name), lambda w: reserved(w) and has(w, k.ADMITTED, "False", k.REASON_UNSATISFIED_CHECKS)
    )
    assert condition(wl, k.QUOTA_RESERVED)["message"] == f"Quota reserved in ClusterQueue {setup.cluster_queue}"
    assert condition(wl, k.ADMITTED)["message"] == "The workload has not all checks ready"
    assert wl["status"]["admission"] == {
        "clusterQueue": setup.cluster_queue,
        "podSetAssignments": [
            {"name": "node", "flavors": {"cpu": "default-flavor"}, "resourceUsage": {"cpu": "4"}, "count": 2}
        ],
    }
    [entry] = wl["status"]["admissionChecks"]
    assert (entry["name"], entry["state"], entry["message"]) == (setup.admission_checks[0], k.CHECK_PENDING, "")
    assert kueue.trainjob(name)["spec"]["suspend"] is True
    cq = kueue.wait_cluster_queue(
        setup.cluster_queue, lambda q: (q or {}).get("status", {}).get("reservingWorkloads") == 1
    )
    assert (condition(cq, k.ACTIVE)["status"], condition(cq, k.ACTIVE)["message"]) == (
        "True",
        "Can admit new workloads",
    )
    assert cq["status"]["admittedWorkloads"] == 0


def test_workloads_queue_in_order_and_wait_for_quota(kueue: Kueue) -> None:
    setup = kueue.queues(cpu="4")
    first = kueue.workload_name(kueue.queued_trainjob(setup, cpu="2"))
    kueue.wait_workload(first, reserved)
    second = kueue.workload_name(kueue.queued_trainjob(setup, cpu="2"))
    waiting = kueue.wait_workload(second, lambda w: has(w, k.QUOTA_RESERVED, "False", k.REASON_WAITING_FOR_QUOTA))
    assert condition(waiting, k.QUOTA_RESERVED)["message"] == (
        "couldn't assign flavors to pod set node: insufficient unused quota for cpu in flavor default-flavor, "
        "4 more needed"
    )
    assert has(waiting, k.ADMITTED, "False", k.REASON_NO_RESERVATION)
    assert "admission" not in waiting["status"]


def test_ready_checks_admit_and_kueue_starts_the_trainjob_in_two_writes(
    kueue: Kueue, cluster_api: kubernetes.client.ApiClient
) -> None:
    setup = kueue.queues(checks=("drained",))
    name = kueue.queued_trainjob(setup)
    wl = kueue.workload_name(name)
    kueue.wait_workload(wl, reserved_and_checked)
    update = {"name": "node", "labels": {"example.com/from-check": "yes"}, "nodeSelector": {"zone": "a"}}
    with recorded_trainjob_versions(cluster_api, kueue.namespace, name) as versions:
        kueue.scenario.set_check_state(
            kueue.namespace, wl, setup.admission_checks[0], k.CHECK_READY, "ok", pod_set_updates=[update]
        )
        started = kueue.wait_trainjob(name, lambda tj: tj["spec"].get("suspend") is False)
        seen = versions.wait_for_version(started["metadata"]["resourceVersion"])
    assert admitted(kueue.workload(wl))
    [replicated] = kueue_patch(started)["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    pod = replicated["template"]["spec"]["template"]
    assert pod["metadata"]["labels"] == {k.PODSET_LABEL: "node", "example.com/from-check": "yes"}
    assert pod["spec"] == {"nodeSelector": {"zone": "a"}}
    # the first write changed the patch while still suspended; only the second unsuspended
    patched_while_suspended = [
        v for v in seen if v["spec"]["suspend"] is True and kueue_patch(v)["trainingRuntimeSpec"]["template"]["spec"]
    ]
    assert patched_while_suspended, [v["spec"] for v in seen]


def test_an_unsuspended_trainjob_that_is_not_admitted_is_suspended_again(kueue: Kueue) -> None:
    setup = kueue.queues(checks=("drained",))
    name = kueue.queued_trainjob(setup)
    kueue.wait_workload(kueue.workload_name(name), reserved)
    resumed = kueue.update_trainjob(name, lambda spec: spec.__setitem__("suspend", False))
    assert resumed["spec"]["suspend"] is False
    kueue.wait_trainjob(name, lambda tj: tj["spec"].get("suspend") is True)


def test_an_inactive_check_makes_the_cluster_queue_inactive(kueue: Kueue) -> None:
    setup = kueue.queues(checks=("drained",), activate_checks=False)
    check_name = setup.admission_checks[0]
    cq = kueue.wait_cluster_queue(setup.cluster_queue, lambda q: has(q, k.ACTIVE, "False"))
    assert (condition(cq, k.ACTIVE)["reason"], condition(cq, k.ACTIVE)["message"]) == (
        k.CQ_REASON_CHECK_INACTIVE,
        f"Can't admit new workloads: references inactive AdmissionCheck(s): {check_name}.",
    )
    name = kueue.queued_trainjob(setup)
    wl = kueue.workload_name(name)
    waiting = kueue.wait_workload(wl, lambda w: has(w, k.QUOTA_RESERVED, "False", k.REASON_SUSPENDED))
    assert condition(waiting, k.QUOTA_RESERVED)["message"] == f"ClusterQueue {setup.cluster_queue} is inactive"
    kueue.scenario.set_check_active(check_name)
    kueue.wait_workload(wl, reserved)


def test_retry_evicts_stops_and_releases_quota_once_no_job_is_active(kueue: Kueue) -> None:
    name, wl, check_name = _admitted_and_running(kueue)
    kueue.scenario.set_check_state(kueue.namespace, wl, check_name, k.CHECK_RETRY, "infra")
    evicted = kueue.wait_workload(wl, lambda w: has(w, k.EVICTED, "True", k.EVICTED_BY_ADMISSION_CHECK))
    assert (
        condition(evicted, k.EVICTED)["message"]
        == f'Evicted due to AdmissionCheck in Retry state: "{check_name}" (infra)'
    )
    entry = checks(evicted)[check_name]
    assert (entry["state"], entry["message"], entry["retryCount"]) == (
        k.CHECK_PENDING,
        "Reset to Pending after eviction. Previously: Retry",
        1,
    )
    suspended = kueue.wait_trainjob(name, lambda tj: tj["spec"].get("suspend") is True)
    assert kueue_patch(suspended)["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]  # not restored yet
    assert reserved(kueue.workload(wl))  # a Job is still active: `jobs are still active`, quota kept

    kueue.report_jobs(name, active=0)  # the pods may still be Terminating: Job.active does not count them
    released = kueue.wait_workload(wl, lambda w: has(w, k.QUOTA_RESERVED, "False"))
    assert condition(released, k.QUOTA_RESERVED)["reason"] == PENDING_EVALUATION
    restored = kueue.wait_trainjob(
        name, lambda tj: "replicatedJobs" not in kueue_patch(tj)["trainingRuntimeSpec"]["template"]["spec"]
    )
    assert restored["spec"]["suspend"] is True
    again = kueue.wait_workload(wl, lambda w: reserved(w) and has(w, k.REQUEUED, "True", k.REASON_BACKOFF_FINISHED))
    assert checks(again)[check_name]["state"] == k.CHECK_PENDING
    assert has(again, k.EVICTED, "False", k.REASON_QUOTA_RESERVED)
    assert not admitted(again)


def test_retry_with_requeue_after_records_the_backoff(kueue: Kueue, cluster_lab: Lab) -> None:
    setup = kueue.queues(checks=("drained",))
    name = kueue.queued_trainjob(setup)
    wl = kueue.workload_name(name)
    kueue.wait_workload(wl, reserved_and_checked)
    written = kueue.scenario.set_check_state(
        kueue.namespace, wl, setup.admission_checks[0], k.CHECK_RETRY, "later", requeue_after_seconds=600
    )
    since = checks(written)[setup.admission_checks[0]]["lastTransitionTime"]
    waiting = kueue.wait_workload(wl, lambda w: bool((w or {}).get("status", {}).get("requeueState")))
    from airflow_provider_dispatch_lab.clock import format_timestamp, parse_timestamp

    assert waiting["status"]["requeueState"]["requeueAt"] == format_timestamp(parse_timestamp(since) + 600)
    cluster_lab.call(lambda: cluster_lab.clock.advance(600))
    requeued = kueue.wait_workload(wl, lambda w: reserved(w) and has(w, k.REQUEUED, "True", k.REASON_BACKOFF_FINISHED))
    assert checks(requeued)[setup.admission_checks[0]]["retryCount"] == 1
    assert kueue.trainjob(name)["spec"]["suspend"] is True


def test_rejected_deactivates_evicts_and_releases(kueue: Kueue) -> None:
    setup = kueue.queues(checks=("drained",))
    name = kueue.queued_trainjob(setup)
    wl = kueue.workload_name(name)
    kueue.wait_workload(wl, reserved_and_checked)
    check_name = setup.admission_checks[0]
    kueue.scenario.set_check_state(kueue.namespace, wl, check_name, k.CHECK_REJECTED, "never")
    done = kueue.wait_workload(wl, lambda w: w["spec"]["active"] is False and has(w, k.QUOTA_RESERVED, "False"))
    assert condition(done, k.EVICTED)["reason"] == "DeactivatedDueToAdmissionCheck"
    assert condition(done, k.EVICTED)["message"] == (
        f'The workload is deactivated due to AdmissionCheck in Rejected state: "{check_name}" (never)'
    )
    assert condition(done, k.DEACTIVATION_TARGET) is None
    assert has(done, k.REQUEUED, "False", "DeactivatedDueToAdmissionCheck")
    assert kueue.trainjob(name)["spec"]["suspend"] is True


def test_a_deactivated_workload_waits_until_it_is_reactivated(kueue: Kueue) -> None:
    setup = kueue.queues()
    name, wl, _ = _admitted_and_running(kueue, check=False)
    del setup
    kueue.patch_workload(wl, {"spec": {"active": False}})
    evicted = kueue.wait_workload(wl, lambda w: has(w, k.EVICTED, "True", k.EVICTED_BY_DEACTIVATION))
    assert condition(evicted, k.EVICTED)["message"] == "The workload is deactivated"
    kueue.wait_trainjob(name, lambda tj: tj["spec"].get("suspend") is True)
    kueue.report_jobs(name, active=0)
    released = kueue.wait_workload(wl, lambda w: has(w, k.QUOTA_RESERVED, "False"))
    assert has(released, k.REQUEUED, "False", k.EVICTED_BY_DEACTIVATION)
    kueue.patch_workload(wl, {"spec": {"active": True}})
    back = kueue.wait_workload(wl, lambda w: admitted(w) and has(w, k.REQUEUED, "True", k.REASON_REACTIVATED))
    assert condition(back, k.REQUEUED)["message"] == "The workload was reactivated"
    kueue.wait_trainjob(name, lambda tj: tj["spec"].get("suspend") is False)


def test_a_preempted_workload_requeues_at_once_with_its_checks_reset(kueue: Kueue) -> None:
    name, wl, check_name = _admitted_and_running(kueue)
    kueue.scenario.preempt(kueue.namespace, wl)
    evicted = kueue.wait_workload(wl, lambda w: has(w, k.EVICTED, "True", k.EVICTED_BY_PREEMPTION))
    message = condition(evicted, k.EVICTED)["message"]
    assert message.startswith("Preempted to accommodate a workload (UID: UNKNOWN, JobUID: UNKNOWN)")
    assert condition(evicted, k.PREEMPTED)["reason"] == k.REASON_IN_CLUSTER_QUEUE
    assert checks(evicted)[check_name]["message"] == "Reset to Pending after eviction. Previously: Ready"
    kueue.wait_trainjob(name, lambda tj: tj["spec"].get("suspend") is True)
    kueue.report_jobs(name, active=0)
    again = kueue.wait_workload(wl, lambda w: reserved(w) and has(w, k.REQUEUED, "True", k.EVICTED_BY_PREEMPTION))
    assert checks(again)[check_name]["state"] == k.CHECK_PENDING
    assert has(again, k.ADMITTED, "False", k.REASON_UNSATISFIED_CHECKS)
    assert kueue.trainjob(name)["spec"]["suspend"] is True


def test_a_higher_priority_workload_preempts_a_lower_one(kueue: Kueue) -> None:
    setup = kueue.queues(cpu="4", preemption="LowerPriority")
    low = kueue.queued_trainjob(setup, labels={k.PRIORITY_CLASS_LABEL: "low"})
    low_wl = kueue.workload_name(low)
    kueue.wait_workload(low_wl, admitted)
    assert kueue.workload(low_wl)["spec"]["priorityClassRef"] == {
        "group": "kueue.x-k8s.io",
        "kind": "WorkloadPriorityClass",
        "name": "low",
    }
    high = kueue.queued_trainjob(setup, labels={k.PRIORITY_CLASS_LABEL: "high"})
    high_wl = kueue.workload_name(high)
    evicted = kueue.wait_workload(low_wl, lambda w: has(w, k.EVICTED, "True", k.EVICTED_BY_PREEMPTION))
    preemptor = kueue.workload(high_wl)
    assert condition(evicted, k.PREEMPTED)["message"] == (
        f"Preempted to accommodate a workload (UID: {preemptor['metadata']['uid']}, "
        f"JobUID: {kueue.trainjob(high)['metadata']['uid']}) due to prioritization in the ClusterQueue; "
        f"preemptor path: /{setup.cluster_queue}; preemptee path: /{setup.cluster_queue}"
    )
    kueue.wait_workload(high_wl, admitted)  # the low one's jobs were never active: released at once
    waiting = kueue.wait_workload(low_wl, lambda w: has(w, k.QUOTA_RESERVED, "False", k.REASON_WAITING_FOR_QUOTA))
    assert has(waiting, k.REQUEUED, "True", k.EVICTED_BY_PREEMPTION)


def test_a_finished_trainjob_finishes_its_workload_and_frees_the_quota(kueue: Kueue) -> None:
    setup = kueue.queues(cpu="4")
    first = kueue.queued_trainjob(setup)
    first_wl = kueue.workload_name(first)
    kueue.wait_workload(first_wl, admitted)
    second_wl = kueue.workload_name(kueue.queued_trainjob(setup))
    kueue.wait_workload(second_wl, lambda w: has(w, k.QUOTA_RESERVED, "False"))
    kueue.report_finished(first)
    finished = kueue.wait_workload(
        first_wl, lambda w: has(w, k.FINISHED, "True") and not w["metadata"].get("finalizers")
    )
    assert (condition(finished, k.FINISHED)["reason"], condition(finished, k.FINISHED)["message"]) == (
        k.REASON_SUCCEEDED,
        "jobset completed successfully",
    )
    kueue.wait_workload(second_wl, reserved)


def test_deleting_the_trainjob_takes_kueues_finalizer_off(kueue: Kueue) -> None:
    setup = kueue.queues()
    name = kueue.queued_trainjob(setup)
    wl = kueue.workload_name(name)
    kueue.wait_workload(wl, reserved)
    kueue.delete_trainjob(name)
    kueue.wait_workload(wl, lambda w: w is None or not w["metadata"].get("finalizers"))

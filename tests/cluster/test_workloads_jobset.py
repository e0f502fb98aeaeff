"""The JobSet controller and its webhooks, on JobSets created directly (k8s-apis.md §2.1, §2.2, §6 rule 5)."""

from __future__ import annotations

from typing import Any

import pytest
from api_answers import expect_answer
from kubernetes.client import ApiException

from airflow_provider_dispatch_lab.simulated.workloads.garbage_collector import GarbageCollector
from airflow_provider_dispatch_lab.simulated.workloads.job import JobController
from airflow_provider_dispatch_lab.simulated.workloads.jobset import JobSetController

from .workload_steps import (
    JOBSET,
    Workloads,
    condition,
    immutable_replicated_jobs,
    job_condition,
    replace_jobset,
    unique,
)

CONTROLLERS = [JobSetController, JobController, GarbageCollector]
RESTART_ATTEMPT = "jobset.sigs.k8s.io/restart-attempt"
TOLERATION = {"key": "example.com/pool", "operator": "Exists", "effect": "NoSchedule"}


def _jobset(name: str, *, replicas: int = 2, suspend: bool = False) -> dict[str, Any]:
    pod_template = {
        "metadata": {"labels": {"example.com/keep": "old", "example.com/version": "1"}},
        "spec": {"terminationGracePeriodSeconds": 30, "containers": [{"name": "node", "image": "busybox:1.36"}]},
    }
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name},
        "spec": {
            "suspend": suspend,
            "replicatedJobs": [
                {
                    "name": "worker",
                    "replicas": replicas,
                    "template": {"spec": {"parallelism": 1, "completions": 1, "template": pod_template}},
                }
            ],
        },
    }


def _create(workloads: Workloads, body: dict[str, Any]) -> dict[str, Any]:
    created: dict[str, Any] = workloads.custom.create_namespaced_custom_object(
        *JOBSET, workloads.namespace, "jobsets", body
    )
    return created


def _update(workloads: Workloads, name: str, change: Any) -> dict[str, Any]:
    return replace_jobset(workloads.custom, workloads.namespace, name, change)


def _pod_spec(spec: dict[str, Any]) -> dict[str, Any]:
    template: dict[str, Any] = spec["replicatedJobs"][0]["template"]["spec"]["template"]
    return template


def test_jobs_are_named_labelled_and_defaulted_as_jobset_does(workloads: Workloads) -> None:
    name = unique("js")
    created = _create(workloads, _jobset(name))
    worker = created["spec"]["replicatedJobs"][0]["template"]["spec"]
    assert worker["completionMode"] == "Indexed"  # the JobSet webhook's defaults
    assert worker["template"]["spec"]["restartPolicy"] == "OnFailure"
    job = workloads.wait_job(f"{name}-worker-1", lambda j: j is not None)
    labels, annotations = job.metadata.labels, job.metadata.annotations
    pod_labels = job.spec.template.metadata.labels
    expected = {
        "jobset.sigs.k8s.io/jobset-name": name,
        "jobset.sigs.k8s.io/jobset-uid": created["metadata"]["uid"],
        "jobset.sigs.k8s.io/replicatedjob-name": "worker",
        "jobset.sigs.k8s.io/replicatedjob-replicas": "2",
        "jobset.sigs.k8s.io/global-replicas": "2",
        "jobset.sigs.k8s.io/job-index": "1",
        "jobset.sigs.k8s.io/job-global-index": "1",
        "jobset.sigs.k8s.io/restart-attempt": "0",
        "jobset.sigs.k8s.io/group-name": "default",
    }
    for key, value in expected.items():
        assert labels[key] == annotations[key] == pod_labels[key] == value
    assert job.spec.template.spec.subdomain == name
    (owner,) = job.metadata.owner_references
    assert (owner.kind, owner.uid, owner.controller) == ("JobSet", created["metadata"]["uid"], True)


def test_suspend_keeps_the_jobs_and_resume_merges_the_template(workloads: Workloads) -> None:
    name = unique("js")
    _create(workloads, _jobset(name, replicas=1))
    job_name = f"{name}-worker-0"
    workloads.wait_job(job_name, lambda j: j is not None and j.status.start_time is not None)
    _update(workloads, name, lambda spec: spec.__setitem__("suspend", True))
    suspended = workloads.wait_jobset(name, lambda js: (condition(js, "Suspended") or {}).get("status") == "True")
    assert suspended is not None
    state = condition(suspended, "Suspended") or {}
    assert (state["reason"], state["message"]) == ("SuspendedJobs", "jobset is suspended")
    assert workloads.batch.read_namespaced_job(job_name, workloads.namespace).spec.suspend is True

    def change(spec: dict[str, Any]) -> None:
        template = _pod_spec(spec)
        template["metadata"]["labels"] = {"example.com/version": "2"}  # drops example.com/keep
        template["spec"]["tolerations"] = [TOLERATION]
        template["spec"]["nodeSelector"] = {"example.com/pool": "a"}

    _update(workloads, name, change)  # allowed: the JobSet is suspended
    _update(workloads, name, lambda spec: spec.__setitem__("suspend", False))
    job = workloads.wait_job(job_name, lambda j: j.spec.suspend is False and j.status.start_time is not None)
    labels = job.spec.template.metadata.labels
    assert (labels["example.com/version"], labels["example.com/keep"]) == ("2", "old")  # MergeMaps: old keys stay
    assert job.spec.template.spec.node_selector == {"example.com/pool": "a"}
    assert [t.key for t in job.spec.template.spec.tolerations] == ["example.com/pool"]
    assert job_condition(job, "Suspended").reason == "JobResumed"
    resumed = workloads.wait_jobset(name, lambda js: (condition(js, "Suspended") or {}).get("status") == "False")
    assert (condition(resumed, "Suspended") or {})["reason"] == "ResumeJobs"


def test_the_webhook_refuses_template_changes_of_a_running_jobset(workloads: Workloads) -> None:
    name = unique("js")
    _create(workloads, _jobset(name, replicas=1))

    def relabel(spec: dict[str, Any]) -> None:
        _pod_spec(spec)["metadata"]["labels"]["example.com/version"] = "2"

    with pytest.raises(ApiException) as refused:
        _update(workloads, name, relabel)
    immutable_replicated_jobs(refused.value, name)  # 422 Invalid since JobSet v0.12.0 (it was 403 before)

    def change_image(spec: dict[str, Any]) -> None:
        spec["suspend"] = True
        _pod_spec(spec)["spec"]["containers"][0]["image"] = "busybox:1.37"

    with pytest.raises(ApiException) as still_refused:  # only the five scheduling fields may change
        _update(workloads, name, change_image)
    assert expect_answer(still_refused.value, 422, "Invalid")["message"].endswith(": field is immutable")


def test_an_update_is_not_defaulted_again(workloads: Workloads) -> None:
    """JobSet's mutating webhook runs on CREATE only (v0.9.0 and later): an update that drops a field the webhook
    defaulted at creation keeps it dropped, and the validator refuses it, as the real control plane does."""
    name = unique("js")
    _create(workloads, _jobset(name, replicas=1, suspend=True))

    def drop_completion_mode(spec: dict[str, Any]) -> None:
        del spec["replicatedJobs"][0]["template"]["spec"]["completionMode"]

    with pytest.raises(ApiException) as refused:
        _update(workloads, name, drop_completion_mode)
    status = immutable_replicated_jobs(refused.value, name)
    assert '"completionMode"' not in status["message"]  # the value shown is the update's, without it
    current = workloads.custom.get_namespaced_custom_object(*JOBSET, workloads.namespace, "jobsets", name)
    assert current["spec"]["replicatedJobs"][0]["template"]["spec"]["completionMode"] == "Indexed"

    def drop_network(spec: dict[str, Any]) -> None:  # outside spec.replicatedJobs: nothing refuses it
        del spec["network"]

    assert "network" not in _update(workloads, name, drop_network)["spec"]


def test_the_jobs_of_a_previous_jobset_of_the_same_name_are_not_its_own(workloads: Workloads) -> None:
    """`getChildJobs` lists Jobs by the controller owner's UID: a finished Job left by a deleted JobSet of the
    same name (the garbage collector has not removed it yet) does not complete the new one."""
    name = unique("js")
    stale = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": f"{name}-worker-previous",
            "labels": {"jobset.sigs.k8s.io/replicatedjob-name": "worker", RESTART_ATTEMPT: "0"},
            # keeps it while the garbage collector deletes it: its owner's UID names no JobSet
            "finalizers": ["example.com/hold"],
            "ownerReferences": [
                {
                    "apiVersion": "jobset.x-k8s.io/v1alpha2",
                    "kind": "JobSet",
                    "name": name,
                    "uid": "00000000-0000-0000-0000-00000000dead",
                    "controller": True,
                }
            ],
        },
        "spec": {
            "suspend": True,
            "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "node", "image": "busybox"}]}},
        },
    }
    workloads.batch.create_namespaced_job(workloads.namespace, stale)
    now = "2026-01-01T00:00:00Z"
    done = [
        {"type": kind, "status": "True", "lastProbeTime": now, "lastTransitionTime": now}
        for kind in ("SuccessCriteriaMet", "Complete")
    ]
    workloads.batch.patch_namespaced_job_status(
        stale["metadata"]["name"],
        workloads.namespace,
        {"status": {"conditions": done, "succeeded": 1, "startTime": now, "completionTime": now}},
    )
    _create(workloads, _jobset(name, replicas=1))

    def own_job_active(js: dict[str, Any] | None) -> bool:
        statuses = ((js or {}).get("status") or {}).get("replicatedJobsStatus") or [{}]
        return bool(statuses[0].get("active") == 1)

    running = workloads.wait_jobset(name, own_job_active)  # the old code completed it at once instead
    assert running is not None
    assert running["status"]["replicatedJobsStatus"][0]["succeeded"] == 0
    assert condition(running, "Completed") is None
    workloads.batch.patch_namespaced_job(
        stale["metadata"]["name"], workloads.namespace, {"metadata": {"finalizers": None}}
    )


def test_all_jobs_completing_completes_the_jobset(workloads: Workloads) -> None:
    name = unique("js")
    _create(workloads, _jobset(name, replicas=2))
    for index in range(2):
        workloads.wait_job(f"{name}-worker-{index}", lambda j: j is not None)
    pods = workloads.wait_pods(f"jobset.sigs.k8s.io/jobset-name={name}", lambda pods: len(pods) == 2)
    workloads.start(pods)
    first = pods[0].metadata.name
    workloads.report_finished(first, "Succeeded")
    partial = workloads.wait_jobset(
        name, lambda js: ((js.get("status") or {}).get("replicatedJobsStatus") or [{}])[0].get("succeeded") == 1
    )
    assert condition(partial, "Completed") is None
    workloads.report_finished(pods[1].metadata.name, "Succeeded")
    done = workloads.wait_jobset(name, lambda js: condition(js, "Completed") is not None)
    assert done is not None
    completed = condition(done, "Completed") or {}
    assert (completed["reason"], completed["message"]) == ("AllJobsCompleted", "jobset completed successfully")
    assert done["status"]["terminalState"] == "Completed"


def test_a_failure_policy_restart_recreates_the_jobs_until_max_restarts(workloads: Workloads) -> None:
    name = unique("js")
    body = _jobset(name, replicas=1)
    body["spec"]["failurePolicy"] = {"maxRestarts": 1}
    body["spec"]["replicatedJobs"][0]["template"]["spec"]["backoffLimit"] = 0
    _create(workloads, body)
    selector = f"jobset.sigs.k8s.io/jobset-name={name}"
    for attempt in ("0", "1"):
        job = workloads.wait_job(
            f"{name}-worker-0", lambda j, a=attempt: j is not None and j.metadata.labels[RESTART_ATTEMPT] == a
        )
        assert job.spec.template.metadata.labels[RESTART_ATTEMPT] == attempt
        pods = workloads.wait_pods(
            selector, lambda ps, a=attempt: len(ps) == 1 and ps[0].metadata.labels[RESTART_ATTEMPT] == a
        )
        workloads.start(pods)
        workloads.report_finished(pods[0].metadata.name, "Failed")
        if attempt == "0":
            restarted = workloads.wait_jobset(name, lambda js: (js.get("status") or {}).get("restarts") == 1)
            assert restarted is not None
            assert condition(restarted, "Failed") is None
    failed = workloads.wait_jobset(name, lambda js: condition(js, "Failed") is not None)
    state = condition(failed, "Failed") or {}
    assert state["reason"] == "ReachedMaxRestarts"
    assert state["message"] == (
        f"jobset failed due to reaching max number of restarts (first failed job: {name}-worker-0)"
    )
    assert (failed or {})["status"]["terminalState"] == "Failed"

"""A TrainJob through Trainer, JobSet, the Job controller and the garbage collector, end to end.

The key sequence is the upstream flaw that makes dispatch necessary (k8s-apis.md §2.2, §1.5, §7): after a
suspend, the pods are still Terminating while every count above them says 0 active, and Trainer's webhook
accepts a runtime-patch change; on resume the new pods start beside the old ones unless the Job template says
`podReplacementPolicy: Failed`.
"""

from __future__ import annotations

from typing import Any

import pytest
from api_answers import expect_answer
from kubernetes.client import ApiException

from airflow_provider_dispatch.dispatch.vocabulary import LABEL_JOB_ID, LABEL_SUBMISSION
from airflow_provider_dispatch_lab.scenario import manifests
from airflow_provider_dispatch_lab.simulated.controllers import WORKLOAD_CONTROLLERS

from .workload_steps import (
    ATTEMPT_LABEL,
    JOBSET,
    Workloads,
    attempt_patch,
    condition,
    job_condition,
    runtime,
    trainjob_selector,
    unique,
)

CONTROLLERS = WORKLOAD_CONTROLLERS
STILL_ACTIVE = (
    'admission webhook "validator.trainjob.trainer.kubeflow.org" denied the request: spec.runtimePatches: '
    "Forbidden: RuntimePatches cannot be modified when the JobSet's ReplicatedJob node is still active"
)
NOT_SUSPENDED = (
    'admission webhook "validator.trainjob.trainer.kubeflow.org" denied the request: spec.runtimePatches: '
    "Forbidden: RuntimePatches can only be modified when the TrainJob is suspended before or after the update"
)


def _jobs_status(obj: dict[str, Any]) -> dict[str, int]:
    entries = (obj.get("status") or {}).get("jobsStatus") or []
    return dict(entries[0]) if entries else {}


def _running_trainjob(workloads: Workloads, **runtime_fields: object) -> str:
    """A TrainJob of 2 nodes with the attempt-1 patch, its pods scheduled and Running."""
    runtime_name = unique("rt")
    workloads.create_runtime(runtime(runtime_name, **runtime_fields))
    name = unique("tj")
    trainjob = manifests.trainjob(name, runtime=runtime_name, suspend=False, num_nodes=2)
    trainjob["spec"]["runtimePatches"] = [attempt_patch("1")]
    workloads.create_trainjob(trainjob)
    pods = workloads.wait_pods(trainjob_selector(name), lambda pods: len(pods) == 2)
    workloads.start(pods)
    workloads.wait_trainjob(name, lambda tj: _jobs_status(tj).get("active") == 1 and _jobs_status(tj).get("ready"))
    return name


def test_the_pods_carry_the_runtime_patch_labels_and_not_the_trainjob_labels(workloads: Workloads) -> None:
    name = _running_trainjob(workloads)
    jobset = workloads.wait_jobset(name, lambda js: js is not None)
    assert jobset is not None
    owner = jobset["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("TrainJob", name, True)
    assert jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["parallelism"] == 2  # trainer.numNodes
    pods = workloads.pods(trainjob_selector(name))
    assert sorted(p.metadata.name.rsplit("-", 1)[0] for p in pods) == [f"{name}-node-0-0", f"{name}-node-0-1"]
    for pod in pods:
        assert pod.metadata.labels[ATTEMPT_LABEL] == "1"
        assert LABEL_JOB_ID not in pod.metadata.labels
        assert LABEL_SUBMISSION not in pod.metadata.labels
        assert pod.metadata.labels["jobset.sigs.k8s.io/replicatedjob-name"] == "node"
        assert pod.metadata.annotations["jobset.sigs.k8s.io/jobset-uid"] == jobset["metadata"]["uid"]
    trainjob = workloads.trainjob(name)
    assert condition(trainjob, "Suspended") is None  # never suspended: the condition is absent
    assert trainjob["spec"]["runtimePatches"][0]["time"]  # stamped by the defaulting webhook


def test_patches_of_an_unsuspended_trainjob_are_refused(workloads: Workloads) -> None:
    name = _running_trainjob(workloads)

    def change(spec: dict[str, object]) -> None:
        spec["runtimePatches"] = [attempt_patch("2")]

    with pytest.raises(ApiException) as refused:
        workloads.update_trainjob(name, change)
    assert expect_answer(refused.value, 403, "Forbidden")["message"] == NOT_SUSPENDED


def test_suspend_leaves_pods_terminating_behind_zero_active_counts(workloads: Workloads) -> None:
    name = _running_trainjob(workloads)

    def suspend_and_change(spec: dict[str, object]) -> None:
        spec["suspend"] = True
        spec["runtimePatches"] = [attempt_patch("2")]

    # Kueue's Stop(): suspend and change the patch in one request, while a Job is active: refused.
    with pytest.raises(ApiException) as refused:
        workloads.update_trainjob(name, suspend_and_change)
    assert expect_answer(refused.value, 403, "Forbidden")["message"] == STILL_ACTIVE
    assert workloads.trainjob(name)["spec"]["suspend"] is False  # the refused update wrote nothing

    workloads.update_trainjob(name, lambda spec: spec.__setitem__("suspend", True))
    suspended = workloads.wait_trainjob(
        name, lambda tj: _jobs_status(tj).get("active") == 0 and (condition(tj, "Suspended") or {}).get("status")
    )
    state = condition(suspended, "Suspended") or {}
    assert (state["status"], state["reason"], state["message"]) == ("True", "Suspended", "TrainJob is suspended")
    assert _jobs_status(suspended)["suspended"] == 1
    job = workloads.wait_job(f"{name}-node-0", lambda j: j is not None and j.status.terminating == 2)
    assert job.status.active == 0
    assert job.spec.suspend is True
    pods = workloads.pods(trainjob_selector(name))
    assert len(pods) == 2
    assert all(p.metadata.deletion_timestamp is not None for p in pods)
    assert all(p.status.phase == "Running" for p in pods)  # no kubelet: they stay Terminating
    jobset = workloads.wait_jobset(name, lambda js: js is not None)
    assert jobset is not None
    assert jobset["status"]["replicatedJobsStatus"][0]["active"] == 0
    assert condition(jobset, "Suspended") is not None
    assert (condition(jobset, "Suspended") or {})["reason"] == "SuspendedJobs"

    # The upstream flaw: the patch change is accepted although both pods are still Terminating.
    def change(spec: dict[str, object]) -> None:
        spec["runtimePatches"] = [attempt_patch("2")]

    changed = workloads.update_trainjob(name, change)
    assert changed["spec"]["runtimePatches"][0]["time"]
    assert len(workloads.pods(trainjob_selector(name))) == 2

    workloads.update_trainjob(name, lambda spec: spec.__setitem__("suspend", False))
    pods = workloads.wait_pods(
        trainjob_selector(name),
        lambda pods: sum(1 for p in pods if p.metadata.labels.get(ATTEMPT_LABEL) == "2") == 2,
    )
    old = [p for p in pods if p.metadata.labels.get(ATTEMPT_LABEL) == "1"]
    assert len(old) == 2
    assert all(p.metadata.deletion_timestamp is not None for p in old)
    job = workloads.wait_job(f"{name}-node-0", lambda j: j is not None and j.status.active == 2)
    assert job.spec.template.metadata.labels[ATTEMPT_LABEL] == "2"
    assert job.status.terminating == 2
    resumed = workloads.wait_trainjob(name, lambda tj: (condition(tj, "Suspended") or {}).get("status") == "False")
    assert (condition(resumed, "Suspended") or {})["reason"] == "Resumed"


def test_replacement_policy_failed_waits_for_the_terminating_pods(workloads: Workloads) -> None:
    name = _running_trainjob(workloads, podReplacementPolicy="Failed")
    workloads.update_trainjob(name, lambda spec: spec.__setitem__("suspend", True))
    workloads.wait_trainjob(name, lambda tj: _jobs_status(tj).get("active") == 0)

    def change(spec: dict[str, object]) -> None:
        spec["runtimePatches"] = [attempt_patch("2")]

    workloads.update_trainjob(name, change)
    workloads.update_trainjob(name, lambda spec: spec.__setitem__("suspend", False))
    # The sync that records the resume is the one that would have created pods.
    job = workloads.wait_job(
        f"{name}-node-0",
        lambda j: (c := job_condition(j, "Suspended")) is not None and c.status == "False",
    )
    assert job.status.active == 0
    assert job.status.terminating == 2
    pods = workloads.pods(trainjob_selector(name))
    assert len(pods) == 2
    assert all(p.metadata.labels[ATTEMPT_LABEL] == "1" for p in pods)

    # The kubelet confirms one termination: exactly that index is replaced, with the new labels.
    gone = sorted(pods, key=lambda p: p.metadata.name)[0]
    workloads.confirm_termination(gone.metadata.name)
    pods = workloads.wait_pods(
        trainjob_selector(name), lambda pods: any(p.metadata.labels.get(ATTEMPT_LABEL) == "2" for p in pods)
    )
    new = [p for p in pods if p.metadata.labels[ATTEMPT_LABEL] == "2"]
    assert len(new) == 1
    index = "batch.kubernetes.io/job-completion-index"
    assert new[0].metadata.annotations[index] == gone.metadata.annotations[index]


def test_completion_propagates_to_the_trainjob(workloads: Workloads) -> None:
    name = _running_trainjob(workloads)
    for pod in workloads.pods(trainjob_selector(name)):
        workloads.report_finished(pod.metadata.name, "Succeeded")
    done = workloads.wait_trainjob(name, lambda tj: condition(tj, "Complete") is not None)
    complete = condition(done, "Complete") or {}
    assert (complete["status"], complete["reason"], complete["message"]) == (
        "True",
        "AllJobsCompleted",
        "jobset completed successfully",
    )
    assert _jobs_status(done)["succeeded"] == 1
    job = workloads.batch.read_namespaced_job(f"{name}-node-0", workloads.namespace)
    assert job_condition(job, "Complete").reason == "CompletionsReached"
    assert job_condition(job, "SuccessCriteriaMet") is not None
    assert job.status.succeeded == 2


def test_failure_propagates_to_the_trainjob(workloads: Workloads) -> None:
    name = _running_trainjob(workloads, backoffLimit=0)
    first, second = sorted(p.metadata.name for p in workloads.pods(trainjob_selector(name)))
    workloads.report_finished(first, "Failed")
    # The failing Job deletes its other pod; `Failed` waits until that pod has terminated (1.31+).
    job = workloads.wait_job(f"{name}-node-0", lambda j: job_condition(j, "FailureTarget") is not None)
    assert job_condition(job, "Failed") is None
    assert job.status.terminating == 1
    workloads.wait_pods(trainjob_selector(name), lambda ps: any(p.metadata.deletion_timestamp for p in ps))
    assert condition(workloads.trainjob(name), "Failed") is None
    workloads.confirm_termination(second)
    failed = workloads.wait_trainjob(name, lambda tj: condition(tj, "Failed") is not None)
    reason = condition(failed, "Failed") or {}
    assert reason["reason"] == "FailedJobs"
    assert reason["message"] == f"jobset failed due to one or more job failures (first failed job: {name}-node-0)"
    job = workloads.batch.read_namespaced_job(f"{name}-node-0", workloads.namespace)
    assert job_condition(job, "Failed").reason == "BackoffLimitExceeded"
    assert job_condition(job, "FailureTarget") is not None


def test_a_failed_trainjob_whose_jobset_disappears_runs_again(workloads: Workloads) -> None:
    """Trainer v2.3.0's hazard, kept (a limit in docs/fidelity.md): `Reconcile` clears a `Failed` condition on
    every pass (`removeFailedCondition`), so once the JobSet of a failed TrainJob is gone (deleted, or its TTL
    after finished) the TrainJob looks unfinished and `Build` applies a new JobSet, unsuspended: the training runs
    again although nobody admitted it (no new runtime patch; under Kueue its Workload is already Finished).
    Fixed on Trainer's master by kubeflow/trainer#3891, after v2.3.0."""
    name = _running_trainjob(workloads, backoffLimit=0)
    first, second = sorted(p.metadata.name for p in workloads.pods(trainjob_selector(name)))
    workloads.report_finished(first, "Failed")
    workloads.wait_pods(trainjob_selector(name), lambda ps: any(p.metadata.deletion_timestamp for p in ps))
    workloads.confirm_termination(second)
    failed = workloads.wait_trainjob(name, lambda tj: condition(tj, "Failed") is not None)
    old_jobset = workloads.wait_jobset(name, lambda js: js is not None)
    assert old_jobset is not None

    workloads.custom.delete_namespaced_custom_object(*JOBSET, workloads.namespace, "jobsets", name)

    rebuilt = workloads.wait_jobset(
        name, lambda js: js is not None and js["metadata"]["uid"] != old_jobset["metadata"]["uid"]
    )
    assert rebuilt is not None
    assert rebuilt["spec"]["suspend"] is False
    old_pods = {first, second}
    again = workloads.wait_pods(
        trainjob_selector(name), lambda ps: len([p for p in ps if p.metadata.name not in old_pods]) == 2
    )
    new_pods = [p for p in again if p.metadata.name not in old_pods]
    assert {p.metadata.labels[ATTEMPT_LABEL] for p in new_pods} == {"1"}  # the same patch: no new admission
    running = workloads.wait_trainjob(name, lambda tj: condition(tj, "Failed") is None)
    assert running["spec"]["runtimePatches"] == failed["spec"]["runtimePatches"]
    assert running["spec"]["suspend"] is False


def test_deleting_the_trainjob_cascades_to_jobset_jobs_and_pods(workloads: Workloads) -> None:
    name = _running_trainjob(workloads)
    pods = [p.metadata.name for p in workloads.pods(trainjob_selector(name))]
    workloads.delete_trainjob(name)
    assert workloads.wait_jobset(name, lambda js: js is None) is None
    assert workloads.wait_job(f"{name}-node-0", lambda j: j is None) is None
    terminating = workloads.wait_pods(
        trainjob_selector(name), lambda ps: len(ps) == 2 and all(p.metadata.deletion_timestamp for p in ps)
    )
    assert sorted(p.metadata.name for p in terminating) == sorted(pods)
    for pod in pods:
        workloads.confirm_termination(pod)
    assert workloads.wait_pods(trainjob_selector(name), lambda ps: not ps) == []


def test_a_trainjob_created_before_its_runtime_starts_once_the_runtime_exists(workloads: Workloads) -> None:
    runtime_name, name = unique("rt"), unique("tj")
    workloads.create_trainjob(manifests.trainjob(name, runtime=runtime_name, suspend=False, num_nodes=1))
    assert workloads.wait_trainjob(name, lambda tj: tj is not None)["spec"]["suspend"] is False
    assert workloads.wait_jobset(name, lambda js: True) is None  # no runtime, no JobSet
    workloads.create_runtime(runtime(runtime_name))
    assert workloads.wait_jobset(name, lambda js: js is not None) is not None


def test_the_active_deadline_fails_the_trainjob_and_deletes_its_jobset(workloads: Workloads) -> None:
    runtime_name, name = unique("rt"), unique("tj")
    workloads.create_runtime(runtime(runtime_name))
    trainjob = manifests.trainjob(name, runtime=runtime_name, suspend=False, num_nodes=1)
    trainjob["spec"]["activeDeadlineSeconds"] = 60  # lab seconds: 0.6 s of wall time at speed 100
    workloads.create_trainjob(trainjob)
    failed = workloads.wait_trainjob(name, lambda tj: condition(tj, "Failed") is not None)
    state = condition(failed, "Failed") or {}
    assert (state["reason"], state["message"]) == ("DeadlineExceeded", "TrainJob exceeded its active deadline")
    assert workloads.wait_jobset(name, lambda js: js is None) is None

"""The workload controllers' pure rules, table by table (no lab needed)."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest
from api_answers import expect_answer

from airflow_provider_dispatch_lab.apiserver.auth.auth import UserInfo
from airflow_provider_dispatch_lab.apiserver.registry.admission import AdmissionRequest
from airflow_provider_dispatch_lab.apiserver.registry.resources import default_registry
from airflow_provider_dispatch_lab.clock import LabClock
from airflow_provider_dispatch_lab.simulated import webhook_errors
from airflow_provider_dispatch_lab.simulated.objects import merge_maps, merge_patch_diff, merge_slices
from airflow_provider_dispatch_lab.simulated.work_queue import KeyedQueue
from airflow_provider_dispatch_lab.simulated.workloads import job_pods as jp
from airflow_provider_dispatch_lab.simulated.workloads import jobset_jobs as jj
from airflow_provider_dispatch_lab.simulated.workloads import trainer_build as tb
from airflow_provider_dispatch_lab.simulated.workloads.jobset_webhooks import update_errors
from airflow_provider_dispatch_lab.simulated.workloads.trainer_webhooks import TrainJobDefaulter, TrainJobValidator

Obj = dict[str, Any]
NOW = "2026-08-21T10:00:00Z"


def _runtime(*, ml_policy: Obj | None = None, ancestor: bool = True, parallelism: int | None = None) -> Obj:
    job_template: Obj = {
        "metadata": {"labels": {tb.ANCESTOR_LABEL: "trainer"} if ancestor else {}},
        "spec": {"template": {"spec": {"containers": [{"name": "node", "image": "torch:1"}]}}},
    }
    if parallelism is not None:
        job_template["spec"]["parallelism"] = parallelism
    spec: Obj = {
        "template": {
            "metadata": {"labels": {"from": "runtime", "shared": "runtime"}},
            "spec": {"replicatedJobs": [{"name": "node", "template": job_template}]},
        }
    }
    if ml_policy is not None:
        spec["mlPolicy"] = ml_policy
    return {"metadata": {"name": "rt"}, "spec": spec}


def _trainjob(*, num_nodes: int | None = None, patches: list[Obj] | None = None, suspend: bool = False) -> Obj:
    spec: Obj = {"runtimeRef": {"name": "rt"}, "suspend": suspend, "runtimePatches": patches or []}
    if num_nodes is not None:
        spec["trainer"] = {"numNodes": num_nodes}
    return {"metadata": {"name": "tj", "namespace": "ns", "uid": "u1", "labels": {"tj": "own"}}, "spec": spec}


def _job_semantics() -> Any:
    jobs = default_registry().by_path("batch", "v1", "jobs")
    assert jobs is not None
    return jobs.schema.strategic_list_semantics


@pytest.mark.parametrize(
    ("runtime", "num_nodes", "expected"),
    [
        (_runtime(ml_policy={"numNodes": 3}), 2, [2]),
        (_runtime(ml_policy={"numNodes": 3}), None, [3]),
        (_runtime(ml_policy={}), None, [1]),
        (_runtime(), 4, [4]),
        (_runtime(ancestor=False, parallelism=5), 2, [5]),
        (_runtime(ancestor=False), None, [1]),
    ],
    ids=["trainjob-wins", "ml-policy", "ml-policy-default", "plain-ml", "not-the-trainer", "parallelism-default"],
)
def test_pod_set_counts(runtime: Obj, num_nodes: int | None, expected: list[int]) -> None:
    trainjob = _trainjob(num_nodes=num_nodes)
    assert tb.pod_set_counts(runtime, trainjob, runtime["spec"]["template"]["spec"]) == expected


def _patch(manager: str, *, labels: Obj | None = None, pod_labels: Obj | None = None, env: str = "") -> Obj:
    pod_template: Obj = {"metadata": {"labels": pod_labels or {}}}
    if env:
        pod_template["spec"] = {"containers": [{"name": "node", "env": [{"name": env, "value": "1"}]}]}
    return {
        "manager": manager,
        "trainingRuntimeSpec": {
            "template": {
                "metadata": {"labels": labels or {}},
                "spec": {
                    "replicatedJobs": [
                        {"name": "node", "template": {"spec": {"template": pod_template}}},
                        {"name": "absent", "template": {"metadata": {"labels": {"ignored": "x"}}}},
                    ]
                },
            }
        },
    }


def test_build_jobset_merges_patches_in_order_and_never_copies_trainjob_labels() -> None:
    patches = [
        _patch("a.example/m", labels={"shared": "a"}, pod_labels={"attempt": "1"}, env="A"),
        _patch("b.example/m", labels={"shared": "b"}, pod_labels={"attempt": "2"}, env="B"),
    ]
    built = tb.build_jobset(_trainjob(num_nodes=2, patches=patches), _runtime(), _job_semantics())
    assert built["metadata"]["labels"] == {"from": "runtime", "shared": "b"}
    assert built["metadata"]["ownerReferences"][0]["uid"] == "u1"
    (node,) = built["spec"]["replicatedJobs"]
    pod = node["template"]["spec"]["template"]
    assert pod["metadata"]["labels"] == {"attempt": "2"}
    (container,) = pod["spec"]["containers"]  # merged by name: image kept, env lists merged by name
    assert container["image"] == "torch:1"
    assert sorted(e["name"] for e in container["env"]) == ["A", "B"]
    assert (node["template"]["spec"]["parallelism"], node["template"]["spec"]["completions"]) == (2, 2)
    assert built["spec"]["suspend"] is False
    assert "tj" not in built["metadata"]["labels"]  # the TrainJob's own label
    assert "tj" not in pod["metadata"]["labels"]


@pytest.mark.parametrize(
    ("trainjob_suspended", "jobset", "expected"),
    [
        (False, None, True),
        (True, {"spec": {"suspend": False}}, True),
        (False, {"spec": {"suspend": True}}, True),
        (False, {"spec": {"suspend": False}}, False),
    ],
)
def test_the_jobset_is_not_reapplied_while_both_run(
    trainjob_suspended: bool, jobset: Obj | None, expected: bool
) -> None:
    assert tb.should_apply(_trainjob(suspend=trainjob_suspended), jobset) is expected


@pytest.mark.parametrize(
    ("suspend", "before", "expected"),
    [
        (True, None, ("True", "Suspended", "TrainJob is suspended")),
        (False, None, None),
        (False, "True", ("False", "Resumed", "TrainJob is resumed")),
        (True, "False", ("True", "Suspended", "TrainJob is suspended")),
    ],
)
def test_suspended_condition(suspend: bool, before: str | None, expected: tuple[str, str, str] | None) -> None:
    status: Obj = {
        "conditions": [{"type": "Suspended", "status": before, "lastTransitionTime": "t0"}] if before else []
    }
    tb.set_suspended_condition(_trainjob(suspend=suspend), status, NOW)
    found = [c for c in status["conditions"] if c["type"] == "Suspended"]
    if expected is None:
        assert found == []
    else:
        assert (found[0]["status"], found[0]["reason"], found[0]["message"]) == expected
        assert found[0]["lastTransitionTime"] == (NOW if before != expected[0] else "t0")


def test_copy_jobset_status_renames_terminal_conditions_and_copies_counts() -> None:
    jobset = {
        "status": {
            "conditions": [
                {
                    "type": "Completed",
                    "status": "True",
                    "reason": "AllJobsCompleted",
                    "message": "m",
                    "lastTransitionTime": "t1",
                },
                {
                    "type": "Suspended",
                    "status": "False",
                    "reason": "ResumeJobs",
                    "message": "r",
                    "lastTransitionTime": "t2",
                },
            ],
            "replicatedJobsStatus": [
                {"name": "node", "ready": 1, "succeeded": 2, "failed": 0, "active": 0, "suspended": 0}
            ],
        }
    }
    status: Obj = {}
    tb.copy_jobset_status(jobset, status, NOW)
    assert status["conditions"] == [
        {"type": "Complete", "status": "True", "reason": "AllJobsCompleted", "message": "m", "lastTransitionTime": "t1"}
    ]
    assert status["jobsStatus"] == [
        {"name": "node", "ready": 1, "succeeded": 2, "failed": 0, "active": 0, "suspended": 0}
    ]
    tb.copy_jobset_status({"status": {}}, status, NOW)
    assert "jobsStatus" not in status


# ----------------------------------------------------------------------------------------- Trainer webhooks


def _with(patches: list[Obj], suspend: bool) -> Obj:
    return {"metadata": {"name": "tj", "namespace": "ns"}, "spec": {"suspend": suspend, "runtimePatches": patches}}


P1 = {"manager": "a.example/m", "time": "t1", "trainingRuntimeSpec": {"template": {"spec": {}}}}
P2 = {"manager": "a.example/m", "time": "t1", "trainingRuntimeSpec": {"template": {"metadata": {"labels": {"x": "1"}}}}}
ACTIVE = {"status": {"replicatedJobsStatus": [{"name": "node", "active": 1}, {"name": "init", "active": 0}]}}
IDLE = {"status": {"replicatedJobsStatus": [{"name": "node", "active": 0}]}}


STILL_ACTIVE = (
    "spec.runtimePatches: Forbidden: RuntimePatches cannot be modified when the JobSet's ReplicatedJob node is "
    "still active"
)
NOT_SUSPENDED = (
    "spec.runtimePatches: Forbidden: RuntimePatches can only be modified when the TrainJob is suspended before or "
    "after the update"
)


@pytest.mark.parametrize(
    ("old", "new", "jobset", "expected"),
    [
        (_with([P1], False), _with([P1], False), ACTIVE, []),
        (_with([P1], False), _with([P2], False), None, [NOT_SUSPENDED]),
        (_with([P1], True), _with([P2], True), ACTIVE, [STILL_ACTIVE]),
        (_with([P1], False), _with([P2], True), ACTIVE, [STILL_ACTIVE]),
        (_with([P1], True), _with([P2], False), IDLE, []),
        (_with([P1], True), _with([P2], True), None, []),
    ],
    ids=["unchanged", "neither-suspended", "active", "suspend-and-change", "resume-and-change", "no-jobset"],
)
def test_runtime_patches_immutability(old: Obj, new: Obj, jobset: Obj | None, expected: list[str]) -> None:
    async def read(namespace: str, name: str) -> Obj | None:
        assert (namespace, name) == ("ns", "tj")
        return jobset

    assert asyncio.run(TrainJobValidator(read).runtime_patches_immutability(old, new)) == expected


def _request(operation: str, obj: Obj, old: Obj | None) -> AdmissionRequest:
    trainjobs = default_registry().by_path("trainer.kubeflow.org", "v1alpha1", "trainjobs")
    assert trainjobs is not None
    return AdmissionRequest(
        operation,  # type: ignore[arg-type]
        trainjobs,
        None,
        "ns",
        "tj",
        obj,
        old,
        UserInfo("test", ()),
        False,
    )


def _trainjob_object(patches: list[Obj]) -> Obj:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "tj", "namespace": "ns"},
        "spec": {"runtimeRef": {"name": "rt"}, "runtimePatches": patches},
    }


@pytest.mark.parametrize(
    ("old_patch", "new_patch", "expected_time"),
    [
        (None, {**P1, "time": None}, "now"),
        (P1, {**P1, "time": None}, "t1"),
        (P1, {**P2, "time": None}, "now"),
        (P1, {**P2, "time": "carried"}, "carried"),
    ],
    ids=["create", "unchanged-keeps-old-time", "changed-gets-now", "changed-keeps-a-carried-time"],
)
def test_the_defaulter_stamps_runtime_patch_times(old_patch: Obj | None, new_patch: Obj, expected_time: str) -> None:
    clock = LabClock(0)
    new = _trainjob_object([{k: v for k, v in new_patch.items() if v is not None}])
    old = None if old_patch is None else _trainjob_object([copy.deepcopy(old_patch)])
    request = _request("CREATE" if old is None else "UPDATE", new, old)
    asyncio.run(TrainJobDefaulter(clock).mutate(request))
    assert new["spec"]["runtimePatches"][0]["time"] == (clock.timestamp() if expected_time == "now" else expected_time)


# ------------------------------------------------------------------------------------------------ JobSet


def _job(rjob: str, *, active: int = 0, ready: int = 0, succeeded: int = 0, suspend: bool = False) -> Obj:
    return {
        "metadata": {"name": f"js-{rjob}", "labels": {jj.REPLICATED_JOB_NAME: rjob, jj.RESTART_ATTEMPT: "0"}},
        "spec": {"parallelism": 2, "completions": 2, "suspend": suspend},
        "status": {"active": active, "ready": ready, "succeeded": succeeded},
    }


def _finished(rjob: str, kind: str, when: str = "t") -> Obj:
    job = _job(rjob)
    job["status"]["conditions"] = [{"type": kind, "status": "True", "reason": "R", "lastTransitionTime": when}]
    return job


JOBSET: Obj = {
    "metadata": {"name": "js", "namespace": "ns", "uid": "js-uid"},
    "spec": {
        "replicatedJobs": [
            {"name": "driver", "replicas": 1, "groupName": "control"},
            {"name": "node", "replicas": 2},
            {"name": "extra", "replicas": 3},
        ]
    },
}


def test_replicated_job_statuses_count_jobs_not_pods() -> None:
    jobs = [
        _job("node", active=2, ready=2),
        _job("node", active=0, ready=0, suspend=True),  # its pods may still be terminating: not active
        _finished("node", "Complete"),
        _finished("extra", "Failed"),
    ]
    statuses = jj.replicated_job_statuses(JOBSET, jj.classify(jobs, restarts=0))
    assert statuses == [
        {"name": "driver", "ready": 0, "succeeded": 0, "failed": 0, "active": 0, "suspended": 0},
        {"name": "node", "ready": 1, "succeeded": 1, "failed": 0, "active": 1, "suspended": 1},
        {"name": "extra", "ready": 0, "succeeded": 0, "failed": 1, "active": 0, "suspended": 0},
    ]
    assert jj.statuses_equal(list(reversed(statuses)), statuses)


def test_jobs_of_a_previous_restart_are_set_apart() -> None:
    old = _job("node")
    owned = jj.classify([old, _job("node")], restarts=1)
    assert (len(owned.previous), len(owned.active)) == (2, 0)


@pytest.mark.parametrize(
    ("rjob", "index", "expected"),
    [("driver", 0, ("0", "0", "1")), ("node", 1, ("2", "1", "5")), ("extra", 2, ("5", "4", "5"))],
)
def test_global_and_group_indexes(rjob: str, index: int, expected: tuple[str, str, str]) -> None:
    spec = next(r for r in jj.replicated_jobs(JOBSET) if r["name"] == rjob)
    keys = jj.jobset_keys(JOBSET, spec, index)
    assert (keys[jj.JOB_GLOBAL_INDEX], keys[jj.JOB_GROUP_INDEX], keys[jj.GROUP_REPLICAS]) == expected
    assert keys[jj.GLOBAL_REPLICAS] == "6"
    assert keys[jj.JOBSET_UID] == "js-uid"


FIRST = " (first failed job: js-node)"


@pytest.mark.parametrize(
    ("policy", "restarts", "expected"),
    [
        (None, 0, jj.FailureOutcome(failed=(jj.FAILED_JOBS[0], jj.FAILED_JOBS[1] + FIRST))),
        ({"maxRestarts": 2}, 1, jj.FailureOutcome(restart_counts=True)),
        (
            {"maxRestarts": 2},
            2,
            jj.FailureOutcome(
                failed=("ReachedMaxRestarts", "jobset failed due to reaching max number of restarts" + FIRST)
            ),
        ),
        (
            {"maxRestarts": 0, "rules": [{"action": "FailJobSet", "targetReplicatedJobs": ["node"]}]},
            0,
            jj.FailureOutcome(
                failed=("FailJobSetFailurePolicyAction", "applying FailJobSet failure policy action" + FIRST)
            ),
        ),
        (
            {"maxRestarts": 0, "rules": [{"action": "RestartJobSetAndIgnoreMaxRestarts"}]},
            5,
            jj.FailureOutcome(restart_counts=False),
        ),
        (
            {"maxRestarts": 3, "rules": [{"action": "FailJobSet", "onJobFailureReasons": ["DeadlineExceeded"]}]},
            0,
            jj.FailureOutcome(restart_counts=True),
        ),
    ],
    ids=["no-policy", "restart", "max-restarts", "fail-rule", "ignore-max", "rule-not-matching"],
)
def test_failure_policy(policy: Obj | None, restarts: int, expected: jj.FailureOutcome) -> None:
    jobset = {
        **JOBSET,
        "spec": {**JOBSET["spec"], "failurePolicy": policy},
        "status": {"restartsCountTowardsMax": restarts},
    }  # type: ignore[dict-item]
    assert jj.failure_outcome(jobset, [_finished("node", "Failed")]) == expected


@pytest.mark.parametrize(
    ("policy", "successful", "expected"),
    [
        (None, ["driver", "node", "node", "extra", "extra"], False),
        (None, ["driver", "node", "node", "extra", "extra", "extra"], True),
        ({"operator": "Any"}, ["extra"], True),
        ({"operator": "All", "targetReplicatedJobs": ["node"]}, ["node", "node"], True),
        ({"operator": "All", "targetReplicatedJobs": ["node"]}, ["driver", "node"], False),
    ],
)
def test_success_policy(policy: Obj | None, successful: list[str], expected: bool) -> None:
    jobset = copy.deepcopy(JOBSET)
    jobset["spec"]["successPolicy"] = policy
    assert jj.success_policy_met(jobset, [_finished(r, "Complete") for r in successful]) is expected


def _webhook_jobset(suspend: bool, *, labels: Obj, image: str = "img:1", tolerations: list[Obj] | None = None) -> Obj:
    pod_spec: Obj = {"containers": [{"name": "c", "image": image}]}
    if tolerations is not None:
        pod_spec["tolerations"] = tolerations
    return {
        "spec": {
            "suspend": suspend,
            "replicatedJobs": [
                {"name": "w", "template": {"spec": {"template": {"metadata": {"labels": labels}, "spec": pod_spec}}}}
            ],
        }
    }


RUNNING, SUSPENDED = _webhook_jobset(False, labels={"a": "1"}), _webhook_jobset(True, labels={"a": "1"})


@pytest.mark.parametrize(
    ("old", "new", "allowed"),
    [
        (RUNNING, _webhook_jobset(False, labels={"a": "1"}), True),
        (RUNNING, _webhook_jobset(False, labels={"a": "2"}), False),
        (SUSPENDED, _webhook_jobset(True, labels={"a": "2"}, tolerations=[{"key": "k"}]), True),
        (RUNNING, _webhook_jobset(True, labels={"a": "2"}), True),
        (SUSPENDED, _webhook_jobset(True, labels={"a": "1"}, image="img:2"), False),
    ],
    ids=["unchanged", "running-relabel", "suspended-scheduling", "suspend-and-relabel", "suspended-image"],
)
def test_jobset_update_rule(old: Obj, new: Obj, allowed: bool) -> None:
    errors = update_errors(old, new)
    assert (errors == []) is allowed
    assert all(
        path == "spec.replicatedJobs" and body.startswith("Invalid value: ") and body.endswith(": field is immutable")
        for path, body in errors
    )


# ---------------------------------------------------------------------------------------------------- Job


def _pod(*, phase: str = "Running", deleting: bool = False, index: int | None = None) -> Obj:
    metadata: Obj = {"name": "p", "annotations": {}}
    if deleting:
        metadata["deletionTimestamp"] = NOW
    if index is not None:
        metadata["annotations"][jp.COMPLETION_INDEX] = str(index)
    return {"metadata": metadata, "status": {"phase": phase}}


@pytest.mark.parametrize(
    ("pod", "policy", "failed", "active", "terminating"),
    [
        (_pod(), "TerminatingOrFailed", False, True, False),
        (_pod(deleting=True), "TerminatingOrFailed", True, False, True),
        (_pod(deleting=True), "Failed", False, False, True),
        (_pod(phase="Failed"), "Failed", True, False, False),
        (_pod(phase="Succeeded", deleting=True), "TerminatingOrFailed", False, False, False),
        (_pod(phase="Pending", deleting=True), "TerminatingOrFailed", True, False, True),
    ],
    ids=["running", "deleting", "deleting-failed-policy", "failed", "succeeded-deleting", "pending-deleting"],
)
def test_pod_classification(pod: Obj, policy: str, failed: bool, active: bool, terminating: bool) -> None:
    job = {"spec": {"podReplacementPolicy": policy}}
    assert jp.is_pod_failed(pod, job) is failed
    assert jp.is_active(pod) is active
    assert jp.is_terminating(pod) is terminating


@pytest.mark.parametrize(
    ("indexes", "text"), [([], ""), ([0], "0"), ([0, 1, 2], "0-2"), ([1, 3, 4, 5, 9], "1,3-5,9"), ([5, 4, 4], "4-5")]
)
def test_completed_indexes_text(indexes: list[int], text: str) -> None:
    assert jp.format_indexes(indexes) == text
    assert jp.parse_indexes(text, 10) == set(indexes)


@pytest.mark.parametrize(
    ("policy", "expected"), [("TerminatingOrFailed", [1, 3]), ("Failed", [3])], ids=["default", "failed"]
)
def test_first_pending_indexes(policy: str, expected: list[int]) -> None:
    job = {"spec": {"completions": 4, "podReplacementPolicy": policy}}
    pods = [_pod(index=0), _pod(index=1, deleting=True), _pod(index=2, phase="Succeeded")]
    assert jp.first_pending_indexes(job, pods, succeeded={2}, count=5) == expected


@pytest.mark.parametrize(
    ("failures", "elapsed", "remaining"), [(0, 0, 0), (1, 4, 6), (2, 5, 15), (3, 50, 0), (7, 0, 600), (12, 0, 600)]
)
def test_pod_failure_backoff(failures: int, elapsed: float, remaining: float) -> None:
    record = jp.BackoffRecord(failures, 1000.0 if failures else None)
    assert record.remaining(1000.0 + elapsed) == remaining


def test_pods_are_created_with_the_finalizer_index_and_owner() -> None:
    job = {
        "metadata": {"name": "j", "uid": "u"},
        "spec": {"template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c"}]}}},
    }
    pod = jp.pod_from_template(job, {"uid": "u", "controller": True}, 3)
    assert pod["metadata"]["generateName"] == "j-3-"
    assert pod["metadata"]["finalizers"] == [jp.TRACKING_FINALIZER]
    assert pod["metadata"]["labels"] == {"a": "b", jp.COMPLETION_INDEX: "3"}
    assert pod["spec"]["hostname"] == "j-3"
    assert pod["spec"]["containers"][0]["env"][0]["name"] == "JOB_COMPLETION_INDEX"
    assert job["spec"]["template"]["spec"]["containers"][0].get("env") is None  # the template is untouched
    assert jp.pod_from_template(job, {}, None)["metadata"]["generateName"] == "j-"


# ------------------------------------------------------------------------------------------------ helpers


@pytest.mark.parametrize(
    ("old", "new", "patch"),
    [
        ({"a": 1}, {"a": 1}, {}),
        ({"a": 1}, {"a": 2}, {"a": 2}),
        ({"a": 1, "b": 2}, {"a": 1}, {"b": None}),
        ({"s": {"x": [1], "y": 1}}, {"s": {"x": [1, 2], "y": 1}}, {"s": {"x": [1, 2]}}),
        ({"s": {"x": 1}}, {"s": [1]}, {"s": [1]}),
    ],
)
def test_merge_patch_diff(old: Obj, new: Obj, patch: Obj) -> None:
    assert merge_patch_diff(old, new) == patch


def test_merge_maps_and_slices() -> None:
    assert merge_maps({"keep": "1", "v": "1"}, {"v": "2"}) == {"keep": "1", "v": "2"}
    assert merge_maps(None, None) is None
    assert merge_slices([{"k": 1}], [{"k": 1}, {"k": 2}]) == [{"k": 1}, {"k": 2}]
    assert merge_slices(None, None) is None


def test_webhook_denial_text() -> None:
    error = webhook_errors.denied("w.example", ["a: Forbidden: x", "a: Forbidden: x", "b: Forbidden: y"])
    expect_answer(error, 403, "Forbidden")
    assert error.message == 'admission webhook "w.example" denied the request: [a: Forbidden: x, b: Forbidden: y]'
    assert webhook_errors.invalid("p", "v", "bad") == 'p: Invalid value: "v": bad'


def test_the_work_queue_hands_a_key_to_one_worker_at_a_time() -> None:
    async def scenario() -> list[str]:
        queue: KeyedQueue[str] = KeyedQueue(LabClock(100))
        queue.add("a")
        queue.add("a")
        queue.add("b")
        assert len(queue) == 2  # deduplicated
        first = await queue.get()
        queue.add(first)  # added while processing: not handed out again yet
        second = await queue.get()
        assert len(queue) == 0
        queue.done(first)  # now it comes back
        third = await queue.get()
        return [first, second, third]

    assert asyncio.run(scenario()) == ["a", "b", "a"]

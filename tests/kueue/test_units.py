"""The controller's pure parts, table-driven: candidates, the admission key, verdicts, our entry, our checks,
the waiting index, and the JSON log lines (the backoff is tests/test_backoff.py)."""

from __future__ import annotations

import copy
import io
import json
import logging
from typing import Any

import pytest

from airflow_provider_dispatch.dispatch import vocabulary as v
from airflow_provider_dispatch.dispatch.assessment import Execution
from airflow_provider_dispatch.dispatch.blocking import Blocking, RemainingPod
from airflow_provider_dispatch.dispatch.errors import (
    ConflictError,
    ForbiddenError,
    NotManagedError,
    PodsRemainError,
    SuspensionNotObservedError,
)
from airflow_provider_dispatch.dispatch.nodes import NodeRead, node_state
from airflow_provider_dispatch.dispatch.payloads import KUEUE_MESSAGE_API_LIMIT
from airflow_provider_dispatch.kueue import checks, verdicts
from airflow_provider_dispatch.kueue.logs import JsonFormatter
from airflow_provider_dispatch.kueue.status_patch import check_entry, clip, entry_unchanged, workload_status_patch
from airflow_provider_dispatch.kueue.verdicts import Retry
from airflow_provider_dispatch.kueue.waiting import WaitingIndex, node_signature
from airflow_provider_dispatch.kueue.workloads import Candidate, Skip, admission_key, candidate, controller_owner

Obj = dict[str, Any]
OURS = frozenset({"drained"})


def cond(kind: str, status: str = "True", at: str = "2026-01-01T00:00:00Z") -> Obj:
    return {"type": kind, "status": status, "reason": kind, "message": "", "lastTransitionTime": at}


def workload(**changes: Any) -> Obj:
    """A quota-reserved Workload of TrainJob ft-7 with our check Pending."""
    wl: Obj = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": "trainjob-ft-7-3f9a1",
            "namespace": "ml",
            "uid": "wl-uid",
            "resourceVersion": "42",
            "ownerReferences": [
                {
                    "apiVersion": "trainer.kubeflow.org/v1alpha1",
                    "kind": "TrainJob",
                    "name": "ft-7",
                    "uid": "tj-uid",
                    "controller": True,
                }
            ],
        },
        "spec": {"active": True},
        "status": {
            "conditions": [cond("QuotaReserved", at="2026-01-01T10:00:00Z"), cond("Admitted", "False")],
            "admissionChecks": [
                {"name": "drained", "state": "Pending", "message": "", "lastTransitionTime": "2026-01-01T09:59:59Z"},
                {"name": "other", "state": "Ready", "message": "", "lastTransitionTime": "2026-01-01T09:59:59Z"},
            ],
        },
    }
    for path, value in changes.items():
        target = wl
        *parents, last = path.split("__")
        for key in parents:
            target = target.setdefault(key, {})
        if value is None:
            target.pop(last, None)
        else:
            target[last] = value
    return wl


@pytest.mark.parametrize(
    ("changes", "skipped"),
    [
        ({}, None),
        ({"status__admissionChecks": [{"name": "other", "state": "Pending"}]}, "none of our admission checks"),
        ({"status__admissionChecks": [{"name": "drained", "state": "Ready"}]}, "not Pending"),
        ({"metadata__deletionTimestamp": "2026-01-01T11:00:00Z"}, "being deleted"),
        ({"spec__active": False}, "deactivated"),
        ({"status__conditions": [cond("QuotaReserved"), cond("Finished")]}, "finished"),
        ({"status__conditions": [cond("QuotaReserved", "False")]}, "no quota reserved"),
        ({"status__conditions": []}, "no quota reserved"),
        ({"status__conditions": [cond("QuotaReserved"), cond("Evicted")]}, "evicted"),
        ({"status__conditions": [cond("QuotaReserved"), cond("Evicted", "False")]}, None),
    ],
)
def test_which_workloads_are_candidates(changes: dict[str, Any], skipped: str | None) -> None:
    found = candidate(workload(**changes), OURS)
    if skipped is None:
        assert isinstance(found, Candidate)
        assert (found.ref, found.uid, set(found.entries)) == ("ml/trainjob-ft-7-3f9a1", "wl-uid", {"drained"})
        assert found.owner is not None
        assert (found.owner.name, found.owner.uid, found.owner.is_trainjob) == ("ft-7", "tj-uid", True)
    else:
        assert isinstance(found, Skip)
        assert skipped in found.reason


@pytest.mark.parametrize(
    ("refs", "owner"),
    [
        ([], None),
        ([{"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "name": "a", "uid": "u"}], None),
        (
            [{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u", "controller": True}],
            ("Job", "j", False),
        ),
        (
            [{"apiVersion": "example.com/v1", "kind": "TrainJob", "name": "t", "uid": "u", "controller": True}],
            ("TrainJob", "t", False),
        ),
        (
            [{"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "name": "t", "controller": True}],
            ("TrainJob", "t", True),
        ),
    ],
)
def test_the_owner_is_the_controller_reference(refs: list[Obj], owner: tuple[str, str, bool] | None) -> None:
    found = controller_owner({"metadata": {"ownerReferences": refs}})
    assert (None if found is None else (found.kind, found.name, found.is_trainjob)) == owner


def evicted_and_reserved_again(wl: Obj, at: str) -> Obj:
    """What Kueue does to a preempted Workload, ending in a new reservation (lab workload_status, upstream evict)."""
    again = copy.deepcopy(wl)
    stats = again["status"].setdefault("schedulingStats", {"evictions": []})
    [entry] = [e for e in stats["evictions"] if e["reason"] == "Preempted"] or [None]
    if entry is None:
        stats["evictions"].append({"reason": "Preempted", "underlyingCause": "", "count": 1})
    else:
        entry["count"] += 1
    again["status"]["conditions"] = [cond("QuotaReserved", at=at), cond("Evicted", "False", at=at)]
    return again


def test_the_admission_key_is_stable_within_one_reservation_and_new_for_the_next() -> None:
    first = workload()
    assert admission_key(first) == "wl-uid/0/2026-01-01T10:00:00Z"
    rewritten = workload(status__conditions=[cond("QuotaReserved", at="2026-01-01T10:00:00Z"), cond("Admitted")])
    rewritten["metadata"]["resourceVersion"] = "57"
    assert admission_key(rewritten) == admission_key(first)  # Kueue's other writes do not change it

    same_second = evicted_and_reserved_again(first, "2026-01-01T10:00:00Z")
    assert admission_key(same_second) == "wl-uid/1/2026-01-01T10:00:00Z"  # the eviction count tells them apart
    no_stats = copy.deepcopy(same_second)
    del no_stats["status"]["schedulingStats"]
    later = copy.deepcopy(no_stats)
    later["status"]["conditions"] = [cond("QuotaReserved", at="2026-01-01T10:05:00Z")]
    assert admission_key(later) != admission_key(first)  # a Kueue without schedulingStats: the time tells them apart
    third = evicted_and_reserved_again(same_second, "2026-01-01T10:09:00Z")
    assert admission_key(third) == "wl-uid/2/2026-01-01T10:09:00Z"
    other = workload(metadata__uid="wl-uid-2")
    assert admission_key(other) != admission_key(first)


def remaining(name: str, node: str | None) -> RemainingPod:
    state = node_state(node, NodeRead.NOT_READABLE if node else None)
    return RemainingPod(name, "ml", f"{name}-uid", "Running", state, Blocking.NOT_FINISHED)


@pytest.mark.parametrize(
    ("error", "state", "retry", "starts"),
    [
        (
            PodsRemainError("ml/ft-7", [remaining("p0", "n1"), remaining("p1", None)]),
            "Pending",
            Retry.WAITING,
            "Let dispatch read node n1: 1 pod on it cannot be proven stopped\n",
        ),
        (SuspensionNotObservedError("not yet", ref="ml/ft-7"), None, Retry.TRANSIENT, "not yet"),
        (ConflictError("409", ref="ml/ft-7"), None, Retry.TRANSIENT, "409"),
        (
            ForbiddenError("ml/ft-7: forbidden: grant it.", ref="ml/ft-7"),
            "Pending",
            Retry.REFUSED,
            "dispatch cannot admit TrainJob ml/ft-7: ml/ft-7: forbidden: grant it. The check stays Pending",
        ),
        (
            NotManagedError("bad label.", ref="ml/ft-7"),
            "Pending",
            Retry.REFUSED,
            "dispatch cannot admit TrainJob ml/ft-7: bad label.",
        ),
    ],
)
def test_drain_check_errors_as_verdicts(error: Exception, state: str | None, retry: Retry, starts: str) -> None:
    if isinstance(error, PodsRemainError):
        verdict = verdicts.pods_remain(error)
    elif isinstance(error, SuspensionNotObservedError | ConflictError):
        verdict = verdicts.transient(error)
    else:
        verdict = verdicts.refused("ml/ft-7", error)  # type: ignore[arg-type]
    assert (verdict.state, verdict.retry) == (state, retry)
    assert verdict.message.startswith(starts)


def test_an_admission_is_ready_and_says_which_execution() -> None:
    verdict = verdicts.admitted("ml/ft-7", Execution("job", "2", 5))
    assert (verdict.state, verdict.retry) == ("Ready", Retry.NONE)
    assert verdict.message == (
        "no pod of the previous execution remains: TrainJob ml/ft-7 is admitted as execution 5 (job id job, "
        "submission 2)"
    )


@pytest.mark.parametrize(
    ("labels", "annotations", "claims"),
    [
        ({}, {}, False),
        ({"app": "x", v.LABEL_KUEUE_QUEUE_NAME: "q"}, {"note": "y"}, False),
        ({v.LABEL_JOB_ID: "j"}, {}, True),
        ({v.LABEL_SUBMISSION: "1"}, {}, True),
        ({}, {v.ANNOTATION_ADMISSION: "x"}, True),
        ({}, {v.ANNOTATION_ADMISSION_KEY: "k"}, True),
    ],
)
def test_what_makes_a_trainjob_a_dispatch_object(labels: Obj, annotations: Obj, claims: bool) -> None:
    assert verdicts.claims_dispatch(labels, annotations) is claims


def test_objects_dispatch_does_not_hold_are_let_through() -> None:
    assert verdicts.not_dispatch("ml/x").state == "Ready"
    assert verdicts.not_a_trainjob(None).state == "Ready"
    assert "no controller ownerReference" in verdicts.not_a_trainjob(None).message
    assert verdicts.owner_replaced("ml/x", "old", "new").state == "Pending"


@pytest.mark.parametrize(
    ("previous", "state", "message", "since", "unchanged"),
    [
        (None, "Pending", "m", "NOW", False),
        ({"state": "Pending", "message": "", "lastTransitionTime": "T0"}, "Pending", "m", "T0", False),
        ({"state": "Pending", "message": "m", "lastTransitionTime": "T0"}, "Pending", "m", "T0", True),
        ({"state": "Pending", "message": "m", "lastTransitionTime": "T0"}, "Ready", "m", "NOW", False),
        ({"state": "Ready", "message": "m"}, "Ready", "n", "NOW", False),
    ],
)
def test_our_entry_keeps_its_time_unless_the_state_changes(
    previous: Obj | None, state: str, message: str, since: str, unchanged: bool
) -> None:
    entry = check_entry("drained", state, message, previous, "NOW")
    assert entry == {"name": "drained", "state": state, "message": message, "lastTransitionTime": since}
    assert entry_unchanged(previous, state, message) is unchanged
    assert "retryCount" not in entry


def test_our_entry_is_applied_alone_and_conditionally() -> None:
    body = workload_status_patch(workload(), [check_entry("drained", "Ready", "ok", None, "NOW")])
    assert body == {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "trainjob-ft-7-3f9a1", "namespace": "ml", "uid": "wl-uid", "resourceVersion": "42"},
        "status": {
            "admissionChecks": [{"name": "drained", "state": "Ready", "message": "ok", "lastTransitionTime": "NOW"}]
        },
    }
    long = "word " * (KUEUE_MESSAGE_API_LIMIT // 5 + 10)
    clipped = clip(long)
    assert KUEUE_MESSAGE_API_LIMIT - 10 < len(clipped) <= KUEUE_MESSAGE_API_LIMIT
    assert clipped.endswith("word ...")
    assert clip("short") == "short"


def admission_check(name: str, controller: str, active: str | None = None, generation: int = 3) -> Obj:
    ac: Obj = {"metadata": {"name": name, "generation": generation}, "spec": {"controllerName": controller}}
    if active is not None:
        ac["status"] = {"conditions": [cond("Active", active)]}
    return ac


def test_which_admission_checks_are_ours_and_their_active_condition() -> None:
    listed = [
        admission_check("drained", v.ADMISSION_CHECK_CONTROLLER, "True"),
        admission_check("second", v.ADMISSION_CHECK_CONTROLLER),
        admission_check("prov", "kueue.x-k8s.io/provisioning-request", "False"),
    ]
    assert checks.our_checks(listed, v.ADMISSION_CHECK_CONTROLLER) == {"drained", "second"}
    only = frozenset({"second", "prov"})
    assert checks.our_checks(listed, v.ADMISSION_CHECK_CONTROLLER, only) == {"second"}
    assert checks.misdirected(listed, v.ADMISSION_CHECK_CONTROLLER, only) == {
        "prov": "kueue.x-k8s.io/provisioning-request"
    }
    assert checks.misdirected(listed, v.ADMISSION_CHECK_CONTROLLER, None) == {}
    assert [checks.needs_activation(ac) for ac in listed] == [False, True, True]
    body = checks.active_status_body(listed[1], v.ADMISSION_CHECK_CONTROLLER, "NOW")
    assert body["metadata"] == {"name": "second"}
    [condition] = body["status"]["conditions"]
    assert {k: condition[k] for k in ("type", "status", "reason", "lastTransitionTime", "observedGeneration")} == {
        "type": "Active",
        "status": "True",
        "reason": "Active",
        "lastTransitionTime": "NOW",
        "observedGeneration": 3,
    }


def test_pod_and_node_events_find_the_waiting_workloads() -> None:
    index = WaitingIndex()
    index.wait(("ml", "wl-1"), ("ml", "ft-7"), ("ml", "job-7", "1"), ["n1", None])
    index.wait(("ml", "wl-2"), ("ml", "other"), None, ["n2"])

    def pod(namespace: str, **labels: str) -> Obj:
        return {"metadata": {"namespace": namespace, "labels": labels}}

    assert index.for_pod(pod("ml", **{v.LABEL_JOBSET_NAME: "ft-7"})) == {("ml", "wl-1")}
    assert index.for_pod(pod("ml", **{v.LABEL_JOB_ID: "job-7", v.LABEL_SUBMISSION: "1"})) == {("ml", "wl-1")}
    assert index.for_pod(pod("other-ns", **{v.LABEL_JOBSET_NAME: "ft-7"})) == set()
    assert index.for_pod(pod("ml")) == set()
    assert index.for_node("n1") == {("ml", "wl-1")}
    assert index.for_node("n2") == {("ml", "wl-2")}
    index.clear(("ml", "wl-1"))
    assert index.all() == {("ml", "wl-2")}

    condition = {"type": "Ready", "status": "True", "lastTransitionTime": "2026-12-04T10:00:00Z"}
    ready = {"metadata": {"name": "n1"}, "status": {"conditions": [condition]}, "spec": {}}
    ready["status"]["conditions"][0]["lastHeartbeatTime"] = "2026-12-04T10:00:00Z"
    tainted = copy.deepcopy(ready)
    tainted["spec"]["taints"] = [{"key": v.TAINT_OUT_OF_SERVICE, "effect": "NoExecute"}]
    reported = copy.deepcopy(ready)
    reported["status"]["conditions"][0]["lastHeartbeatTime"] = "2026-12-04T10:05:00Z"
    other = copy.deepcopy(ready)
    other["status"]["conditions"][0]["reason"] = "KubeletReady"
    assert node_signature(ready) == node_signature(other)  # what the verdict does not read is not news
    # a status report is: how long a node back from a partition has been Ready decides a vanished pod (fencing.py)
    assert node_signature(ready) != node_signature(reported)
    assert node_signature(ready) != node_signature(tainted)
    assert node_signature(None) == "gone"


def test_log_lines_are_json_with_the_extra_fields() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("test.kueue.json")
    logger.addHandler(handler)
    logger.propagate = False
    logger.warning("check %s", "Ready", extra={"workload": "ml/wl", "admission": 2})
    record = json.loads(stream.getvalue())
    assert {k: record[k] for k in ("level", "logger", "message", "workload", "admission")} == {
        "level": "warning",
        "logger": "test.kueue.json",
        "message": "check Ready",
        "workload": "ml/wl",
        "admission": 2,
    }

"""assess(): the status of one object from (TrainJob, JobSet, pods, nodes) (DESIGN §3.1, §7)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from airflow_provider_dispatch.dispatch.assessment import (
    Execution,
    Mode,
    State,
    assess,
    hold_not_observed,
    hold_observed,
    managed,
)
from airflow_provider_dispatch.dispatch.errors import NotManagedError
from airflow_provider_dispatch.dispatch.nodes import NodeLookup
from airflow_provider_dispatch.dispatch.vocabulary import ANNOTATION_ADMISSION, LABEL_JOB_ID

from .support import OUT_OF_SERVICE, condition, evidence, jobset, node, pod, trainjob, workload

TERMINATING = "2026-08-21T10:00:30Z"
NODES: dict[str, NodeLookup] = {"n1": node("n1"), "n2": node("n2", ready="Unknown")}


@pytest.mark.parametrize(
    ("case", "tj", "js", "pods", "state", "cause", "observed"),
    [
        ("held and drained", trainjob(), jobset(), [], State.HELD, "held", True),
        (
            "held, finished pods only",
            trainjob(),
            jobset(),
            [pod("a", phase="Succeeded")],
            State.HELD,
            "held",
            True,
        ),
        ("held, no JobSet yet", trainjob(), None, [], State.HELD, "held", True),
        (
            "pods remain",
            trainjob(),
            jobset(),
            [pod("a", deletion=TERMINATING)],
            State.WAITING,
            "pods remain",
            True,
        ),
        (
            "Suspended condition missing",
            trainjob(suspended_condition=None),
            jobset(),
            [],
            State.WAITING,
            "suspension not yet observed",
            False,
        ),
        (
            "Suspended condition False",
            trainjob(suspended_condition="False"),
            jobset(),
            [],
            State.WAITING,
            "suspension not yet observed",
            False,
        ),
        (
            "JobSet not suspended yet",
            trainjob(),
            jobset(suspend=False),
            [],
            State.WAITING,
            "suspension not yet observed",
            False,
        ),
        (
            "JobSet suspend unset",
            trainjob(),
            jobset(suspend=None),
            [],
            State.WAITING,
            "suspension not yet observed",
            False,
        ),
        (
            "running",
            trainjob(suspend=False, admission="3", suspended_condition="False"),
            jobset(suspend=False),
            [pod("a")],
            State.RUNNING,
            "execution 3 admitted",
            False,
        ),
        (
            "suspend unset means running",
            trainjob(suspend=None, suspended_condition=None),
            None,
            [],
            State.RUNNING,
            "execution 0 admitted",
            False,
        ),
        (
            "succeeded",
            trainjob(
                suspend=False,
                conditions=[condition("Complete", "True", "AllJobsCompleted", "jobset completed successfully")],
            ),
            jobset(suspend=False),
            [],
            State.SUCCEEDED,
            "Complete: AllJobsCompleted",
            False,
        ),
        (
            "failed while held",
            trainjob(
                conditions=[condition("Failed", "True", "DeadlineExceeded", "TrainJob exceeded its active deadline")]
            ),
            None,
            [],
            State.FAILED,
            "Failed: DeadlineExceeded",
            True,
        ),
    ],
)
def test_states(
    case: str,
    tj: dict[str, Any],
    js: dict[str, Any] | None,
    pods: list[dict[str, Any]],
    state: State,
    cause: str,
    observed: bool,
) -> None:
    status = assess(tj, evidence(js, tj), pods, NODES)
    assert status.state is state, case
    assert status.cause == cause, case
    assert status.hold_observed is observed, case
    assert hold_observed(tj, evidence(js, tj)) is observed


def test_waiting_detail_lists_remaining_pods_and_hints() -> None:
    pods = [
        pod("a", node="n1", deletion=TERMINATING),
        pod("b", node="n2", deletion=TERMINATING),
        pod("other", jobset_name="x", job_id="y"),
    ]
    status = assess(trainjob(), evidence(jobset()), pods, NODES)
    # what to do first, as every wait reason (dispatch.reasons): the lost node's remedy, its command, permission and
    # runbook section; then the remaining pods and the explanations
    lines = status.detail.splitlines()
    assert lines[0] == "Confirm n2 is powered off, then taint it out-of-service (Ready=Unknown)"
    assert lines[1] == "kubectl taint node n2 node.kubernetes.io/out-of-service=nodeshutdown:NoExecute"
    assert lines[2].startswith("Needs permission to patch nodes. ")
    assert lines[2].endswith("Runbook: docs/runbook.md#confirm-the-shutdown")
    assert lines[3] == "1 more pod on 1 other node: see below."
    assert lines[4] == "remaining pods: a on n1 (Ready=True), b on n2 (Ready=Unknown)"
    assert [p.name for p in status.remaining] == ["a", "b"]
    assert not status.drained
    assert not status.ceased


def test_not_observed_detail_says_why() -> None:
    status = assess(trainjob(), evidence(jobset(suspend=False)), [], NODES)
    assert status.detail.startswith("JobSet ml/ft-7 does not have spec.suspend true yet")
    assert hold_not_observed(trainjob(suspended_condition=None), evidence(None), 0) is not None


def test_ceased_when_every_remaining_pod_ceased() -> None:
    nodes: dict[str, NodeLookup] = {"n2": node("n2", ready="Unknown", taints=[OUT_OF_SERVICE])}
    status = assess(trainjob(), evidence(jobset()), [pod("b", node="n2", deletion=TERMINATING)], nodes)
    assert (status.state, status.drained, status.ceased) == (State.WAITING, False, True)


def test_drained_is_ceased() -> None:
    status = assess(trainjob(), evidence(jobset()), [], {})
    assert (status.drained, status.ceased) == (True, True)


def test_finished_object_still_lists_remaining_pods() -> None:
    tj = trainjob(conditions=[condition("Failed", "True", "FailedJobs", "jobset failed")])
    status = assess(tj, evidence(None, tj), [pod("a", node="n2", deletion=TERMINATING)], NODES)
    assert status.state is State.FAILED
    assert "remaining pods: a on n2 (Ready=Unknown)" in status.detail


def test_running_detail_names_the_execution() -> None:
    tj = trainjob(suspend=False, admission="2", suspended_condition="False")
    status = assess(tj, evidence(jobset(suspend=False), tj), [pod("a"), pod("b")], NODES)
    assert (
        status.detail
        == "TrainJob ml/ft-7 runs execution 2 of job id job-1, submission s1; 2 of its pods are not finished"
    )


def test_kueue_mode_shows_admission_checks() -> None:
    tj = trainjob(queue="user-queue")
    wl = workload(
        checks=[
            {
                "name": "dispatch-drained",
                "state": "Pending",
                "message": "waiting for pods of the previous execution to go: a on n2",
            }
        ]
    )
    status = assess(tj, evidence(jobset(), tj), [pod("a", node="n2", deletion=TERMINATING)], NODES, workload=wl)
    assert status.mode is Mode.KUEUE
    assert status.state is State.WAITING
    assert status.detail.splitlines()[-1] == (
        "admission check dispatch-drained Pending: waiting for pods of the previous execution to go: a on n2"
    )


@pytest.mark.parametrize(
    ("wl", "cause"),
    [
        (None, "waiting for Kueue: no Workload yet"),
        (workload(active=False), "held: Workload deactivated"),
        (
            workload(checks=[{"name": "dispatch-drained", "state": "Pending", "message": ""}]),
            "waiting for admission check dispatch-drained (Pending)",
        ),
        (
            workload(checks=[{"name": "dispatch-drained", "state": "Ready", "message": ""}]),
            "waiting for Kueue admission",
        ),
    ],
)
def test_kueue_held_causes(wl: dict[str, Any] | None, cause: str) -> None:
    status = assess(trainjob(queue="user-queue"), evidence(jobset()), [], NODES, workload=wl)
    assert (status.state, status.cause) == (State.HELD, cause)


def test_execution_identity() -> None:
    status = assess(trainjob(admission="4"), evidence(jobset(), trainjob(admission="4")), [], NODES)
    assert status.execution == Execution("job-1", "s1", 4)
    assert status.execution.as_dict() == {"job_id": "job-1", "submission": "s1", "admission": 4}


def test_status_as_dict_is_json() -> None:
    status = assess(trainjob(), evidence(jobset()), [pod("a", node="n2", deletion=TERMINATING)], NODES)
    data = json.loads(json.dumps(status.as_dict()))
    assert data["state"] == "waiting"
    assert data["remaining"][0]["node_state"] == "Ready=Unknown"
    assert data["resource_version"] == "10"


@pytest.mark.parametrize(
    ("tj", "needle"),
    [
        (trainjob(job_id=None), f"lacks the label {LABEL_JOB_ID}"),
        (trainjob(submission=None), "lacks the label dispatch.phpboyscout.uk/submission"),
        (trainjob(job_id="a,b"), "job id 'a,b' is not allowed"),
        (trainjob(admission="-1"), "admission number '-1' is not allowed"),
        (trainjob(admission="two"), "admission number 'two' is not allowed"),
    ],
)
def test_not_managed(tj: dict[str, Any], needle: str) -> None:
    with pytest.raises(NotManagedError) as caught:
        managed(tj)
    assert needle in str(caught.value)
    assert "ml/ft-7" in str(caught.value)
    with pytest.raises(NotManagedError):
        assess(tj, evidence(None, tj), [], {})


def test_managed_reads_mode_and_admission() -> None:
    plain = managed(trainjob())
    assert (plain.mode, plain.admission, plain.uid, plain.resource_version) == (
        Mode.PLAIN,
        0,
        "uid-tj-1",
        "10",
    )
    kueue = managed(trainjob(queue="q", admission="9"))
    assert (kueue.mode, kueue.admission) == (Mode.KUEUE, 9)
    assert ANNOTATION_ADMISSION not in trainjob()["metadata"].get("annotations", {})

"""A JobSet that a deleted TrainJob of the same name left (its controller is another uid): the explanation names
it, and the rule decides by what the JobSet and its Jobs show, not by their owner (evidence.py, 2).

The owner check was removed from the rule because no state it alone refused can run anything (docs/reliability.md,
"Checks that looked redundant"): a leftover passes only when it is suspended and carries the label this
TrainJob's patches put now, and its Jobs are read and must be suspended. These tests pin both halves, so that a
change which brings the owner back as a check, or drops it from the explanation, is seen.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow_provider_dispatch.dispatch import vocabulary as v
from airflow_provider_dispatch.dispatch.admission import dispatch_runtime_patch
from airflow_provider_dispatch.dispatch.assessment import Execution
from airflow_provider_dispatch.dispatch.evidence import DEFAULT_SETTLE_SECONDS, HoldEvidence, judge_hold
from airflow_provider_dispatch.dispatch.fencing import ExecutionPods
from airflow_provider_dispatch.dispatch.nodes import DEFAULT_CLOCK_SKEW_SECONDS

from .support import HOLD, JOB_ID, NAME, SERVER_NOW, SUBMISSION, child_job, jobset, runtime, trainjob

ADMISSION = 2
EARLIER_UID = "uid-of-the-deleted-namesake"
LONG_BEFORE_THE_HOLD = HOLD - timedelta(seconds=DEFAULT_SETTLE_SECONDS + DEFAULT_CLOCK_SKEW_SECONDS + 5)


def _jobset(*, owner: str | None, suspend: bool, label: int) -> dict[str, Any]:
    body = jobset(suspend=suspend)
    body["spec"]["replicatedJobs"] = [
        {
            "name": "node",
            "template": {"spec": {"template": {"metadata": {"labels": {v.POD_LABEL_ADMISSION: str(label)}}}}},
        }
    ]
    if owner is not None:
        body["metadata"]["ownerReferences"] = [
            {
                "apiVersion": "trainer.kubeflow.org/v1alpha1",
                "kind": "TrainJob",
                "name": NAME,
                "uid": owner,
                "controller": True,
            }
        ]
    return body


def _verdict(body: dict[str, Any]) -> str | None:
    # dispatch's own patch for this execution: the label the JobSet's templates are compared with
    ours = dispatch_runtime_patch(runtime(), Execution(JOB_ID, SUBMISSION, ADMISSION))
    held = trainjob(suspend=True, suspended_condition="True", admission=str(ADMISSION), patches=[ours])
    # a Job JobSet resumed for this execution and the Job controller suspended since: the settle's shortcut
    job = child_job(label=ADMISSION, started=True, suspended_condition=True)
    record = ExecutionPods(ADMISSION, {}, since=HOLD, started=LONG_BEFORE_THE_HOLD)
    verdict = judge_hold(held, HoldEvidence(body, {f"{NAME}-node-0": job}, record, SERVER_NOW), ADMISSION)
    return None if verdict is None else verdict.reason


def test_this_trainjobs_suspended_fresh_jobset_is_observed() -> None:
    """The control: the same evidence with this TrainJob as owner (or none) is the hold observed."""
    assert _verdict(_jobset(owner="uid-tj-1", suspend=True, label=ADMISSION)) is None
    assert _verdict(_jobset(owner=None, suspend=True, label=ADMISSION)) is None


def test_a_leftover_that_shows_this_hold_is_not_refused_for_its_owner() -> None:
    assert _verdict(_jobset(owner=EARLIER_UID, suspend=True, label=ADMISSION)) is None


def test_a_running_leftover_is_refused_and_named() -> None:
    reason = _verdict(_jobset(owner=EARLIER_UID, suspend=False, label=ADMISSION))
    assert reason is not None
    assert "does not have spec.suspend true yet" in reason
    assert f"left by an earlier TrainJob of this name, owner uid {EARLIER_UID}" in reason


def test_a_leftover_with_another_executions_label_is_refused_and_named() -> None:
    reason = _verdict(_jobset(owner=EARLIER_UID, suspend=True, label=ADMISSION + 3))
    assert reason is not None
    assert "another execution's admission label" in reason
    assert f"owner uid {EARLIER_UID}" in reason


def test_this_trainjobs_own_jobset_is_not_called_a_leftover() -> None:
    reason = _verdict(_jobset(owner="uid-tj-1", suspend=False, label=ADMISSION))
    assert reason is not None
    assert "earlier TrainJob" not in reason

"""Rule hardening beyond the seed: foreign patches that forge the identity, Jobs that have not seen the hold."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_dispatch.dispatch import vocabulary as v
from airflow_provider_dispatch.dispatch.admission import check_runtime_safe
from airflow_provider_dispatch.dispatch.assessment import hold_not_observed
from airflow_provider_dispatch.dispatch.errors import SpecRejectedError

from .support import NAME, condition, evidence, jobset, patch, runtime, trainjob


def _labelling_patch(manager: str, labels: dict[str, str]) -> dict[str, Any]:
    entry = patch(manager)
    pod_template = {"metadata": {"labels": labels}}
    entry["trainingRuntimeSpec"]["template"]["spec"] = {
        "replicatedJobs": [{"name": "node", "template": {"spec": {"template": pod_template}}}]
    }
    return entry


@pytest.mark.parametrize(
    ("manager", "labels", "refused"),
    [
        ("example.com/forger", {v.LABEL_JOB_ID: "other"}, True),
        ("example.com/forger", {v.POD_LABEL_ADMISSION: "999", v.LABEL_SUBMISSION: "9"}, True),
        ("example.com/renamed", {v.LABEL_JOB_ID: "job-1", v.LABEL_SUBMISSION: "s1", v.POD_LABEL_ADMISSION: "1"}, True),
        ("example.com/team", {"example.com/team": "ml"}, False),
        (
            v.RUNTIME_PATCH_MANAGER,
            {v.LABEL_JOB_ID: "job-1", v.LABEL_SUBMISSION: "s1", v.POD_LABEL_ADMISSION: "1"},
            False,
        ),
    ],
)
def test_only_dispatch_may_set_the_identity_labels(manager: str, labels: dict[str, str], refused: bool) -> None:
    held = trainjob(patches=[_labelling_patch(manager, labels)])
    if not refused:
        check_runtime_safe(held, runtime())
        return
    with pytest.raises(SpecRejectedError) as raised:
        check_runtime_safe(held, runtime())
    assert manager in raised.value.message
    assert "only dispatch's own runtime patch may set them" in raised.value.message


def _jobset(replicas: int, **counts: int) -> dict[str, Any]:
    body = jobset()
    body["spec"]["replicatedJobs"] = [{"name": "node", "replicas": replicas, "template": {}}]
    body["status"] = {"replicatedJobsStatus": [{"name": "node", **counts}]} if counts else {}
    return body


def _job(state: str) -> dict[str, Any] | None:
    """A child Job as the check reads it itself: suspended, running, finished, or missing."""
    if state == "missing":
        return None
    conditions = {"succeeded": [condition("Complete")], "failed": [condition("Failed")]}.get(state, [])
    return {"metadata": {}, "spec": {"suspend": state == "suspended"}, "status": {"conditions": conditions}}


@pytest.mark.parametrize(
    ("states", "observed"),
    [
        (("suspended", "suspended"), True),
        (("suspended", "succeeded"), True),  # a finished rank's Job is not suspended, and need not be
        (("suspended", "failed"), True),
        (("suspended", "running"), False),  # one Job has not seen the hold: it may still create a pod
        (("suspended", "missing"), False),  # not created yet: a creation in flight may still make it unsuspended
    ],
)
def test_the_hold_is_observed_only_when_every_job_read_itself_is_suspended_or_finished(
    states: tuple[str, str], observed: bool
) -> None:
    held = trainjob(suspend=True, suspended_condition="True")
    jobs = {f"{NAME}-node-{index}": _job(state) for index, state in enumerate(states)}
    reason = hold_not_observed(held, evidence(_jobset(2), held, jobs=jobs), 0)
    assert (reason is None) == observed
    if not observed:
        assert reason is not None
        assert f"{NAME}-node-1" in reason


@pytest.mark.parametrize("counts", [{}, {"suspended": 1, "active": 1}])
def test_the_jobsets_own_counts_are_not_consulted(counts: dict[str, int]) -> None:
    """JobSet's status counts are its cached view of the Jobs' own fields, which the check reads itself: a count
    that lags behind Jobs read suspended neither blocks nor proves anything (docs/reliability.md, the gate)."""
    held = trainjob(suspend=True, suspended_condition="True")
    jobs = {f"{NAME}-node-{index}": _job("suspended") for index in range(2)}
    assert hold_not_observed(held, evidence(_jobset(2, **counts), held, jobs=jobs), 0) is None

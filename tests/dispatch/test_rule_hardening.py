"""Rule hardening beyond the seed: foreign patches that forge the identity, Jobs that have not seen the hold."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_dispatch.dispatch import vocabulary as v
from airflow_provider_dispatch.dispatch.admission import check_runtime_safe
from airflow_provider_dispatch.dispatch.assessment import hold_not_observed
from airflow_provider_dispatch.dispatch.errors import SpecRejectedError

from .support import evidence, jobset, patch, runtime, trainjob


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


@pytest.mark.parametrize(
    ("counts", "observed"),
    [
        ({"suspended": 2}, True),
        ({"suspended": 1, "succeeded": 1}, True),  # a finished rank's Job is not suspended, and need not be
        ({"suspended": 1, "failed": 1}, True),
        ({"suspended": 1, "active": 1}, False),  # one Job has not seen the hold: it may still create a pod
        ({}, False),  # no status yet
    ],
)
def test_the_hold_is_observed_only_when_every_job_is_suspended_or_finished(
    counts: dict[str, int], observed: bool
) -> None:
    held = trainjob(suspend=True, suspended_condition="True")
    reason = hold_not_observed(held, evidence(_jobset(2, **counts), held), 0)
    assert (reason is None) == observed
    if not observed:
        assert reason is not None
        assert "node:" in reason

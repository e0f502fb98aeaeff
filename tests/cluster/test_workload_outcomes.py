"""The lab-only workload knobs `exit-code-by-admission` and `exit-code-by-submission` (`simulated/nodes/workload.py`):
one runtime whose pods fail on one execution and succeed on another, as a chained restart rehearses it."""

from __future__ import annotations

import kubernetes
import pytest
from api_answers import expect_answer

from airflow_provider_dispatch.dispatch.vocabulary import LABEL_SUBMISSION, POD_LABEL_ADMISSION
from airflow_provider_dispatch_lab.scenario.scenario import Scenario
from airflow_provider_dispatch_lab.simulated.controllers import NODE_CONTROLLERS
from airflow_provider_dispatch_lab.simulated.nodes.workload import (
    EXIT_CODE,
    EXIT_CODE_BY_ADMISSION,
    EXIT_CODE_BY_SUBMISSION,
    RUN_SECONDS,
    WorkloadError,
    WorkloadSpec,
)

from .nodes_support import Zone, execution_labels, phase, pod

CONTROLLERS = NODE_CONTROLLERS
LAB_SPEED = 20.0


@pytest.mark.parametrize(
    ("annotations", "labels", "expected"),
    [
        ({}, {POD_LABEL_ADMISSION: "1"}, 0),
        ({EXIT_CODE: "4"}, {POD_LABEL_ADMISSION: "1"}, 4),
        ({EXIT_CODE_BY_ADMISSION: "1=3,2=0"}, {POD_LABEL_ADMISSION: "1"}, 3),
        ({EXIT_CODE_BY_ADMISSION: "1=3,2=0"}, {POD_LABEL_ADMISSION: "2"}, 0),
        ({EXIT_CODE_BY_ADMISSION: "1=3", EXIT_CODE: "7"}, {POD_LABEL_ADMISSION: "2"}, 7),
        ({EXIT_CODE_BY_ADMISSION: " 1 = 3 , 2=9"}, {POD_LABEL_ADMISSION: "2"}, 9),
        ({EXIT_CODE_BY_ADMISSION: "1=3"}, {}, 0),
        ({EXIT_CODE_BY_SUBMISSION: "1=5"}, {LABEL_SUBMISSION: "1", POD_LABEL_ADMISSION: "1"}, 5),
        ({EXIT_CODE_BY_SUBMISSION: "1=5"}, {LABEL_SUBMISSION: "2", POD_LABEL_ADMISSION: "1"}, 0),
        # by-admission first, then by-submission, then exit-code
        (
            {EXIT_CODE_BY_ADMISSION: "1=6", EXIT_CODE_BY_SUBMISSION: "1=5"},
            {LABEL_SUBMISSION: "1", POD_LABEL_ADMISSION: "1"},
            6,
        ),
        (
            {EXIT_CODE_BY_ADMISSION: "2=6", EXIT_CODE_BY_SUBMISSION: "1=5", EXIT_CODE: "1"},
            {LABEL_SUBMISSION: "1", POD_LABEL_ADMISSION: "1"},
            5,
        ),
    ],
)
def test_the_exit_code_follows_the_pods_execution_labels(
    annotations: dict[str, str], labels: dict[str, str], expected: int
) -> None:
    assert WorkloadSpec.from_annotations(annotations, labels).exit_code == expected


@pytest.mark.parametrize(
    ("key", "value"),
    [
        (EXIT_CODE_BY_ADMISSION, ""),
        (EXIT_CODE_BY_ADMISSION, "1"),
        (EXIT_CODE_BY_ADMISSION, "1=256"),
        (EXIT_CODE_BY_ADMISSION, "1=-1"),
        (EXIT_CODE_BY_ADMISSION, "=1"),
        (EXIT_CODE_BY_ADMISSION, "1=1,1=0"),
        (EXIT_CODE_BY_ADMISSION, "1=1,"),
        (EXIT_CODE_BY_SUBMISSION, "a=b"),
    ],
)
def test_a_bad_knob_is_refused_even_where_another_applies(key: str, value: str) -> None:
    annotations = {EXIT_CODE_BY_ADMISSION: "1=0", key: value}
    with pytest.raises(WorkloadError) as raised:
        WorkloadSpec.from_annotations(annotations, {POD_LABEL_ADMISSION: "1"})
    assert raised.value.annotation == key


def test_pods_of_two_admissions_end_as_the_knob_says(
    scenario: Scenario, cluster_api: kubernetes.client.ApiClient, cluster_namespace: str
) -> None:
    core = kubernetes.client.CoreV1Api(cluster_api)
    zone = Zone(scenario)
    zone.node("a")
    for admission in (1, 2):
        body = pod(f"run-{admission}", zone=zone, labels=execution_labels("tj", admission), restart_policy="Never")
        body["metadata"]["annotations"] = {RUN_SECONDS: "5", EXIT_CODE_BY_ADMISSION: "1=3"}
        core.create_namespaced_pod(cluster_namespace, body)
    scenario.advance(10)
    failed = scenario.wait_for_pod(cluster_namespace, "run-1", lambda p: phase(p) in ("Succeeded", "Failed"))
    succeeded = scenario.wait_for_pod(cluster_namespace, "run-2", lambda p: phase(p) in ("Succeeded", "Failed"))
    assert (phase(failed), phase(succeeded)) == ("Failed", "Succeeded")
    [container] = failed["status"]["containerStatuses"]  # type: ignore[index]
    assert container["state"]["terminated"]["exitCode"] == 3


def test_the_api_refuses_a_pod_with_a_bad_knob(
    cluster_api: kubernetes.client.ApiClient, cluster_namespace: str
) -> None:
    body = pod("bad", labels=execution_labels("tj", 1))
    body["metadata"]["annotations"] = {EXIT_CODE_BY_SUBMISSION: "1=x"}
    with pytest.raises(kubernetes.client.ApiException) as raised:
        kubernetes.client.CoreV1Api(cluster_api).create_namespaced_pod(cluster_namespace, body)
    expect_answer(raised.value, 422)
    assert EXIT_CODE_BY_SUBMISSION in str(raised.value.body)

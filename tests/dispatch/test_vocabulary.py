"""The names are the seed's exactly (interoperability with the Go dispatch) and the API paths are right."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from airflow_provider_dispatch.dispatch import vocabulary as v


def test_dispatch_keys_are_the_seeds() -> None:
    assert (v.LABEL_JOB_ID, v.LABEL_SUBMISSION, v.ANNOTATION_ADMISSION) == (
        "dispatch.phpboyscout.uk/job-id",
        "dispatch.phpboyscout.uk/submission",
        "dispatch.phpboyscout.uk/admission",
    )
    assert v.POD_LABELS == (v.LABEL_JOB_ID, v.LABEL_SUBMISSION, v.POD_LABEL_ADMISSION)
    assert v.RUNTIME_PATCH_MANAGER == "dispatch.phpboyscout.uk/dispatch"
    assert v.ADMISSION_CHECK_CONTROLLER == "dispatch.phpboyscout.uk/drained"


@pytest.mark.parametrize(
    ("coords", "namespace", "name", "path"),
    [
        (v.TRAINJOB, "ml", "ft-7", "/apis/trainer.kubeflow.org/v1alpha1/namespaces/ml/trainjobs/ft-7"),
        (v.TRAINJOB, "ml", None, "/apis/trainer.kubeflow.org/v1alpha1/namespaces/ml/trainjobs"),
        (v.JOBSET, "ml", "ft-7", "/apis/jobset.x-k8s.io/v1alpha2/namespaces/ml/jobsets/ft-7"),
        (
            v.CLUSTER_TRAINING_RUNTIME,
            None,
            "torch",
            "/apis/trainer.kubeflow.org/v1alpha1/clustertrainingruntimes/torch",
        ),
        (
            v.TRAINING_RUNTIME,
            "ml",
            "torch",
            "/apis/trainer.kubeflow.org/v1alpha1/namespaces/ml/trainingruntimes/torch",
        ),
        (v.WORKLOAD, "ml", None, "/apis/kueue.x-k8s.io/v1beta2/namespaces/ml/workloads"),
        (v.POD, "ml", None, "/api/v1/namespaces/ml/pods"),
        (v.NODE, None, "n1", "/api/v1/nodes/n1"),
    ],
)
def test_paths(coords: v.ApiCoordinates, namespace: str | None, name: str | None, path: str) -> None:
    assert coords.path(namespace, name) == path


def test_api_version_and_resource() -> None:
    assert (v.POD.api_version, v.POD.resource) == ("v1", "pods")
    assert (v.TRAINJOB.api_version, v.TRAINJOB.resource) == (
        "trainer.kubeflow.org/v1alpha1",
        "trainjobs.trainer.kubeflow.org",
    )


@pytest.mark.parametrize("broken", [None, {}, {"metadata": None}, {"metadata": {"labels": ["x"]}}, {"status": 3}])
def test_accessors_read_missing_as_absent(broken: object) -> None:
    assert v.labels_of(broken) == {}  # type: ignore[arg-type]
    assert v.condition(broken, "Ready") is None  # type: ignore[arg-type]
    assert v.condition_is_true(broken, "Ready") is False  # type: ignore[arg-type]
    assert v.name_of(broken) == ""  # type: ignore[arg-type]


def test_non_string_label_values_are_dropped() -> None:
    assert v.labels_of({"metadata": {"labels": {"a": "1", "b": 2, "c": None}}}) == {"a": "1"}


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("2026-08-21T10:00:00Z", datetime(2026, 8, 21, 10, 0, 0, tzinfo=UTC)),
        ("2026-08-21T12:00:00+02:00", datetime(2026, 8, 21, 10, 0, 0, tzinfo=UTC)),
        ("2026-08-21T10:00:00", None),  # no zone: not a metav1.Time
        ("yesterday", None),
        ("", None),
        (None, None),
        (17, None),
    ],
)
def test_parse_time_reads_only_what_the_api_writes(text: object, parsed: datetime | None) -> None:
    assert v.parse_time(text) == parsed

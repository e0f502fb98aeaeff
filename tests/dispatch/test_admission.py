"""The body of the one conditional write that admits, and of the hold (DESIGN §3.6)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from airflow_provider_dispatch.dispatch.admission import (
    MAX_RUNTIME_PATCHES,
    admission_body,
    check_runtime_safe,
    hold_body,
    kueue_admission_body,
    replicated_job_names,
    runtime_reference,
)
from airflow_provider_dispatch.dispatch.assessment import Execution
from airflow_provider_dispatch.dispatch.errors import SpecRejectedError
from airflow_provider_dispatch.dispatch.vocabulary import (
    ANNOTATION_ADMISSION,
    ANNOTATION_ADMISSION_KEY,
    ANNOTATION_SAFE_TO_FORCEFULLY_DELETE,
    CLUSTER_TRAINING_RUNTIME,
    KUEUE_RUNTIME_PATCH_MANAGER,
    RUNTIME_PATCH_MANAGER,
    TAINT_OUT_OF_SERVICE,
    TRAINING_RUNTIME,
)

from .support import patch, runtime, trainjob

EXPECTED_LABELS = {
    "dispatch.phpboyscout.uk/job-id": "job-1",
    "dispatch.phpboyscout.uk/submission": "s1",
    "dispatch.phpboyscout.uk/admission": "1",
}


def dispatch_entries(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for p in body["spec"]["runtimePatches"] if p["manager"] == RUNTIME_PATCH_MANAGER]


def pod_labels_by_job(entry: dict[str, Any]) -> dict[str, dict[str, str]]:
    jobs = entry["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    return {j["name"]: j["template"]["spec"]["template"]["metadata"]["labels"] for j in jobs}


@pytest.mark.parametrize(("before", "after"), [(None, "1"), ("0", "1"), ("4", "5"), ("99", "100")])
def test_admission_number_raised_by_exactly_one(before: str | None, after: str) -> None:
    body, execution = admission_body(trainjob(admission=before), runtime())
    assert body["metadata"]["annotations"][ANNOTATION_ADMISSION] == after
    assert execution == Execution("job-1", "s1", int(after))
    (entry,) = dispatch_entries(body)
    assert pod_labels_by_job(entry)["node"]["dispatch.phpboyscout.uk/admission"] == after


def test_body_unsuspends_conditionally_and_labels_every_replicated_job() -> None:
    tj = trainjob()
    tj["metadata"]["managedFields"] = [{"manager": "kubectl"}]
    body, _ = admission_body(tj, runtime(jobs=("dataset-initializer", "node")))
    assert body["spec"]["suspend"] is False
    assert body["metadata"]["resourceVersion"] == "10"
    assert "status" not in body
    assert "managedFields" not in body["metadata"]
    (entry,) = dispatch_entries(body)
    assert "time" not in entry
    assert pod_labels_by_job(entry) == {"dataset-initializer": EXPECTED_LABELS, "node": EXPECTED_LABELS}
    assert body["spec"]["runtimeRef"] == tj["spec"]["runtimeRef"]
    assert body["metadata"]["labels"] == tj["metadata"]["labels"]


def test_other_managers_patches_are_kept_in_order() -> None:
    kueue = patch(KUEUE_RUNTIME_PATCH_MANAGER)
    other = patch("example.com/tuner")
    old_ours = patch(RUNTIME_PATCH_MANAGER)
    tj = trainjob(patches=[kueue, old_ours, other], admission="2")
    original = copy.deepcopy(tj)
    body, _ = admission_body(tj, runtime())
    managers = [p["manager"] for p in body["spec"]["runtimePatches"]]
    assert managers == [KUEUE_RUNTIME_PATCH_MANAGER, RUNTIME_PATCH_MANAGER, "example.com/tuner"]
    assert body["spec"]["runtimePatches"][0] == kueue
    assert body["spec"]["runtimePatches"][2] == other
    assert pod_labels_by_job(body["spec"]["runtimePatches"][1])["node"]["dispatch.phpboyscout.uk/admission"] == "3"
    assert tj == original


def test_new_dispatch_patch_is_appended() -> None:
    body, _ = admission_body(trainjob(patches=[patch(KUEUE_RUNTIME_PATCH_MANAGER)]), runtime())
    assert [p["manager"] for p in body["spec"]["runtimePatches"]] == [
        KUEUE_RUNTIME_PATCH_MANAGER,
        RUNTIME_PATCH_MANAGER,
    ]


def test_other_annotations_are_kept() -> None:
    tj = trainjob(admission="1")
    tj["metadata"]["annotations"]["team"] = "vision"
    body, _ = admission_body(tj, runtime())
    assert body["metadata"]["annotations"] == {"team": "vision", ANNOTATION_ADMISSION: "2"}


def test_kueue_variant_leaves_suspend_to_kueue() -> None:
    tj = trainjob(queue="user-queue", patches=[patch(KUEUE_RUNTIME_PATCH_MANAGER)])
    body, execution = kueue_admission_body(tj, runtime(), admission_key="wl-uid/1")
    assert body["spec"]["suspend"] is True
    assert body["metadata"]["annotations"][ANNOTATION_ADMISSION] == "1"
    assert body["metadata"]["annotations"][ANNOTATION_ADMISSION_KEY] == "wl-uid/1"
    assert execution.admission == 1
    assert [p["manager"] for p in body["spec"]["runtimePatches"]] == [
        KUEUE_RUNTIME_PATCH_MANAGER,
        RUNTIME_PATCH_MANAGER,
    ]


def test_hold_body() -> None:
    tj = trainjob(suspend=False, admission="3")
    body = hold_body(tj)
    assert body["spec"]["suspend"] is True
    assert body["metadata"]["resourceVersion"] == "10"
    assert body["metadata"]["annotations"][ANNOTATION_ADMISSION] == "3"
    assert "status" not in body
    assert tj["spec"]["suspend"] is False


def test_writes_need_the_resource_version_read() -> None:
    with pytest.raises(SpecRejectedError, match="conditional"):
        admission_body(trainjob(rv=None), runtime())
    with pytest.raises(SpecRejectedError, match="conditional"):
        hold_body(trainjob(rv=None))


SAFE = {ANNOTATION_SAFE_TO_FORCEFULLY_DELETE: "true"}
OOS_TOLERATION = [{"key": TAINT_OUT_OF_SERVICE, "operator": "Exists", "effect": "NoExecute"}]


@pytest.mark.parametrize(
    ("case", "tj", "rt", "needle"),
    [
        (
            "annotation in the runtime",
            trainjob(),
            runtime(pod_annotations=SAFE),
            ANNOTATION_SAFE_TO_FORCEFULLY_DELETE,
        ),
        (
            "annotation in a patch",
            trainjob(patches=[patch("example.com/x", pod_annotations=SAFE)]),
            runtime(),
            ANNOTATION_SAFE_TO_FORCEFULLY_DELETE,
        ),
        (
            "toleration in the runtime",
            trainjob(),
            runtime(tolerations=OOS_TOLERATION),
            f"tolerates the taint {TAINT_OUT_OF_SERVICE}",
        ),
        (
            "toleration in a patch",
            trainjob(patches=[patch(KUEUE_RUNTIME_PATCH_MANAGER, tolerations=OOS_TOLERATION)]),
            runtime(),
            "runtime patch kueue.x-k8s.io/manager tolerates",
        ),
        (
            "Equal toleration",
            trainjob(),
            runtime(tolerations=[{"key": TAINT_OUT_OF_SERVICE, "operator": "Equal", "value": "nodeshutdown"}]),
            "tolerates",
        ),
        ("wildcard toleration", trainjob(), runtime(tolerations=[{"operator": "Exists"}]), "tolerates"),
    ],
)
def test_unsafe_runtimes_are_refused_before_writing(
    case: str, tj: dict[str, Any], rt: dict[str, Any], needle: str
) -> None:
    with pytest.raises(SpecRejectedError) as caught:
        check_runtime_safe(tj, rt)
    assert needle in str(caught.value), case
    assert "refused before anything is written" in str(caught.value)
    with pytest.raises(SpecRejectedError):
        admission_body(tj, rt)


@pytest.mark.parametrize(
    ("tj", "rt"),
    [
        (trainjob(), runtime(pod_annotations={ANNOTATION_SAFE_TO_FORCEFULLY_DELETE: "false"})),
        (
            trainjob(),
            runtime(
                tolerations=[{"key": "node.kubernetes.io/unreachable", "operator": "Exists", "tolerationSeconds": 300}]
            ),
        ),
        (trainjob(), runtime(tolerations=[{"key": "gpu", "operator": "Exists"}])),
        (trainjob(patches=[patch("example.com/x", pod_annotations={"a": "b"})]), runtime()),
    ],
)
def test_safe_runtimes_pass(tj: dict[str, Any], rt: dict[str, Any]) -> None:
    check_runtime_safe(tj, rt)
    body, _ = admission_body(tj, rt)
    assert body["spec"]["suspend"] is False


def test_runtime_without_replicated_jobs_is_refused() -> None:
    rt = runtime(jobs=())
    assert replicated_job_names(rt) == ()
    with pytest.raises(SpecRejectedError, match=r"no spec\.template\.spec\.replicatedJobs"):
        admission_body(trainjob(), rt)


def test_too_many_patches_is_refused() -> None:
    tj = trainjob(patches=[patch(f"example.com/m{i}") for i in range(MAX_RUNTIME_PATCHES)])
    with pytest.raises(SpecRejectedError, match="does not fit"):
        admission_body(tj, runtime())


@pytest.mark.parametrize(
    ("kind", "coords"),
    [
        (None, CLUSTER_TRAINING_RUNTIME),
        ("ClusterTrainingRuntime", CLUSTER_TRAINING_RUNTIME),
        ("TrainingRuntime", TRAINING_RUNTIME),
    ],
)
def test_runtime_reference(kind: str | None, coords: object) -> None:
    assert runtime_reference(trainjob(runtime_kind=kind)) == (coords, "torch-distributed")


def test_runtime_reference_refusals() -> None:
    with pytest.raises(SpecRejectedError, match="dispatch supports"):
        runtime_reference(trainjob(runtime_kind="Deployment"))
    tj = trainjob()
    del tj["spec"]["runtimeRef"]
    with pytest.raises(SpecRejectedError, match=r"no spec\.runtimeRef\.name"):
        runtime_reference(tj)

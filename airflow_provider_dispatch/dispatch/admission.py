"""The body of the one conditional write that admits (DESIGN §3.6), and of the hold.

Plain mode admits in ONE replace (PUT) of the TrainJob as it was read, so the apiserver applies it only if
nothing changed since the checked read (`metadata.resourceVersion` is the one read; a change answers 409):

* A+1 in the annotation `dispatch.phpboyscout.uk/admission`;
* the dispatch runtime patch (manager `dispatch.phpboyscout.uk/dispatch`) putting job id, submission and A as
  pod-template labels on every replicatedJob of the runtime. The TrainJob's own labels never reach the pods;
  only runtime patches do (k8s-apis §1.2). Other managers' entries stay untouched and in order; ours keeps its
  place, or is appended when new. Its `time` is left out: Trainer's mutating webhook stamps it (k8s-apis
  §1.5);
* `spec.suspend: false`.

Trainer's validating webhook accepts a runtime patch change together with the unsuspend because the old object
is suspended (v2.3.0, k8s-apis §1.5). On Trainer v2.2.x, which requires the *new* object to be suspended, the
write is rejected (422) and nothing is admitted: the failure is safe but release cannot work there.

Kueue mode owns `spec.suspend`, so its variant raises A and rewrites the patch labels but leaves suspend
alone; Kueue unsuspends once the admission check is Ready (DESIGN §6).

Before anything is written, runtimes and patches are refused (SpecRejectedError) when they defeat the rule
(anchors §8.3): a pod annotation `kueue.x-k8s.io/safe-to-forcefully-delete: "true"` opts pods into Kueue's
failure recovery, which marks them Failed and force-deletes them on an unreachable node with no proof their
containers stopped (k8s-apis §4.7); a toleration of `node.kubernetes.io/out-of-service` keeps pods running on
a node declared shut down, so their objects no longer say whether the machine really stopped. A toleration
with an empty key and operator Exists tolerates every taint, this one included, and is refused as well. A runtime
whose controllers may start a second copy of one rank (policy.py: `pod-replacement`, `jobset-restart`) is refused
too, unless the caller accepted that risk by name; the accepted risks are written on the TrainJob with the
admission (`dispatch.phpboyscout.uk/accepted-risks`), and plain mode also writes when dispatch started the
execution (`dispatch.phpboyscout.uk/admitted-at`, the API server's time: evidence.py).

The bodies leave out `status` and `metadata.managedFields`: a replace of the main resource ignores status (the
status subresource owns it), and omitted managedFields are kept by the apiserver.
"""

from __future__ import annotations

import copy
from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Final

from airflow_provider_dispatch.dispatch.assessment import Execution, managed
from airflow_provider_dispatch.dispatch.errors import SpecRejectedError
from airflow_provider_dispatch.dispatch.fence import FenceIdentity
from airflow_provider_dispatch.dispatch.fencing import format_time
from airflow_provider_dispatch.dispatch.policy import RuntimeRisk, runtime_risks, unaccepted
from airflow_provider_dispatch.dispatch.validation import validate_runtime_name
from airflow_provider_dispatch.dispatch.vocabulary import (
    ANNOTATION_ACCEPTED_RISKS,
    ANNOTATION_ADMISSION,
    ANNOTATION_ADMISSION_KEY,
    ANNOTATION_ADMITTED_AT,
    ANNOTATION_EXECUTION_PODS,
    ANNOTATION_POD_FENCE,
    ANNOTATION_SAFE_TO_FORCEFULLY_DELETE,
    LABEL_JOB_ID,
    LABEL_SUBMISSION,
    POD_LABEL_ADMISSION,
    POD_LABELS,
    RUNTIME_KINDS,
    RUNTIME_PATCH_MANAGER,
    RUNTIME_REF_DEFAULT_API_GROUP,
    RUNTIME_REF_DEFAULT_KIND,
    TAINT_OUT_OF_SERVICE,
    ApiCoordinates,
    field,
    name_of,
    namespace_of,
    object_list,
    string_map,
)

#: `spec.runtimePatches` maxItems in the TrainJob CRD
MAX_RUNTIME_PATCHES: Final = 16


def _ref(obj: Mapping[str, Any]) -> str:
    return f"{namespace_of(obj)}/{name_of(obj)}"


def runtime_reference(trainjob: Mapping[str, Any]) -> tuple[ApiCoordinates, str]:
    """The runtime the TrainJob names (`spec.runtimeRef`, with the CRD's defaults), validated."""
    ref = _ref(trainjob)
    runtime_ref = field(trainjob, "spec", "runtimeRef")
    if not isinstance(runtime_ref, Mapping) or "name" not in runtime_ref:
        raise SpecRejectedError(
            f"TrainJob {ref} has no spec.runtimeRef.name: name the TrainingRuntime or ClusterTrainingRuntime it runs.",
            ref=ref,
        )
    group = runtime_ref.get("apiGroup") or RUNTIME_REF_DEFAULT_API_GROUP
    kind = runtime_ref.get("kind") or RUNTIME_REF_DEFAULT_KIND
    coords = RUNTIME_KINDS.get(kind) if group == RUNTIME_REF_DEFAULT_API_GROUP else None
    if coords is None:
        raise SpecRejectedError(
            f"TrainJob {ref} names a runtime of kind {kind!r} in API group {group!r}; dispatch supports "
            f"TrainingRuntime and ClusterTrainingRuntime in {RUNTIME_REF_DEFAULT_API_GROUP}.",
            ref=ref,
        )
    return coords, validate_runtime_name(runtime_ref.get("name"), ref=ref)


def replicated_job_names(runtime: Mapping[str, Any]) -> tuple[str, ...]:
    """`spec.template.spec.replicatedJobs[].name` of a (Cluster)TrainingRuntime, in order."""
    names = [job.get("name") for job in object_list(runtime, "spec", "template", "spec", "replicatedJobs")]
    return tuple(name for name in names if isinstance(name, str) and name)


def _pod_templates(jobset_spec: Any) -> Iterable[tuple[str, Mapping[str, Any]]]:
    """(replicatedJob name, pod template) pairs of a JobSet spec or a patch of one."""
    for job in object_list(jobset_spec, "replicatedJobs"):
        template = field(job, "template", "spec", "template")
        if isinstance(template, Mapping):
            yield str(job.get("name", "")), template


def _tolerates_out_of_service(toleration: Mapping[str, Any]) -> bool:
    key = toleration.get("key") or ""
    return key == TAINT_OUT_OF_SERVICE or (key == "" and toleration.get("operator") == "Exists")


def unsafe_settings(runtime: Mapping[str, Any], patches: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    """Each setting of the runtime or of a patch that would defeat the rule, described."""
    sources: list[tuple[str, Any]] = [(f"runtime {name_of(runtime)}", field(runtime, "spec", "template", "spec"))]
    sources += [
        (f"runtime patch {patch.get('manager')!s}", field(patch, "trainingRuntimeSpec", "template", "spec"))
        for patch in patches
    ]
    found: list[str] = []
    for source, spec in sources:
        for job, template in _pod_templates(spec):
            if string_map(template, "metadata", "annotations").get(ANNOTATION_SAFE_TO_FORCEFULLY_DELETE) == "true":
                found.append(
                    f'{source} sets the pod annotation {ANNOTATION_SAFE_TO_FORCEFULLY_DELETE}: "true" on '
                    f"replicatedJob {job}: Kueue's failure recovery would mark such pods Failed and delete "
                    "them on an unreachable node without proof that their containers stopped"
                )
            tolerations = field(template, "spec", "tolerations")
            if isinstance(tolerations, list) and any(
                isinstance(t, Mapping) and _tolerates_out_of_service(t) for t in tolerations
            ):
                found.append(
                    f"{source} tolerates the taint {TAINT_OUT_OF_SERVICE} on replicatedJob {job}: pods would "
                    "keep running on a node declared shut down, so cessation could not be judged from them"
                )
            if source != f"runtime patch {RUNTIME_PATCH_MANAGER}":
                claimed = sorted(set(string_map(template, "metadata", "labels")) & set(POD_LABELS))
                if claimed:
                    found.append(
                        f"{source} sets the pod label{'s' if len(claimed) > 1 else ''} {', '.join(claimed)} on "
                        f"replicatedJob {job}: those labels carry the execution identity and only dispatch's own "
                        "runtime patch may set them (a patch applied after it would make pods claim another "
                        "execution)"
                    )
    return tuple(found)


def check_runtime_safe(
    trainjob: Mapping[str, Any], runtime: Mapping[str, Any], accepted_risks: Collection[str] = frozenset()
) -> tuple[RuntimeRisk, ...]:
    """Refuse (SpecRejectedError) a runtime or runtime patch that would let pods vanish while they may run, or
    whose controllers may start a second copy of one rank (policy.py) unless that risk was accepted by name.
    Returns the accepted risks the runtime carries (to log, and to write on the TrainJob)."""
    patches = object_list(trainjob, "spec", "runtimePatches")
    problems = list(unsafe_settings(runtime, patches))
    risks = runtime_risks(runtime)
    refused = unaccepted(risks, accepted_risks)
    ref = _ref(trainjob)
    if problems:
        raise SpecRejectedError(
            f"TrainJob {ref} is refused before anything is written: " + "; ".join(problems) + ". Remove these "
            "settings; dispatch never admits an object whose pods could disappear while they may still run.",
            ref=ref,
        )
    if refused:
        raise SpecRejectedError(
            f"TrainJob {ref} is refused before anything is written: "
            + "; ".join(risk.detail for risk in refused)
            + ". Fix the runtime: "
            + "; ".join(risk.fix for risk in refused)
            + ". A platform team that accepts the risk can name it (accepted_risks="
            + ", ".join(repr(risk.name) for risk in refused)
            + "); dispatch then logs it at every admission and status shows it.",
            ref=ref,
        )
    return tuple(risk for risk in risks if risk not in refused)


def next_execution(trainjob: Mapping[str, Any]) -> Execution:
    """The execution the admitting write creates: the same job id and submission, A+1."""
    current = managed(trainjob).execution
    return Execution(current.job_id, current.submission, current.admission + 1)


def dispatch_runtime_patch(runtime: Mapping[str, Any], execution: Execution) -> dict[str, Any]:
    """The dispatch runtime patch entry: the execution identity as pod labels on every replicatedJob."""
    names = replicated_job_names(runtime)
    if not names:
        raise SpecRejectedError(
            f"runtime {name_of(runtime)} has no spec.template.spec.replicatedJobs: there are no pods to "
            "label, so dispatch cannot admit a TrainJob on it.",
            ref=name_of(runtime),
        )
    pod_labels = {
        LABEL_JOB_ID: execution.job_id,
        LABEL_SUBMISSION: execution.submission,
        POD_LABEL_ADMISSION: str(execution.admission),
    }
    return {
        "manager": RUNTIME_PATCH_MANAGER,
        "trainingRuntimeSpec": {
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": name,
                            "template": {"spec": {"template": {"metadata": {"labels": dict(pod_labels)}}}},
                        }
                        for name in names
                    ]
                }
            }
        },
    }


def with_dispatch_patch(patches: Sequence[Mapping[str, Any]], entry: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The patch list with dispatch's entry replaced in place, or appended; every other entry as it was."""
    result: list[dict[str, Any]] = []
    placed = False
    for patch in patches:
        if patch.get("manager") == RUNTIME_PATCH_MANAGER:
            if not placed:
                result.append(copy.deepcopy(dict(entry)))
                placed = True
            continue
        result.append(copy.deepcopy(dict(patch)))
    if not placed:
        result.append(copy.deepcopy(dict(entry)))
    return result


def _base_body(trainjob: Mapping[str, Any]) -> dict[str, Any]:
    ref = _ref(trainjob)
    if not isinstance(field(trainjob, "metadata", "resourceVersion"), str):
        raise SpecRejectedError(
            f"TrainJob {ref} has no metadata.resourceVersion: a dispatch write is conditional on the object "
            "read from the API, so write only objects read from it.",
            ref=ref,
        )
    body = copy.deepcopy(dict(trainjob))
    body.pop("status", None)
    body["metadata"].pop("managedFields", None)
    return body


def _admitting_body(
    trainjob: Mapping[str, Any],
    runtime: Mapping[str, Any],
    extra_annotations: Mapping[str, str],
    accepted_risks: Collection[str],
    fence: FenceIdentity | None,
) -> tuple[dict[str, Any], Execution]:
    execution = next_execution(trainjob)
    accepted = check_runtime_safe(trainjob, runtime, accepted_risks)
    entry = dispatch_runtime_patch(runtime, execution)
    patches = object_list(trainjob, "spec", "runtimePatches")
    new_patches = with_dispatch_patch(patches, entry)
    if len(new_patches) > MAX_RUNTIME_PATCHES:
        ref = _ref(trainjob)
        raise SpecRejectedError(
            f"TrainJob {ref} already has {len(patches)} runtime patches; the CRD allows "
            f"{MAX_RUNTIME_PATCHES}, "
            "so the dispatch patch does not fit. Remove a patch.",
            ref=ref,
        )
    body = _base_body(trainjob)
    metadata = body["metadata"]
    # the hold's record of the previous execution's pods (fencing.py), the previous start and the previous
    # accepted risks say nothing of the new execution: dropped, and written again where they apply
    annotations = string_map(trainjob, "metadata", "annotations")
    dropped = (ANNOTATION_EXECUTION_PODS, ANNOTATION_ADMITTED_AT, ANNOTATION_ACCEPTED_RISKS, ANNOTATION_POD_FENCE)
    kept = {key: value for key, value in annotations.items() if key not in dropped}
    if accepted:
        kept[ANNOTATION_ACCEPTED_RISKS] = ",".join(sorted({risk.name for risk in accepted}))
    if fence is not None:
        # the pod fence as read just before this write: the next admission requires it unchanged (fence.py)
        kept[ANNOTATION_POD_FENCE] = fence.to_annotation(execution.admission)
    metadata["annotations"] = {**kept, **extra_annotations, ANNOTATION_ADMISSION: str(execution.admission)}
    body.setdefault("spec", {})["runtimePatches"] = new_patches
    return body, execution


def admission_body(
    trainjob: Mapping[str, Any],
    runtime: Mapping[str, Any],
    *,
    admitted_at: datetime | None = None,
    accepted_risks: Collection[str] = frozenset(),
    fence: FenceIdentity | None = None,
) -> tuple[dict[str, Any], Execution]:
    """Plain mode: the replace body that admits (A+1, dispatch patch, suspend false), and the execution.
    `admitted_at` is the API server's time just before this write, when known (evidence.py); `fence` the pod
    fence's identity when it is in force (fence.py)."""
    extra = {ANNOTATION_ADMITTED_AT: format_time(admitted_at)} if admitted_at is not None else {}
    body, execution = _admitting_body(trainjob, runtime, extra, accepted_risks, fence)
    body["spec"]["suspend"] = False
    return body, execution


def kueue_admission_body(
    trainjob: Mapping[str, Any],
    runtime: Mapping[str, Any],
    *,
    admission_key: str | None = None,
    accepted_risks: Collection[str] = frozenset(),
    fence: FenceIdentity | None = None,
) -> tuple[dict[str, Any], Execution]:
    """Kueue mode: A+1 and the dispatch patch, suspend left to Kueue; `admission_key` names the admission.
    No `admitted-at`: Kueue, not this write, starts the execution, later (evidence.py)."""
    extra = {ANNOTATION_ADMISSION_KEY: admission_key} if admission_key is not None else {}
    return _admitting_body(trainjob, runtime, extra, accepted_risks, fence)


def hold_body(trainjob: Mapping[str, Any], execution_pods: str | None = None) -> dict[str, Any]:
    """Plain mode: the replace body that holds (`spec.suspend: true`), conditional on the object read, with
    the record of the execution's pods (`fencing.ExecutionPods.to_annotation`) when given."""
    body = _base_body(trainjob)
    body.setdefault("spec", {})["suspend"] = True
    if execution_pods is not None:
        annotations = string_map(trainjob, "metadata", "annotations")
        body["metadata"]["annotations"] = {**annotations, ANNOTATION_EXECUTION_PODS: execution_pods}
    return body


def record_body(trainjob: Mapping[str, Any], execution_pods: str) -> dict[str, Any]:
    """The replace body that adds the record of the execution's pods to an object already held (by someone
    else, or by Kueue), conditional on the object read, and changes nothing else (fencing.py)."""
    body = _base_body(trainjob)
    annotations = string_map(trainjob, "metadata", "annotations")
    body["metadata"]["annotations"] = {**annotations, ANNOTATION_EXECUTION_PODS: execution_pods}
    return body

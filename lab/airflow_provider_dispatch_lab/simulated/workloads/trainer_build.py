"""What Trainer builds from a TrainJob and its runtime: the JobSet it applies, and the status it copies back.

Pure functions, so each rule can be tested on its own table; the controller (`trainer.py`) only reads
caches and writes. Sources, research k8s-apis.md §1.3, §1.4 and §6 rule 4:

- `kubeflow/trainer:pkg/runtime/core/trainingruntime.go` `newRuntimeInfo`: the JobSet's labels and
  annotations are the runtime template's `metadata` plus every runtime patch's
  `trainingRuntimeSpec.template.metadata`, in order; the TrainJob's own labels and annotations are read
  nowhere. `mergeRuntimePatches`: for each patch, in order, each `template.spec.replicatedJobs[]` entry is
  strategic-merged into the runtime's replicated Job of the same name, typed as a `batchv1.JobTemplateSpec`
  (so the Job's and pod's patch strategies apply, e.g. containers merge by name). Only `replicatedJobs`
  of a patch's JobSet spec is used.
- Same function: each replicated Job is a pod set counted by its Job template's `parallelism` (default 1),
  except the one labelled `trainer.kubeflow.org/trainjob-ancestor-step: trainer`, counted by the runtime's
  `mlPolicy.numNodes` (default 1); every ML-policy plugin then sets that pod set's count to the TrainJob's
  `trainer.numNodes` (`pkg/runtime/framework/plugins/{plainml,torch,jax,xgboost}` `EnforceMLPolicy`).
  `plugins/jobset/jobset.go` `Build` writes each count to the Job template's `parallelism` and
  `completions`; `replicas` stays as the runtime has it.
- `Build`: same name and namespace, a controller owner reference with blockOwnerDeletion,
  `spec.suspend` = the TrainJob's; nothing is built when the JobSet exists and neither it nor the TrainJob
  is suspended.
- `plugins/jobset/jobset.go` `Status`: `Completed=True` and `Failed=True` of the JobSet become `Complete` and
  `Failed` with only the type renamed (`meta.SetStatusCondition`), `replicatedJobsStatus` becomes
  `jobsStatus` entry by entry. `pkg/controller/trainjob_controller.go` `setSuspendedCondition`.

Not reproduced: the trainer container's image, command, args, env and resources, the torch/MPI environment
variables and ports, initializers, volumes, pod-group policies, elastic torch, and the `Validate` checks on
containers and target jobs (dispatch needs none of them; the lab says so rather than invent them).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from airflow_provider_dispatch_lab.apiserver.registry.patching import ListSemanticsFn, strategic_merge_patch
from airflow_provider_dispatch_lab.kinds import JOBSET, TRAINJOB
from airflow_provider_dispatch_lab.simulated.objects import (
    condition_true,
    find_condition,
    meta,
    remove_condition,
    set_status_condition,
)

Obj = dict[str, Any]

ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
ANCESTOR_TRAINER = "trainer"
TRAINER_MANAGER = "trainer.kubeflow.org/trainjob-controller"
FIELD_OWNER = "trainer"

SUSPENDED = ("Suspended", "TrainJob is suspended")
RESUMED = ("Resumed", "TrainJob is resumed")
DEADLINE_EXCEEDED = ("DeadlineExceeded", "TrainJob exceeded its active deadline")
RUNTIME_NOT_SUPPORTED = "TrainingRuntimeNotSupported"


def _template_metadata(patch: Mapping[str, Any]) -> Obj:
    template = ((patch.get("trainingRuntimeSpec") or {}).get("template")) or {}
    return template.get("metadata") or {}


def _patched_replicated_jobs(patch: Mapping[str, Any]) -> list[Obj]:
    template = ((patch.get("trainingRuntimeSpec") or {}).get("template")) or {}
    return list(((template.get("spec") or {}).get("replicatedJobs")) or [])


def jobset_labels_and_annotations(runtime: Mapping[str, Any], trainjob: Mapping[str, Any]) -> tuple[Obj, Obj]:
    """The runtime template's metadata, then every patch's template metadata on top, in patch order."""
    template_meta = ((runtime.get("spec") or {}).get("template") or {}).get("metadata") or {}
    labels: Obj = dict(template_meta.get("labels") or {})
    annotations: Obj = dict(template_meta.get("annotations") or {})
    for patch in (trainjob.get("spec") or {}).get("runtimePatches") or ():
        patch_meta = _template_metadata(patch)
        labels.update(patch_meta.get("labels") or {})
        annotations.update(patch_meta.get("annotations") or {})
    return labels, annotations


def merged_jobset_spec(
    runtime: Mapping[str, Any], trainjob: Mapping[str, Any], job_template_semantics: ListSemanticsFn
) -> Obj:
    """The runtime's JobSet spec with every runtime patch merged into its replicated Jobs, in order."""
    spec: Obj = copy.deepcopy(((runtime.get("spec") or {}).get("template") or {}).get("spec") or {})
    replicated: list[Obj] = spec.get("replicatedJobs") or []
    for patch in (trainjob.get("spec") or {}).get("runtimePatches") or ():
        for job_patch in _patched_replicated_jobs(patch):
            if job_patch.get("template") is None:
                continue
            for job in replicated:
                if job.get("name") == job_patch.get("name"):
                    job["template"] = strategic_merge_patch(
                        job.get("template") or {}, job_patch["template"], job_template_semantics
                    )
    return spec


def pod_set_counts(runtime: Mapping[str, Any], trainjob: Mapping[str, Any], spec: Mapping[str, Any]) -> list[int]:
    """The count of each replicated Job's pod set, in spec order."""
    ml_policy = (runtime.get("spec") or {}).get("mlPolicy")
    num_nodes = ((trainjob.get("spec") or {}).get("trainer") or {}).get("numNodes")
    counts = []
    for job in spec.get("replicatedJobs") or ():
        template = job.get("template") or {}
        count = int((template.get("spec") or {}).get("parallelism") or 1)
        if (template.get("metadata") or {}).get("labels", {}).get(ANCESTOR_LABEL) == ANCESTOR_TRAINER:
            if ml_policy is not None:
                count = int(ml_policy.get("numNodes") or 1)
            if num_nodes is not None:
                count = int(num_nodes)
        counts.append(count)
    return counts


def should_apply(trainjob: Mapping[str, Any], existing: Mapping[str, Any] | None) -> bool:
    """`Build` returns nothing when the JobSet exists and neither it nor the TrainJob is suspended."""
    if existing is None:
        return True
    return bool((trainjob.get("spec") or {}).get("suspend")) or bool((existing.get("spec") or {}).get("suspend"))


def build_jobset(
    trainjob: Mapping[str, Any], runtime: Mapping[str, Any], job_template_semantics: ListSemanticsFn
) -> Obj:
    """The apply configuration Trainer sends (field owner `trainer`, forced)."""
    spec = merged_jobset_spec(runtime, trainjob, job_template_semantics)
    for job, count in zip(spec.get("replicatedJobs") or (), pod_set_counts(runtime, trainjob, spec), strict=True):
        job_spec = job.setdefault("template", {}).setdefault("spec", {})
        job_spec["parallelism"] = count
        job_spec["completions"] = count
    suspend = (trainjob.get("spec") or {}).get("suspend")
    if suspend is not None:
        spec["suspend"] = bool(suspend)
    labels, annotations = jobset_labels_and_annotations(runtime, trainjob)
    trainjob_meta = meta(trainjob)
    metadata: Obj = {
        "name": trainjob_meta["name"],
        "namespace": trainjob_meta["namespace"],
        "ownerReferences": [
            {
                "apiVersion": TRAINJOB.api_version,
                "kind": TRAINJOB.kind,
                "name": trainjob_meta["name"],
                "uid": trainjob_meta["uid"],
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    }
    if labels:
        metadata["labels"] = labels
    if annotations:
        metadata["annotations"] = annotations
    return {"apiVersion": JOBSET.api_version, "kind": JOBSET.kind, "metadata": metadata, "spec": spec}


def is_finished(trainjob: Mapping[str, Any]) -> bool:
    """`trainjob.IsTrainJobFinished`: Complete or Failed is True."""
    return condition_true(trainjob, "Complete") or condition_true(trainjob, "Failed")


def remove_failed_condition(status: Obj) -> None:
    """`removeFailedCondition`: cleared on every reconcile (an external change may end the failure), unless
    it is the deadline's, which is final."""
    conditions: list[Obj] = status.setdefault("conditions", [])
    failed = find_condition(conditions, "Failed")
    if failed is not None and failed.get("reason") != DEADLINE_EXCEEDED[0]:
        remove_condition(conditions, "Failed")


def set_suspended_condition(trainjob: Mapping[str, Any], status: Obj, now: str) -> None:
    """`setSuspendedCondition`: True while suspended; False (Resumed) only after having been True."""
    conditions: list[Obj] = status.setdefault("conditions", [])
    if (trainjob.get("spec") or {}).get("suspend"):
        reason, message = SUSPENDED
        set_status_condition(
            conditions, {"type": "Suspended", "status": "True", "reason": reason, "message": message}, now
        )
    elif (find_condition(conditions, "Suspended") or {}).get("status") == "True":
        reason, message = RESUMED
        set_status_condition(
            conditions, {"type": "Suspended", "status": "False", "reason": reason, "message": message}, now
        )


def copy_jobset_status(jobset: Mapping[str, Any], status: Obj, now: str) -> None:
    """`plugins/jobset/jobset.go` `Status`: the JobSet's terminal conditions and replicated-job counts."""
    conditions: list[Obj] = status.setdefault("conditions", [])
    jobset_conditions = (jobset.get("status") or {}).get("conditions")
    for source, target in (("Completed", "Complete"), ("Failed", "Failed")):
        condition = find_condition(jobset_conditions, source)
        if condition is not None and condition.get("status") == "True":
            set_status_condition(conditions, {**condition, "type": target}, now)
    jobs_status = [
        {
            "name": entry.get("name"),
            "ready": int(entry.get("ready") or 0),
            "succeeded": int(entry.get("succeeded") or 0),
            "failed": int(entry.get("failed") or 0),
            "active": int(entry.get("active") or 0),
            "suspended": int(entry.get("suspended") or 0),
        }
        for entry in (jobset.get("status") or {}).get("replicatedJobsStatus") or ()
    ]
    if jobs_status:
        status["jobsStatus"] = jobs_status
    else:
        status.pop("jobsStatus", None)


def tidy(status: Obj) -> Obj:
    """Drop an empty conditions list, as Go's `omitempty` does when the status is serialized."""
    if not status.get("conditions"):
        status.pop("conditions", None)
    return status

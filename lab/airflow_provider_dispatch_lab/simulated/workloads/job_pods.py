"""The batch/v1 Job controller's view of its pods: pure functions (research k8s-apis.md §3, §6 rule 6).

Sources, `kubernetes/kubernetes:pkg/controller/`:

- `controller_utils.go` `FilterActivePods` / `CountTerminatingPods`: a pod is active when it is neither
  Succeeded nor Failed and has no deletionTimestamp; terminating when it has a deletionTimestamp and is not
  terminal. So a pod being deleted never counts as active (`status.active` is "pending and running pods
  which are not terminating"), whatever its phase.
- `job/job_controller.go` `isPodFailed`: Failed, or, unless only failed pods are replaced, deleted and not
  Succeeded ("count deleted Pods as failures to account for orphan Pods"). `onlyReplaceFailedPods`
  (`podReplacementPolicy: Failed`, or any `podFailurePolicy`).
- `manageJob` / `CreatePodsWithGenerateName` / `GetPodFromTemplate`: a pod is the Job's template with the
  `batch.kubernetes.io/job-tracking` finalizer and a controller owner reference, named by the apiserver from
  `generateName` `<job>-` or, for an Indexed Job, `<job>-<index>-` (`podGenerateNameWithIndex`), which
  appends 5 random characters. Indexed pods get the `batch.kubernetes.io/job-completion-index` annotation
  and label (`PodIndexLabel`, on by default), hostname `<job>-<index>` and the `JOB_COMPLETION_INDEX` env
  var (`indexed_job_utils.go`).
- `indexed_job_utils.go` `firstPendingIndexes`: the lowest indexes neither succeeded nor held by an active
  pod nor, when only failed pods are replaced, by a terminating one; `completedIndexes` is the interval
  string `1,3-5`.
- `controller_utils.go` `ActivePods` ordering for scale-down: unscheduled, then pending, then not ready,
  then newer pods first (pod-deletion cost and ready time are not reproduced).
- `backoff_utils.go` `getRemainingTimeForFailuresCount`: after `n` failures since the last success, new pods
  wait 10 s doubling up to 10 min from the last failure (`job_controller.go` `DefaultJobPodFailureBackOff` and
  `MaxJobPodFailureBackOff`, Kubernetes v1.36.3; the cap was 6 min in older releases).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from airflow_provider_dispatch_lab.clock import parse_timestamp
from airflow_provider_dispatch_lab.simulated.objects import find_condition, meta

Obj = dict[str, Any]

TRACKING_FINALIZER = "batch.kubernetes.io/job-tracking"
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
TERMINAL = ("Succeeded", "Failed")
DEFAULT_BACKOFF = 10.0
MAX_BACKOFF = 600.0


def phase(pod: Mapping[str, Any]) -> str:
    return str((pod.get("status") or {}).get("phase") or "")


def deleting(pod: Mapping[str, Any]) -> bool:
    return bool(meta(pod).get("deletionTimestamp"))


def is_active(pod: Mapping[str, Any]) -> bool:
    return phase(pod) not in TERMINAL and not deleting(pod)


def is_terminating(pod: Mapping[str, Any]) -> bool:
    return deleting(pod) and phase(pod) not in TERMINAL


def is_ready(pod: Mapping[str, Any]) -> bool:
    condition = find_condition((pod.get("status") or {}).get("conditions"), "Ready")
    return condition is not None and condition.get("status") == "True"


def has_finalizer(pod: Mapping[str, Any]) -> bool:
    return TRACKING_FINALIZER in (meta(pod).get("finalizers") or ())


def release_patch(pod: Mapping[str, Any], job: Mapping[str, Any]) -> Obj:
    """`ReleasePod`'s strategic merge patch (`GenerateDeleteOwnerRefStrategicMergeBytes` with the tracking
    finalizer): delete the Job's owner reference and the finalizer; the pod's uid is the precondition."""
    return {
        "metadata": {
            "uid": meta(pod).get("uid"),
            "ownerReferences": [{"$patch": "delete", "uid": meta(job).get("uid")}],
            "$deleteFromPrimitiveList/finalizers": [TRACKING_FINALIZER],
        }
    }


def only_replace_failed(job: Mapping[str, Any]) -> bool:
    spec = job.get("spec") or {}
    return spec.get("podReplacementPolicy") == "Failed" or spec.get("podFailurePolicy") is not None


def is_pod_failed(pod: Mapping[str, Any], job: Mapping[str, Any]) -> bool:
    if phase(pod) == "Failed":
        return True
    if only_replace_failed(job):
        return False
    return deleting(pod) and phase(pod) != "Succeeded"


def is_indexed(job: Mapping[str, Any]) -> bool:
    return (job.get("spec") or {}).get("completionMode") == "Indexed"


def completion_index(pod: Mapping[str, Any]) -> int | None:
    value = (meta(pod).get("annotations") or {}).get(COMPLETION_INDEX)
    try:
        index = int(str(value))
    except ValueError:
        return None
    return index if index >= 0 else None


def valid_index(pod: Mapping[str, Any], job: Mapping[str, Any]) -> int | None:
    index = completion_index(pod)
    completions = int((job.get("spec") or {}).get("completions") or 0)
    return index if index is not None and index < completions else None


def parse_indexes(text: str | None, completions: int) -> set[int]:
    """`parseIndexesFromString`: "1,3-5" into {1, 3, 4, 5}, dropping indexes out of range."""
    result: set[int] = set()
    for part in (text or "").split(","):
        if not part:
            continue
        first, _, last = part.partition("-")
        try:
            low, high = int(first), int(last or first)
        except ValueError:
            continue
        result.update(i for i in range(low, high + 1) if 0 <= i < completions)
    return result


def format_indexes(indexes: Iterable[int]) -> str:
    ordered = sorted(set(indexes))
    parts: list[str] = []
    start = previous = None
    for index in ordered:
        if previous is not None and index == previous + 1:
            previous = index
            continue
        if start is not None:
            parts.append(str(start) if start == previous else f"{start}-{previous}")
        start = previous = index
    if start is not None:
        parts.append(str(start) if start == previous else f"{start}-{previous}")
    return ",".join(parts)


def first_pending_indexes(job: Mapping[str, Any], pods: list[Obj], succeeded: set[int], count: int) -> list[int]:
    completions = int((job.get("spec") or {}).get("completions") or 0)
    taken = set(succeeded)
    taken.update(i for p in pods if is_active(p) and (i := completion_index(p)) is not None)
    if only_replace_failed(job):
        taken.update(i for p in pods if is_terminating(p) and (i := completion_index(p)) is not None)
    return [i for i in range(completions) if i not in taken][:count]


def pod_from_template(job: Mapping[str, Any], owner_reference: Obj, index: int | None) -> Obj:
    """The pod the Job controller posts for one creation."""
    template = copy.deepcopy((job.get("spec") or {}).get("template") or {})
    template_meta = template.get("metadata") or {}
    spec: Obj = template.get("spec") or {}
    name = str(meta(job)["name"])
    metadata: Obj = {
        "generateName": f"{name}-" if index is None else f"{name}-{index}-",
        "labels": dict(template_meta.get("labels") or {}),
        "annotations": dict(template_meta.get("annotations") or {}),
        "finalizers": list(template_meta.get("finalizers") or []),
        "ownerReferences": [owner_reference],
    }
    if TRACKING_FINALIZER not in metadata["finalizers"]:
        metadata["finalizers"].append(TRACKING_FINALIZER)
    if index is not None:
        metadata["annotations"][COMPLETION_INDEX] = str(index)
        metadata["labels"][COMPLETION_INDEX] = str(index)
        spec["hostname"] = f"{name}-{index}"
        for group in ("initContainers", "containers"):
            for container in spec.get(group) or ():
                env = container.setdefault("env", [])
                if not any(e.get("name") == "JOB_COMPLETION_INDEX" for e in env):
                    env.append(
                        {
                            "name": "JOB_COMPLETION_INDEX",
                            "valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{COMPLETION_INDEX}']"}},
                        }
                    )
    for name_field in ("labels", "annotations"):
        if not metadata[name_field]:
            del metadata[name_field]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def removal_order(pods: list[Obj]) -> list[Obj]:
    """`controller.ActivePods` order: the pods to delete first come first."""
    phase_rank = {"Pending": 0, "Unknown": 1, "Running": 2}

    def rank(pod: Obj) -> tuple[int, int, int, float]:
        created = meta(pod).get("creationTimestamp")
        return (
            1 if (pod.get("spec") or {}).get("nodeName") else 0,
            phase_rank.get(phase(pod), 3),
            1 if is_ready(pod) else 0,
            -(parse_timestamp(created) if created else 0.0),
        )

    return sorted(pods, key=rank)


def finished_time(pod: Mapping[str, Any], now: float) -> float:
    """`getFinishedTime`: the latest container termination (when every container has terminated), else
    when Ready turned False, else when the deletion was requested (deletionTimestamp minus the grace
    period), else the creation time."""
    status = pod.get("status") or {}
    ends = [
        ((container.get("state") or {}).get("terminated") or {}).get("finishedAt")
        for container in status.get("containerStatuses") or ()
    ]
    if ends and all(ends):
        return max(parse_timestamp(str(end)) for end in ends)
    ready = find_condition(status.get("conditions"), "Ready")
    if ready is not None and ready.get("status") == "False" and ready.get("lastTransitionTime"):
        return parse_timestamp(str(ready["lastTransitionTime"]))
    deletion = meta(pod).get("deletionTimestamp")
    if deletion:
        return parse_timestamp(str(deletion)) - int(meta(pod).get("deletionGracePeriodSeconds") or 0)
    created = meta(pod).get("creationTimestamp")
    return parse_timestamp(str(created)) if created else now


@dataclass(frozen=True)
class BackoffRecord:
    failures_after_last_success: int = 0
    last_failure_time: float | None = None

    def updated(self, succeeded: list[Obj], failed: list[Obj], now: float) -> BackoffRecord:
        """`newBackoffRecord`: failures since the last success, and when the last one happened."""
        if not failed:
            return BackoffRecord() if succeeded else self
        last_success = max((finished_time(p, now) for p in succeeded), default=None)
        failure_times = sorted(finished_time(p, now) for p in failed)
        if last_success is None:
            return BackoffRecord(self.failures_after_last_success + len(failed), failure_times[-1])
        later = [t for t in failure_times if t > last_success]
        if not later:
            return BackoffRecord()
        return BackoffRecord(len(later), later[-1])

    def remaining(self, now: float) -> float:
        """`getRemainingTime`: lab seconds before new pods may be created."""
        if self.failures_after_last_success == 0 or self.last_failure_time is None:
            return 0.0
        delay = DEFAULT_BACKOFF
        for _ in range(1, self.failures_after_last_success):
            delay *= 2
            if delay >= MAX_BACKOFF:
                delay = MAX_BACKOFF
                break
        elapsed = now - self.last_failure_time
        return 0.0 if delay < elapsed else delay - elapsed

"""Kueue's TrainJob integration (`pkg/controller/jobs/trainjob/trainjob_controller.go`): the GenericJob methods.

* `is_active`: any `status.jobsStatus[].active > 0`. These are counts of Jobs whose `active > 0`, and a Job's
  `active` leaves out terminating pods, so a suspended TrainJob reads inactive while its pods still terminate
  (the flaw of k8s-apis.md §4.6 and anchors.md §0.1).
* `finished`: the TrainJob's `Complete` or `Failed` condition is True.
* `pods_ready`: the JobSet of the TrainJob's name exists, and the `ready + succeeded` counts of
  `status.jobsStatus` add up to the JobSet's Jobs (`spec.replicatedJobs[].replicas`). Those counts are JobSet's:
  a Job counts as ready when its ready and succeeded pods reach its parallelism (completions if fewer), so one
  pod that is not Ready, for instance on a node the node lifecycle controller marked NotReady
  (`MarkPodsNotReady`), makes the TrainJob not ready.
* `run_with_podsets_info`: Kueue's runtime patch gets the admitted PodSets' labels, annotations, nodeSelector,
  tolerations and schedulingGates, in one request while the TrainJob is still suspended (Trainer's validating
  webhook only lets runtime patches change around a suspended TrainJob), then a second request unsuspends it
  (`reconciler.go` `startJob` wraps the method in its own patch; that the two are separate requests is the race
  of kubernetes-sigs/kueue#8296). "kueue runtime patch not found" when the webhook's entry is missing.
* `stop`: suspend (a merge patch), then `jobs are still active` while `is_active`, and only then clear the Kueue
  patch's `replicatedJobs` (`RestorePodSetsInfo`), a change Trainer's webhook would refuse while Jobs are active.

Each write is a JSON merge patch carrying the resourceVersion Kueue read (`clientutil.Patch` in strict mode), so a
stale view conflicts. On a custom resource a merge patch replaces lists whole: the `runtimePatches` list is
sent as Kueue read it, with only its own entry changed.
"""

from __future__ import annotations

import copy
from typing import Any

from airflow_provider_dispatch_lab.client import LabClient
from airflow_provider_dispatch_lab.kinds import TRAINJOB
from airflow_provider_dispatch_lab.simulated.kueue import constants as k
from airflow_provider_dispatch_lab.simulated.kueue.conditions import find
from airflow_provider_dispatch_lab.simulated.kueue.podsets import (
    PodSetInfo,
    kueue_patch_replicated_jobs,
    replicated_jobs,
)

Obj = dict[str, Any]


class JobsStillActive(RuntimeError):
    def __init__(self) -> None:
        super().__init__("jobs are still active")


class KueuePatchMissing(RuntimeError):
    pass


def is_suspended(trainjob: Obj) -> bool:
    return (trainjob.get("spec") or {}).get("suspend") is True


def is_active(trainjob: Obj) -> bool:
    return any(int(s.get("active") or 0) > 0 for s in (trainjob.get("status") or {}).get("jobsStatus") or ())


def finished(trainjob: Obj) -> tuple[bool, bool, str]:
    """(finished, succeeded, message) from the `Complete` and `Failed` conditions."""
    for kind, success in (("Complete", True), ("Failed", False)):
        condition = find(trainjob, kind)
        if condition is not None and condition.get("status") == "True":
            return True, success, str(condition.get("message", ""))
    return False, False, ""


def pods_ready(trainjob: Obj, jobset: Obj | None) -> bool:
    """`TrainJob.PodsReady`: every Job of the child JobSet ready or succeeded; False without the JobSet."""
    if jobset is None:
        return False
    replicas = sum(int(rjob.get("replicas", 1)) for rjob in (jobset.get("spec") or {}).get("replicatedJobs") or ())
    ready = sum(
        int(entry.get("ready") or 0) + int(entry.get("succeeded") or 0)
        for entry in (trainjob.get("status") or {}).get("jobsStatus") or ()
    )
    return replicas == ready


def _kueue_patch(patches: list[Obj]) -> Obj | None:
    return next((p for p in patches if p.get("manager") == k.RUNTIME_PATCH_MANAGER), None)


async def _merge_patch(client: LabClient, trainjob: Obj, spec_patch: Obj) -> Obj:
    meta = trainjob["metadata"]
    body = {"metadata": {"resourceVersion": meta["resourceVersion"]}, "spec": spec_patch}
    return await client.patch(TRAINJOB, meta["namespace"], meta["name"], body, field_manager=k.JOB_MANAGER)


async def suspend(client: LabClient, trainjob: Obj) -> Obj:
    return await _merge_patch(client, trainjob, {"suspend": True})


async def run_with_podsets_info(client: LabClient, trainjob: Obj, runtime_spec: Obj, infos: list[PodSetInfo]) -> Obj:
    jobs = replicated_jobs(trainjob, runtime_spec, with_kueue_patch=False)
    wanted = kueue_patch_replicated_jobs(infos, jobs)
    patches = copy.deepcopy((trainjob.get("spec") or {}).get("runtimePatches") or [])
    own = _kueue_patch(patches)
    if own is None:
        raise KueuePatchMissing("kueue runtime patch not found")
    own.setdefault("trainingRuntimeSpec", {}).setdefault("template", {}).setdefault("spec", {})
    own["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"] = wanted
    updated = trainjob
    if patches != (trainjob.get("spec") or {}).get("runtimePatches"):
        updated = await _merge_patch(client, trainjob, {"runtimePatches": patches})
    return await _merge_patch(client, updated, {"suspend": False})


async def stop(client: LabClient, trainjob: Obj) -> Obj:
    """Suspend, then restore the Kueue patch once no Job is active; `JobsStillActive` meanwhile."""
    current = trainjob
    if not is_suspended(current):
        current = await suspend(client, current)
    if is_active(current):
        raise JobsStillActive()
    patches = copy.deepcopy((current.get("spec") or {}).get("runtimePatches") or [])
    own = _kueue_patch(patches)
    if own is None:
        raise KueuePatchMissing("error restoring info to the trainjob")
    spec = ((own.get("trainingRuntimeSpec") or {}).get("template") or {}).get("spec")
    if isinstance(spec, dict) and spec.get("replicatedJobs") is not None:
        spec.pop("replicatedJobs")
        current = await _merge_patch(client, current, {"runtimePatches": patches})
    return current

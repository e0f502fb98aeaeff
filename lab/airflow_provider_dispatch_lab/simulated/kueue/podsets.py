"""What Kueue derives from a TrainJob: the PodSets of its Workload, and the runtime patch it writes on admission.

PodSets (`trainjob_controller.go` `PodSets` -> `getChildJobSet` -> `jobset_controller.go` `PodSets`): Kueue
builds the JobSet Trainer would build from the runtime and the TrainJob, then takes one PodSet per replicated
job, named after it, with its pod template and `count = replicas * min(parallelism, completions)`
(`podsCountPerReplica`). Trainer's builder (`pkg/runtime/framework/plugins/jobset/builder.go` `Trainer`) sets
the trainer replicated job (label `trainer.kubeflow.org/trainjob-ancestor-step: trainer`) to `replicas: 1` and
`parallelism = completions = numNodes` (the TrainJob's `trainer.numNodes`, else the runtime's
`mlPolicy.numNodes`), and puts `trainer.image/command/args/resourcesPerNode` on its container `node`.

The runtime patches and counts come from the lab's Trainer (`trainer_build.py`), so that Kueue and Trainer agree
on the JobSet; Kueue's Trainer library call also sets the container fields, which the lab's Trainer does not.

On admission (`RunWithPodSetsInfo`) Kueue resolves each PodSet's info (`reconciler.go`
`getPodSetsInfoFromStatus`: the flavors' node labels and tolerations, `kueue.x-k8s.io/podset`, then every
admission check's `podSetUpdates` merged in, `pkg/podset/podset.go` `Merge`) and writes it into the
`replicatedJobs` of its own runtime patch.
"""

from __future__ import annotations

import copy
import functools
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_dispatch_lab.apiserver.registry.patching import ListSemanticsFn
from airflow_provider_dispatch_lab.apiserver.registry.resources import default_registry
from airflow_provider_dispatch_lab.simulated.kueue import constants as k
from airflow_provider_dispatch_lab.simulated.workloads import trainer_build

Obj = dict[str, Any]


class PodSetsError(ValueError):
    """The TrainJob cannot be turned into PodSets (no runtime, no replicated jobs): Kueue makes no Workload."""


def _is_trainer_job(replicated_job: Obj) -> bool:
    labels = ((replicated_job.get("template") or {}).get("metadata") or {}).get("labels") or {}
    return labels.get(k.ANCESTOR_LABEL) == k.ANCESTOR_TRAINER


def _apply_trainer(replicated_job: Obj, trainjob: Obj) -> None:
    """Trainer's `Builder.Trainer`: one replica, and the TrainJob's image, command, args, resources on `node`."""
    replicated_job["replicas"] = 1
    job_spec = replicated_job.setdefault("template", {}).setdefault("spec", {})
    trainer = (trainjob.get("spec") or {}).get("trainer") or {}
    for container in ((job_spec.get("template") or {}).get("spec") or {}).get("containers") or ():
        if container.get("name") != k.TRAINER_CONTAINER:
            continue
        for key in ("image", "command", "args"):
            if trainer.get(key) is not None:
                container[key] = copy.deepcopy(trainer[key])
        resources = trainer.get("resourcesPerNode") or {}
        if resources.get("requests") or resources.get("limits"):
            container["resources"] = copy.deepcopy(resources)


@functools.cache
def _job_template_semantics() -> ListSemanticsFn:
    jobs = default_registry().by_path("batch", "v1", "jobs")
    assert jobs is not None
    return jobs.schema.strategic_list_semantics


def replicated_jobs(trainjob: Obj, runtime_spec: Obj, *, with_kueue_patch: bool = True) -> list[Obj]:
    """The JobSet-to-be's replicated jobs (`getChildJobSet`; `WithoutKueuePatch` drops Kueue's own patch).

    The runtime patches are merged and the pod-set counts computed by the lab's Trainer
    (`trainer_build.merged_jobset_spec`, `pod_set_counts`), so Kueue counts what Trainer will build; the
    trainer container's fields are then filled in as Trainer's builder does (`_apply_trainer`).
    """
    if not ((runtime_spec.get("template") or {}).get("spec") or {}).get("replicatedJobs"):
        raise PodSetsError("the runtime has no replicatedJobs")
    job = copy.deepcopy(trainjob)
    if not with_kueue_patch:
        patches = (job.get("spec") or {}).get("runtimePatches") or []
        kept = [p for p in patches if p.get("manager") != k.RUNTIME_PATCH_MANAGER]
        job.setdefault("spec", {})["runtimePatches"] = kept
    runtime = {"spec": runtime_spec}
    spec = trainer_build.merged_jobset_spec(runtime, job, _job_template_semantics())
    jobs: list[Obj] = spec.get("replicatedJobs") or []
    counts = trainer_build.pod_set_counts(runtime, job, spec)
    for replicated_job, count in zip(jobs, counts, strict=True):
        replicated_job.setdefault("replicas", 1)
        job_spec = replicated_job.setdefault("template", {}).setdefault("spec", {})
        job_spec["parallelism"] = count
        job_spec["completions"] = count
        if _is_trainer_job(replicated_job):
            _apply_trainer(replicated_job, job)
    return jobs


def pods_per_replica(replicated_job: Obj) -> int:
    """`podsCountPerReplica`: parallelism (default 1), lowered to completions when that is smaller."""
    job_spec = (replicated_job.get("template") or {}).get("spec") or {}
    parallelism = int(job_spec.get("parallelism", 1))
    completions = int(job_spec.get("completions", parallelism))
    return min(parallelism, completions)


def podsets(trainjob: Obj, runtime_spec: Obj) -> list[Obj]:
    result = []
    for job in replicated_jobs(trainjob, runtime_spec):
        pod_template = copy.deepcopy(((job.get("template") or {}).get("spec") or {}).get("template") or {})
        result.append(
            {
                "name": job["name"],
                "count": int(job.get("replicas", 1)) * pods_per_replica(job),
                "template": pod_template,
            }
        )
    return result


def same_podsets(job_podsets: list[Obj], workload_podsets: list[Obj]) -> bool:
    """A simplified `equivalentToWorkload`: the same PodSet names and counts, in order (templates not compared)."""
    return [(p["name"], int(p["count"])) for p in job_podsets] == [
        (p.get("name"), int(p.get("count", 1))) for p in workload_podsets
    ]


# --- on admission: the PodSet infos and Kueue's runtime patch ------------------------------------------------


class PodSetMergeError(ValueError):
    """Two sources set one key to different values (`podset.Merge`'s conflict); the job cannot start."""


@dataclass
class PodSetInfo:
    name: str
    count: int
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: list[Obj] = field(default_factory=list)
    scheduling_gates: list[Obj] = field(default_factory=list)

    def merge(self, update: Obj, source: str) -> None:
        for attribute, key in (("labels", "labels"), ("annotations", "annotations"), ("node_selector", "nodeSelector")):
            target: dict[str, str] = getattr(self, attribute)
            for name, value in (update.get(key) or {}).items():
                if name in target and target[name] != value:
                    raise PodSetMergeError(f"in admission check {source!r}: conflict for {key}: key {name}")
                target[name] = value
        for toleration in update.get("tolerations") or ():
            if toleration not in self.tolerations:
                self.tolerations.append(copy.deepcopy(toleration))


def podset_infos(wl: Obj) -> list[PodSetInfo]:
    """`getPodSetsInfoFromStatus`. Flavors contribute nothing here: the lab serves no ResourceFlavor objects."""
    status = wl.get("status") or {}
    counts = {p.get("name"): int(p.get("count", 1)) for p in (wl.get("spec") or {}).get("podSets") or ()}
    infos = []
    for assignment in ((status.get("admission") or {}).get("podSetAssignments")) or ():
        name = str(assignment.get("name"))
        info = PodSetInfo(name=name, count=int(assignment.get("count", counts.get(name, 1))))
        info.labels[k.PODSET_LABEL] = name
        for check in status.get("admissionChecks") or ():
            for update in check.get("podSetUpdates") or ():
                if update.get("name") == name:
                    info.merge(update, str(check.get("name")))
                    break
        infos.append(info)
    return infos


def kueue_patch_replicated_jobs(infos: list[PodSetInfo], jobs: list[Obj]) -> list[Obj]:
    """The `replicatedJobs` of Kueue's runtime patch (`trainjob_controller.go` `RunWithPodSetsInfo`).

    Infos are matched to replicated jobs by name, one to one; tolerations are written as the runtime's list
    merged with the admission's, because Trainer treats that patch field as atomic.
    """
    by_name = {str(job.get("name")): job for job in jobs}
    if len(infos) != len(jobs):
        raise PodSetMergeError(f"invalid podSetsInfo: expecting {len(jobs)} got {len(infos)}")
    seen: set[str] = set()
    result = []
    for info in infos:
        if info.name in seen or info.name not in by_name:
            raise PodSetMergeError(f"invalid podSetsInfo: podset {info.name!r} does not match a replicated job")
        seen.add(info.name)
        metadata: Obj = {}
        if info.labels:
            metadata["labels"] = dict(info.labels)
        if info.annotations:
            metadata["annotations"] = dict(info.annotations)
        pod_spec: Obj = {}
        if info.node_selector:
            pod_spec["nodeSelector"] = dict(info.node_selector)
        if info.tolerations:
            job_spec = by_name[info.name].get("template", {}).get("spec", {})
            existing = ((job_spec.get("template") or {}).get("spec") or {}).get("tolerations") or []
            pod_spec["tolerations"] = [*existing, *(t for t in info.tolerations if t not in existing)]
        if info.scheduling_gates:
            pod_spec["schedulingGates"] = list(info.scheduling_gates)
        pod_template: Obj = {"spec": pod_spec}
        if metadata:
            pod_template = {"metadata": metadata, "spec": pod_spec}
        result.append({"name": info.name, "template": {"spec": {"template": pod_template}}})
    return result

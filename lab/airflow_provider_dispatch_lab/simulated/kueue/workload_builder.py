"""The Workload Kueue creates for a TrainJob (`reconciler.go` `constructWorkload` and `prepareWorkload`).

Name, labels, finalizer and controller ownerRef as in `names.py`; `spec.podSets` from `podsets.py`;
`spec.queueName` from the TrainJob's `kueue.x-k8s.io/queue-name` label; the priority from the
`kueue.x-k8s.io/priority-class` label's WorkloadPriorityClass (`spec.priorityClassRef` + `spec.priority`), else 0
with no reference (no PriorityClass kind is served, so a pod `priorityClassName` cannot be resolved either).
"""

from __future__ import annotations

from typing import Any

from airflow_provider_dispatch_lab.kinds import WORKLOAD
from airflow_provider_dispatch_lab.simulated.kueue import constants as k
from airflow_provider_dispatch_lab.simulated.kueue.config import KueueConfig
from airflow_provider_dispatch_lab.simulated.kueue.names import owner_reference, workload_labels, workload_name

Obj = dict[str, Any]


class PriorityClassNotFound(LookupError):
    pass


def queue_name(trainjob: Obj) -> str:
    return str(((trainjob.get("metadata") or {}).get("labels") or {}).get(k.QUEUE_LABEL, ""))


def priority(trainjob: Obj, config: KueueConfig) -> tuple[Obj | None, int]:
    name = ((trainjob.get("metadata") or {}).get("labels") or {}).get(k.PRIORITY_CLASS_LABEL)
    if not name:
        return None, 0
    if name not in config.workload_priority_classes:
        raise PriorityClassNotFound(f'workloadpriorityclasses.kueue.x-k8s.io "{name}" not found')
    ref = {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": name}
    return ref, int(config.workload_priority_classes[name])


def construct_workload(trainjob: Obj, podsets: list[Obj], config: KueueConfig) -> Obj:
    meta = trainjob["metadata"]
    priority_ref, value = priority(trainjob, config)
    spec: Obj = {"podSets": podsets, "queueName": queue_name(trainjob), "priority": value}
    if priority_ref is not None:
        spec["priorityClassRef"] = priority_ref
    return {
        "apiVersion": WORKLOAD.api_version,
        "kind": WORKLOAD.kind,
        "metadata": {
            "name": workload_name(meta["name"], meta["uid"]),
            "namespace": meta["namespace"],
            "labels": workload_labels(trainjob),
            "finalizers": [k.RESOURCE_IN_USE_FINALIZER],
            "ownerReferences": [owner_reference(trainjob)],
        },
        "spec": spec,
    }

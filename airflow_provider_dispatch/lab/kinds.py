"""API coordinates of the kinds the lab's simulated cluster reads and writes, beyond the ones dispatch touches.

The kinds dispatch itself reads are in `dispatch.vocabulary` (TrainJob, JobSet, the runtimes, Workload, Pod,
Node) and are re-exported here so that controllers import every coordinate from one place.
"""

from __future__ import annotations

from typing import Final

from airflow_provider_dispatch.dispatch.vocabulary import (
    CLUSTER_TRAINING_RUNTIME,
    JOBSET,
    NODE,
    POD,
    TRAINING_RUNTIME,
    TRAINJOB,
    WORKLOAD,
    ApiCoordinates,
)

NAMESPACE: Final = ApiCoordinates("", "v1", "namespaces", "Namespace", namespaced=False)
EVENT: Final = ApiCoordinates("", "v1", "events", "Event", namespaced=True)
JOB: Final = ApiCoordinates("batch", "v1", "jobs", "Job", namespaced=True)
LEASE: Final = ApiCoordinates("coordination.k8s.io", "v1", "leases", "Lease", namespaced=True)
ADMISSION_CHECK: Final = ApiCoordinates("kueue.x-k8s.io", "v1beta2", "admissionchecks", "AdmissionCheck", False)
CLUSTER_QUEUE: Final = ApiCoordinates("kueue.x-k8s.io", "v1beta2", "clusterqueues", "ClusterQueue", False)
LOCAL_QUEUE: Final = ApiCoordinates("kueue.x-k8s.io", "v1beta2", "localqueues", "LocalQueue", True)

__all__ = [
    "ADMISSION_CHECK",
    "CLUSTER_QUEUE",
    "CLUSTER_TRAINING_RUNTIME",
    "EVENT",
    "JOB",
    "JOBSET",
    "LEASE",
    "LOCAL_QUEUE",
    "NAMESPACE",
    "NODE",
    "POD",
    "TRAINING_RUNTIME",
    "TRAINJOB",
    "WORKLOAD",
    "ApiCoordinates",
]

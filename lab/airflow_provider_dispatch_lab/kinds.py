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
SERVICE_ACCOUNT: Final = ApiCoordinates("", "v1", "serviceaccounts", "ServiceAccount", namespaced=True)
ROLE: Final = ApiCoordinates("rbac.authorization.k8s.io", "v1", "roles", "Role", namespaced=True)
CLUSTER_ROLE: Final = ApiCoordinates("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False)
ROLE_BINDING: Final = ApiCoordinates("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", True)
CLUSTER_ROLE_BINDING: Final = ApiCoordinates(
    "rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False
)

__all__ = [
    "ADMISSION_CHECK",
    "CLUSTER_QUEUE",
    "CLUSTER_ROLE",
    "CLUSTER_ROLE_BINDING",
    "CLUSTER_TRAINING_RUNTIME",
    "EVENT",
    "JOB",
    "JOBSET",
    "LEASE",
    "LOCAL_QUEUE",
    "NAMESPACE",
    "NODE",
    "POD",
    "ROLE",
    "ROLE_BINDING",
    "SERVICE_ACCOUNT",
    "TRAINING_RUNTIME",
    "TRAINJOB",
    "WORKLOAD",
    "ApiCoordinates",
]

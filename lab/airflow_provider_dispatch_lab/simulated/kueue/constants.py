"""The names Kueue writes and reads: labels, finalizer, field managers, condition types and reasons.

Each value is the upstream constant of kubernetes-sigs/kueue v0.19.2, the version the lab's CRDs come from (see
`lab/crds/SOURCES.md`), from `apis/kueue/v1beta2/workload_types.go`, `clusterqueue_types.go`,
`pkg/controller/constants/constants.go` and `pkg/constants/constants.go`; k8s-apis.md §4 quotes them. (They were
first read on the main branch after v0.19.2, and are the same in the release.)
"""

from __future__ import annotations

from typing import Final

from airflow_provider_dispatch.dispatch.vocabulary import (
    ADMISSION_CHECK_CONTROLLER,
    KUEUE_RUNTIME_PATCH_MANAGER,
    LABEL_KUEUE_JOB_UID,
    LABEL_KUEUE_QUEUE_NAME,
)

# --- labels, annotations, finalizer (pkg/controller/constants/constants.go, workload_types.go) -----------------

QUEUE_LABEL: Final = LABEL_KUEUE_QUEUE_NAME
JOB_UID_LABEL: Final = LABEL_KUEUE_JOB_UID
#: `kueue.x-k8s.io/priority-class`: names a WorkloadPriorityClass (constants.go `WorkloadPriorityClassLabel`)
PRIORITY_CLASS_LABEL: Final = "kueue.x-k8s.io/priority-class"
#: put on every pod template of an admitted podset (constants.go `PodSetLabel`, reconciler.go
#: `getPodSetsInfoFromStatus`)
PODSET_LABEL: Final = "kueue.x-k8s.io/podset"
#: workload_types.go `ResourceInUseFinalizerName`
RESOURCE_IN_USE_FINALIZER: Final = "kueue.x-k8s.io/resource-in-use"
#: trainjob_controller.go `runtimePatchManagerName`
RUNTIME_PATCH_MANAGER: Final = KUEUE_RUNTIME_PATCH_MANAGER

#: dispatch's AdmissionCheck `spec.controllerName` (DESIGN §6), the default of the scenario's checks
ADMISSION_CHECK_CONTROLLER_NAME: Final = ADMISSION_CHECK_CONTROLLER

# --- field managers (pkg/constants/constants.go) -----------------------------------------------------------------

#: `constants.AdmissionName`: the manager of `patching.PatchAdmissionStatus`, applied with ForceOwnership
ADMISSION_MANAGER: Final = "kueue-admission"
#: the manager Kueue's job reconciler uses for TrainJob updates (controller-runtime's default is the binary name)
JOB_MANAGER: Final = "kueue"

# --- the TrainJob integration (trainjob_controller.go) ---------------------------------------------------------

TRAINJOB_KIND: Final = "TrainJob"
TRAINER_GROUP: Final = "trainer.kubeflow.org"
TRAINER_API_VERSION: Final = "trainer.kubeflow.org/v1alpha1"
#: Trainer's label on the runtime's trainer replicated job (`constants.LabelTrainJobAncestor`)
ANCESTOR_LABEL: Final = "trainer.kubeflow.org/trainjob-ancestor-step"
ANCESTOR_TRAINER: Final = "trainer"
#: the container Trainer applies `trainer.resourcesPerNode` etc. to (`constants.Node`)
TRAINER_CONTAINER: Final = "node"

# --- Workload condition types (workload_types.go) -----------------------------------------------------------------

QUOTA_RESERVED: Final = "QuotaReserved"
ADMITTED: Final = "Admitted"
EVICTED: Final = "Evicted"
PREEMPTED: Final = "Preempted"
REQUEUED: Final = "Requeued"
FINISHED: Final = "Finished"
DEACTIVATION_TARGET: Final = "DeactivationTarget"
PODS_READY: Final = "PodsReady"

#: the conditions `PatchAdmissionStatus` applies as `kueue-admission` (patching.go `admissionManagedConditions`)
ADMISSION_MANAGED_CONDITIONS: Final = (
    QUOTA_RESERVED,
    "BlockedOnPreemptionGates",
    EVICTED,
    ADMITTED,
    PREEMPTED,
    REQUEUED,
    DEACTIVATION_TARGET,
    FINISHED,
    PODS_READY,
)

# --- reasons (workload_types.go) ------------------------------------------------------------------------------

REASON_QUOTA_RESERVED: Final = "QuotaReserved"
REASON_ADMITTED: Final = "Admitted"
REASON_PENDING: Final = "Pending"
REASON_INADMISSIBLE: Final = "Inadmissible"
REASON_PENDING_EVALUATION: Final = "PendingEvaluation"
REASON_WAITING_FOR_QUOTA: Final = "WaitingForQuota"
REASON_EXCEEDS_MAX_QUOTA: Final = "ExceedsMaxQuota"
REASON_WAITING_FOR_PREEMPTED: Final = "WaitingForPreemptedWorkloads"
REASON_MISCONFIGURED: Final = "Misconfigured"
REASON_SUSPENDED: Final = "Suspended"
REASON_NO_RESERVATION: Final = "NoReservation"
REASON_UNSATISFIED_CHECKS: Final = "UnsatisfiedAdmissionChecks"
REASON_UNSATISFIED_CHECKS_LEGACY: Final = "UnsatisfiedChecks"
REASON_NO_RESERVATION_UNSATISFIED_CHECKS: Final = "NoReservationUnsatisfiedChecks"
EVICTED_BY_PREEMPTION: Final = "Preempted"
EVICTED_BY_ADMISSION_CHECK: Final = "AdmissionCheck"
EVICTED_DUE_TO_NODE_FAILURES: Final = "NodeFailures"
EVICTED_BY_DEACTIVATION: Final = "Deactivated"
#: `WorkloadEvictedByPodsReadyTimeout`
EVICTED_BY_PODS_READY_TIMEOUT: Final = "PodsReadyTimeout"
#: `WorkloadRequeuingLimitExceeded`: the DeactivationTarget reason once `backoffLimitCount` re-queues are used
REASON_REQUEUING_LIMIT_EXCEEDED: Final = "RequeuingLimitExceeded"
REASON_REACTIVATED: Final = "Reactivated"
REASON_BACKOFF_FINISHED: Final = "BackoffFinished"
REASON_IN_CLUSTER_QUEUE: Final = "InClusterQueue"
REASON_SUCCEEDED: Final = "Succeeded"
REASON_FAILED: Final = "Failed"

# --- the PodsReady condition (workload_types.go; jobframework/reconciler.go `generatePodsReadyCondition`) --------

#: False: not all pods ready since admission, or not admitted; also the eviction's underlying cause
PODS_READY_WAIT_FOR_START: Final = "WaitForStart"
#: False: the pods were ready once since admission, and no longer are; also the eviction's underlying cause
PODS_READY_WAIT_FOR_RECOVERY: Final = "WaitForRecovery"
#: True, the first time since admission
PODS_READY_STARTED: Final = "Started"
#: True again after `WaitForRecovery`
PODS_READY_RECOVERED: Final = "Recovered"
PODS_READY_NOT_READY_MESSAGE: Final = "Not all pods are ready or succeeded"
PODS_READY_RECOVERY_MESSAGE: Final = "At least one pod has failed, waiting for recovery"
PODS_READY_READY_MESSAGE: Final = "All pods reached readiness and the workload is running"
#: `SetConditionAndUpdate(..., constants.JobControllerName, ...)`: the field manager is the prefix plus the type
PODS_READY_MANAGER: Final = "kueue-job-controller-PodsReady"

# --- admission check states (workload_types.go `CheckState`) -------------------------------------------------

CHECK_PENDING: Final = "Pending"
CHECK_READY: Final = "Ready"
CHECK_RETRY: Final = "Retry"
CHECK_REJECTED: Final = "Rejected"
CHECK_STATES: Final = frozenset({CHECK_PENDING, CHECK_READY, CHECK_RETRY, CHECK_REJECTED})

# --- ClusterQueue / LocalQueue / AdmissionCheck conditions (clusterqueue_types.go, localqueue_types.go) -----

ACTIVE: Final = "Active"
CQ_REASON_READY: Final = "Ready"
CQ_REASON_CHECK_NOT_FOUND: Final = "AdmissionCheckNotFound"
CQ_REASON_CHECK_INACTIVE: Final = "AdmissionCheckInactive"
CQ_REASON_STOPPED: Final = "Stopped"
LQ_REASON_CQ_INACTIVE: Final = "ClusterQueueIsInactive"
LQ_REASON_CQ_MISSING: Final = "ClusterQueueDoesNotExist"

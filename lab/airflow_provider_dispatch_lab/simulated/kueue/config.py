"""What a Kueue deployment is configured with, reduced to what the lab's Kueue reads.

Kueue v0.19.2 is the version the lab follows (`controlplane/versions`, `docs/fidelity.md`); its configuration API is
`apis/config/v1beta2/configuration_types.go`, its defaults `apis/config/v1beta2/defaults.go`
(`SetDefaults_Configuration`) and its feature gates `pkg/features/kube_features.go`.

`wait_for_pods_ready` is `Configuration.WaitForPodsReady`, which v0.19 defaults on (kubernetes-sigs/kueue#11855):
`SetDefaults_Configuration` fills in an empty `WaitForPodsReady{}` when none is given, with a 30 min `timeout`,
`recoveryTimeout` equal to the timeout, and a requeuing backoff of 60 s doubling to 3600 s with no limit on the
count. The only way to turn it off is the `DisableWaitForPodsReady` feature gate (Alpha, off,
`pkg/util/waitforpodsready/waitforpodsready.go` `Enabled`), which is `disable_wait_for_pods_ready` here. A
`recovery_timeout` of 0 turns the recovery check off (`pkg/controller/core/core.go` `waitForPodsReady`). Not
reproduced: `blockAdmission` (default false).

The `UnadmittedWorkloadsObservability` gate decides the reasons of `QuotaReserved=False` and `Admitted=False`
(`pkg/workload/workload.go` `UnadmittedWorkloadReasonWithFallback`, `pkg/workload/admissionchecks.go`
`SyncAdmittedCondition`). v0.19.2 declares it Beta but off (`Default: false`), so the lab writes the fallback
reasons by default: `Pending`, `Inadmissible`, `UnsatisfiedChecks`, `NoReservationUnsatisfiedChecks`, and no
`Admitted` condition while a Workload queues. Turned on it gives the granular reasons Kueue's main branch gives
by default after v0.19.2 (`PendingEvaluation`, `WaitingForQuota`, `UnsatisfiedAdmissionChecks`, ...); the lab's
gate-on path follows upstream's tests at that snapshot (see `workload_status.sync_admitted_condition`).

The lab serves no WorkloadPriorityClass kind (its CRD is not in `lab/crds/`), so `workload_priority_classes`
stands in for those objects: the value of a TrainJob's `kueue.x-k8s.io/priority-class` label is looked up here
(`pkg/util/priority/priority.go` `GetPriorityFromWorkloadPriorityClass` reads the object's `value`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

#: `DefaultWaitForPodsReadyTimeout`
DEFAULT_PODS_READY_TIMEOUT = 30 * 60.0
#: `DefaultRequeuingBackoffBaseSeconds`, `DefaultRequeuingBackoffMaxSeconds`
DEFAULT_REQUEUING_BACKOFF_BASE = 60
DEFAULT_REQUEUING_BACKOFF_MAX = 3600


@dataclass(frozen=True)
class RequeuingStrategy:
    """`RequeuingStrategy`: how a Workload evicted for `PodsReadyTimeout` waits before it is queued again."""

    #: `timestamp`: the queue order of an evicted Workload, from its eviction (`Eviction`) or its creation
    timestamp: Literal["Eviction", "Creation"] = "Eviction"
    #: `backoffLimitCount`: re-queues before the Workload is deactivated; None re-queues without end
    backoff_limit_count: int | None = None
    #: `backoffBaseSeconds`, `backoffMaxSeconds`: the n-th re-queue waits base * 2^(n-1), at most max
    backoff_base_seconds: int = DEFAULT_REQUEUING_BACKOFF_BASE
    backoff_max_seconds: int = DEFAULT_REQUEUING_BACKOFF_MAX

    def backoff(self, count: int) -> float:
        """`UpdateRequeueState`: `wait.Backoff{base, factor 2, cap max}.WaitTime(count)` in seconds (the 0.01 %
        jitter left out)."""
        delay = float(self.backoff_base_seconds)
        for _ in range(1, count):
            delay *= 2
            if delay >= self.backoff_max_seconds:
                return float(self.backoff_max_seconds)
        return min(delay, float(self.backoff_max_seconds))


@dataclass(frozen=True)
class WaitForPodsReady:
    """`WaitForPodsReady` after `SetDefaults_Configuration`, in lab seconds."""

    #: `timeout`: from admission to `PodsReady=True`; past it the Workload is evicted (`PodsReadyTimeout`)
    timeout: float = DEFAULT_PODS_READY_TIMEOUT
    #: `recoveryTimeout`: from `PodsReady=False` (`WaitForRecovery`) after it was True; None is the timeout, 0 off
    recovery_timeout: float | None = None
    requeuing_strategy: RequeuingStrategy = field(default_factory=RequeuingStrategy)

    @property
    def effective_recovery_timeout(self) -> float | None:
        """`waitForPodsReadyConfig.recoveryTimeout`: set only when positive."""
        value = self.timeout if self.recovery_timeout is None else self.recovery_timeout
        return value if value > 0 else None


@dataclass(frozen=True)
class KueueConfig:
    #: the `UnadmittedWorkloadsObservability` feature gate (v0.19.2: Beta, off)
    unadmitted_workloads_observability: bool = False
    workload_priority_classes: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    wait_for_pods_ready: WaitForPodsReady = field(default_factory=WaitForPodsReady)
    #: the `DisableWaitForPodsReady` feature gate
    disable_wait_for_pods_ready: bool = False
    #: the controller-runtime workqueue's per-item exponential backoff after an error, in lab seconds
    #: (client-go `DefaultTypedControllerRateLimiter`: 5 ms doubling to 1000 s; capped lower here so that a lab
    #: run retries within a test's time)
    error_backoff_base: float = 0.005
    error_backoff_max: float = 5.0

    @property
    def pods_ready(self) -> WaitForPodsReady | None:
        """`waitforpodsready.Enabled`: the configuration in force, or None when the gate turns it off."""
        return None if self.disable_wait_for_pods_ready else self.wait_for_pods_ready

    def reason(self, granular: str, fallback: str) -> str:
        """`UnadmittedWorkloadReasonWithFallback`: the granular reason with the gate on, else the fallback."""
        return granular if self.unadmitted_workloads_observability else fallback


DEFAULT_CONFIG = KueueConfig()

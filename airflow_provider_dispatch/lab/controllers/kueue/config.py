"""What a Kueue deployment is configured with, reduced to what the lab's Kueue reads.

The defaults are upstream's at the snapshot (kueue main after v0.19.2): the `UnadmittedWorkloadsObservability`
feature gate is Beta and on by default there (`pkg/features/kube_features.go`), which decides the reasons of
`QuotaReserved=False` and `Admitted=False` (`pkg/workload/workload.go` `UnadmittedWorkloadReasonWithFallback`);
turn it off to reproduce a v0.18/v0.19.0 cluster (`Pending`, `UnsatisfiedChecks`, no `Admitted` while queueing).

The lab serves no WorkloadPriorityClass kind (its CRD is not in `lab/crds/`), so `workload_priority_classes`
stands in for those objects: the value of a TrainJob's `kueue.x-k8s.io/priority-class` label is looked up here
(`pkg/util/priority/priority.go` `GetPriorityFromWorkloadPriorityClass` reads the object's `value`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType


@dataclass(frozen=True)
class KueueConfig:
    unadmitted_workloads_observability: bool = True
    workload_priority_classes: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    #: the controller-runtime workqueue's per-item exponential backoff after an error, in lab seconds
    #: (client-go `DefaultTypedControllerRateLimiter`: 5 ms doubling to 1000 s; capped lower here so that a lab
    #: run retries within a test's time)
    error_backoff_base: float = 0.005
    error_backoff_max: float = 5.0

    def reason(self, granular: str, fallback: str) -> str:
        """`UnadmittedWorkloadReasonWithFallback`: the granular reason with the gate on, else the fallback."""
        return granular if self.unadmitted_workloads_observability else fallback


DEFAULT_CONFIG = KueueConfig()

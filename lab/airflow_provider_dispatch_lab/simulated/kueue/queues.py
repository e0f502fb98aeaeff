"""LocalQueue -> ClusterQueue, the checks a ClusterQueue puts on a Workload, and whether a ClusterQueue is Active.

* A Workload's ClusterQueue is its LocalQueue's `spec.clusterQueue` (`pkg/cache/queue/manager.go`
  `ClusterQueueForWorkload`).
* The checks come from `spec.admissionChecksStrategy.admissionChecks[]` (v1beta2 has no `spec.admissionChecks`;
  k8s-apis.md §4.3). An empty `onFlavors` applies to all workloads (the docs and
  `pkg/workload/workload.go` `AdmissionChecksForWorkload`, whose comment says such checks are populated with
  every flavor of the ClusterQueue); a check with `onFlavors` applies once the admission uses one of them, or
  before admission only if it lists every flavor of the ClusterQueue. Where upstream populates the empty list
  was not found in the code read; a PodSet that requests nothing (no flavor in its admission) is therefore
  treated as covered by such checks, which is the documented intent.
* A ClusterQueue is Active when every check it names exists and has `Active=True`
  (`pkg/cache/scheduler/clusterqueue.go` `updateWithAdmissionChecks`, `inactiveReason`), and it is not stopped.
  The lab serves no ResourceFlavor kind, so the `FlavorNotFound` cause cannot arise here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_provider_dispatch_lab.simulated.kueue import constants as k
from airflow_provider_dispatch_lab.simulated.kueue.conditions import is_true
from airflow_provider_dispatch_lab.simulated.kueue.quota import all_flavors

Obj = dict[str, Any]


def local_queue_key(wl: Obj) -> tuple[str, str]:
    return (str(wl["metadata"].get("namespace", "")), str((wl.get("spec") or {}).get("queueName", "")))


def cluster_queue_name(local_queue: Obj | None) -> str | None:
    if local_queue is None:
        return None
    name = (local_queue.get("spec") or {}).get("clusterQueue")
    return str(name) if name else None


def check_strategy(cluster_queue: Obj) -> dict[str, frozenset[str]]:
    strategy = (cluster_queue.get("spec") or {}).get("admissionChecksStrategy") or {}
    return {
        str(rule.get("name")): frozenset(str(f) for f in rule.get("onFlavors") or ())
        for rule in strategy.get("admissionChecks") or ()
    }


def admission_flavors(wl: Obj) -> set[str]:
    admission = (wl.get("status") or {}).get("admission") or {}
    return {
        str(flavor)
        for assignment in admission.get("podSetAssignments") or ()
        for flavor in (assignment.get("flavors") or {}).values()
    }


def checks_for_workload(wl: Obj, cluster_queue: Obj) -> set[str]:
    """`AdmissionChecksForWorkload` (see the module docstring for the empty-`onFlavors` reading)."""
    strategy = check_strategy(cluster_queue)
    admitted = (wl.get("status") or {}).get("admission") is not None
    flavors_now = admission_flavors(wl)
    every_flavor = all_flavors(cluster_queue)
    selected = set()
    for name, on_flavors in strategy.items():
        applies_now = bool(on_flavors & flavors_now) if admitted else on_flavors >= every_flavor
        if not on_flavors or applies_now:
            selected.add(name)
    return selected


@dataclass(frozen=True)
class Readiness:
    active: bool
    reason: str
    message: str


def cluster_queue_readiness(cluster_queue: Obj, admission_checks: Mapping[str, Obj]) -> Readiness:
    """The ClusterQueue's `Active` condition (`inactiveReason`), from the AdmissionCheck objects it names."""
    reasons: list[str] = []
    messages: list[str] = []
    if (cluster_queue.get("spec") or {}).get("stopPolicy", "None") not in ("None", None):
        reasons.append(k.CQ_REASON_STOPPED)
        messages.append("is stopped")
    names = sorted(check_strategy(cluster_queue))
    missing = [name for name in names if name not in admission_checks]
    inactive = [name for name in names if name in admission_checks and not is_true(admission_checks[name], k.ACTIVE)]
    if missing:
        reasons.append(k.CQ_REASON_CHECK_NOT_FOUND)
        messages.append(f"references missing AdmissionCheck(s): {','.join(missing)}")
    if inactive:
        reasons.append(k.CQ_REASON_CHECK_INACTIVE)
        messages.append(f"references inactive AdmissionCheck(s): {','.join(inactive)}")
    if not reasons:
        return Readiness(True, k.CQ_REASON_READY, "Can admit new workloads")
    return Readiness(False, reasons[0], f"Can't admit new workloads: {', '.join(messages)}.")

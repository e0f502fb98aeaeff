"""Preemption within one ClusterQueue, and the eviction it issues (`pkg/scheduler/preemption/preemption.go`).

When a pending Workload does not fit and its ClusterQueue has `spec.preemption.withinClusterQueue:
LowerPriority` (upstream's default is `Never`), the candidates are the ClusterQueue's Workloads with an active
quota reservation (admitted or only quota-reserved: KEP-993 "all Workloads that have a condition QuotaReserved
are candidates") and a lower priority (`LowerOrNewerEqualPriority` adds equal priority and newer). They are
taken in upstream's `candidatesOrdering` (already evicted first, then lower priority, then the most recently
reserved) until the preemptor fits; the "add back what is not needed" pass is not reproduced. No cohorts, no
fair sharing.

The eviction is `evict.Evict` with reason `Preempted` plus `Preempted=True` reason `InClusterQueue`, both with
message `Preempted to accommodate a workload (UID: <uid>, JobUID: <job uid>) due to prioritization in the
ClusterQueue; preemptor path: /<cq>; preemptee path: /<cq>`; the checks go back to Pending (`Reset to Pending
after eviction. Previously: <state>`). The job reconciler then stops the job and, once no Job is active,
releases the quota with `Requeued=True`, so the Workload queues again at once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from airflow_provider_dispatch_lab.client import LabClient
from airflow_provider_dispatch_lab.clock import LabClock
from airflow_provider_dispatch_lab.simulated.kueue import constants as k
from airflow_provider_dispatch_lab.simulated.kueue import status_writer as writer
from airflow_provider_dispatch_lab.simulated.kueue import workload_status as ws
from airflow_provider_dispatch_lab.simulated.kueue.conditions import find
from airflow_provider_dispatch_lab.simulated.kueue.quota import FlavorResource, fits_after_removing

Obj = dict[str, Any]
UNKNOWN = "UNKNOWN"


def priority_of(wl: Obj) -> int:
    return int((wl.get("spec") or {}).get("priority") or 0)


def preemption_message(preemptor: Obj | None, cluster_queue: str, reason: str = k.REASON_IN_CLUSTER_QUEUE) -> str:
    """`preemptionMessage` plus the hierarchy paths v0.19.2 appends (no cohort: `/<cq>`)."""
    meta = (preemptor or {}).get("metadata") or {}
    uid = meta.get("uid") or UNKNOWN
    job_uid = (meta.get("labels") or {}).get(k.JOB_UID_LABEL) or UNKNOWN
    why = "prioritization in the ClusterQueue" if reason == k.REASON_IN_CLUSTER_QUEUE else UNKNOWN
    return (
        f"Preempted to accommodate a workload (UID: {uid}, JobUID: {job_uid}) due to {why}; "
        f"preemptor path: /{cluster_queue}; preemptee path: /{cluster_queue}"
    )


def policy(cluster_queue: Obj) -> str:
    return str(((cluster_queue.get("spec") or {}).get("preemption") or {}).get("withinClusterQueue", "Never"))


def _quota_reserved_at(wl: Obj) -> str:
    condition = find(wl, k.QUOTA_RESERVED) or {}
    return str(condition.get("lastTransitionTime", ""))


def candidates(preemptor: Obj, cluster_queue: Obj, reserved: Iterable[Obj]) -> list[Obj]:
    rule = policy(cluster_queue)
    if rule == "Never":
        return []
    mine = priority_of(preemptor)
    created = str(preemptor["metadata"].get("creationTimestamp", ""))
    chosen = []
    for wl in reserved:
        theirs = priority_of(wl)
        newer_equal = theirs == mine and str(wl["metadata"].get("creationTimestamp", "")) > created
        if theirs < mine or (rule == "LowerOrNewerEqualPriority" and newer_equal):
            chosen.append(wl)
    chosen.sort(key=_quota_reserved_at, reverse=True)
    chosen.sort(key=priority_of)
    chosen.sort(key=lambda wl: not ws.is_evicted(wl))
    return chosen


def targets(
    preemptor: Obj, cluster_queue: Obj, reserved: Iterable[Obj], usage: Mapping[FlavorResource, Any]
) -> list[Obj]:
    """The victims that make the preemptor fit, or [] when preempting all candidates would not be enough."""
    picked: list[Obj] = []
    for candidate in candidates(preemptor, cluster_queue, reserved):
        picked.append(candidate)
        if fits_after_removing(preemptor, cluster_queue, usage, picked):
            return picked
    return []


async def evict_for_preemption(client: LabClient, clock: LabClock, victim: Obj, message: str) -> Obj | None:
    """The preemptor's write for one victim; None when it is no longer reserved or already evicted."""

    def preempt(wl: Obj) -> bool:
        if ws.is_evicted(wl) or not ws.has_quota_reservation(wl):
            return False
        now = clock.timestamp()
        ws.prepare_for_eviction(wl, k.EVICTED_BY_PREEMPTION, message, now)
        ws.set_preempted(wl, k.REASON_IN_CLUSTER_QUEUE, message, now)
        return True

    meta = victim["metadata"]
    return await writer.update_admission_status(client, meta["namespace"], meta["name"], preempt)

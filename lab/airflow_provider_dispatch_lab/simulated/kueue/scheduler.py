"""Kueue's scheduler, reduced to quota reservation in single ClusterQueues (`pkg/scheduler/scheduler.go`).

A scheduling cycle runs whenever a Workload, LocalQueue, ClusterQueue or AdmissionCheck changes (and every
`RESYNC_SECONDS` of lab time). For each Active ClusterQueue (`queues.cluster_queue_readiness`):

* the pending Workloads of its LocalQueues are taken in queue order: higher `spec.priority` first, then the
  queue-order timestamp (`workload.go` `GetQueueOrderTimestamp`: the eviction time while evicted for
  `PodsReadyTimeout` (with the requeuing strategy's default timestamp, `Eviction`) or by an `AdmissionCheck`,
  else the creation time); a Workload is pending when active, not finished, without quota, not
  deleted, and not backing off (`queue/cluster_queue.go` `backoffWaitingTimeExpired`: `Requeued` not False and
  `requeueAt` passed);
* a Workload that fits (`quota.assign_flavors`) gets its quota reserved in one `PatchAdmissionStatus`
  (`scheduler.go` `admit`): `status.admission` with the PodSet assignments, `QuotaReserved=True`, and, when its
  check entries are all present, `Admitted` synced (True at once when it has no checks);
* one that does not fit gets `QuotaReserved=False` with the flavor assigner's message, after trying preemption
  within the ClusterQueue (`preemption.py`), which adds `. Pending the preemption of <n> workload(s)`;
* `StrictFIFO` stops at the first Workload that does not fit; `BestEffortFIFO` (the default) goes on, except
  after one that is waiting for preemptions.

The scheduler remembers what it wrote until its informer catches up (upstream's cache "assumes" admitted
Workloads), so two cycles never count one reservation twice or miss one.
"""

from __future__ import annotations

import asyncio
from typing import Any

from airflow_provider_dispatch_lab.client import Informer, LabClient
from airflow_provider_dispatch_lab.kinds import ADMISSION_CHECK, CLUSTER_QUEUE, LOCAL_QUEUE, WORKLOAD
from airflow_provider_dispatch_lab.simulated.cluster import ClusterContext
from airflow_provider_dispatch_lab.simulated.kueue import constants as k
from airflow_provider_dispatch_lab.simulated.kueue import status_writer as writer
from airflow_provider_dispatch_lab.simulated.kueue import workload_status as ws
from airflow_provider_dispatch_lab.simulated.kueue.conditions import find
from airflow_provider_dispatch_lab.simulated.kueue.config import DEFAULT_CONFIG, KueueConfig
from airflow_provider_dispatch_lab.simulated.kueue.preemption import (
    evict_for_preemption,
    preemption_message,
    priority_of,
    targets,
)
from airflow_provider_dispatch_lab.simulated.kueue.queues import (
    checks_for_workload,
    cluster_queue_name,
    cluster_queue_readiness,
    local_queue_key,
)
from airflow_provider_dispatch_lab.simulated.kueue.quota import Assignment, add_usage, assign_flavors, sum_usage
from airflow_provider_dispatch_lab.simulated.kueue.runner import run_with_informers

Obj = dict[str, Any]
Key = tuple[str, str]
RESYNC_SECONDS = 5.0


def _key(wl: Obj) -> Key:
    return (str(wl["metadata"].get("namespace", "")), str(wl["metadata"]["name"]))


def _revision(obj: Obj) -> int:
    try:
        return int(obj["metadata"].get("resourceVersion", 0))
    except (TypeError, ValueError):
        return 0


def is_pending(wl: Obj, now: float) -> bool:
    """Admissible (`workload.IsAdmissible`) and not backing off (`backoffWaitingTimeExpired`)."""
    if not ws.is_active(wl) or ws.is_finished(wl) or ws.has_quota_reservation(wl):
        return False
    if wl["metadata"].get("deletionTimestamp"):
        return False
    requeued = find(wl, k.REQUEUED)
    if requeued is not None and requeued.get("status") == "False":
        return False
    due = ws.requeue_at(wl)
    return due is None or due <= now


def queue_order(wl: Obj, config: KueueConfig = DEFAULT_CONFIG) -> tuple[int, str, str]:
    evicted = find(wl, k.EVICTED)
    stamp = str(wl["metadata"].get("creationTimestamp", ""))
    reasons = {k.EVICTED_BY_ADMISSION_CHECK}
    if config.wait_for_pods_ready.requeuing_strategy.timestamp == "Eviction":
        reasons.add(k.EVICTED_BY_PODS_READY_TIMEOUT)
    if evicted is not None and evicted.get("status") == "True" and evicted.get("reason") in reasons:
        stamp = str(evicted.get("lastTransitionTime", stamp))
    return (-priority_of(wl), stamp, str(wl["metadata"]["name"]))


class KueueScheduler:
    name = "kueue-scheduler"

    def __init__(self, context: ClusterContext, config: KueueConfig = DEFAULT_CONFIG) -> None:
        self.clock = context.clock
        self.config = config
        self.client: LabClient = context.client("kueue-scheduler")
        self.workloads = Informer(self.client, WORKLOAD)
        self.local_queues = Informer(self.client, LOCAL_QUEUE)
        self.cluster_queues = Informer(self.client, CLUSTER_QUEUE)
        self.admission_checks = Informer(self.client, ADMISSION_CHECK)
        self._written: dict[Key, Obj] = {}
        self._wake = asyncio.Event()
        for informer in (self.workloads, self.local_queues, self.cluster_queues, self.admission_checks):
            informer.on_change(self._poke)

    def _poke(self, kind: str, obj: Obj, old: Obj | None) -> None:
        self._wake.set()

    async def run(self) -> None:
        informers = [self.workloads, self.local_queues, self.cluster_queues, self.admission_checks]
        await run_with_informers(self.client, informers, self._loop)

    async def _loop(self) -> None:
        while True:
            self._wake.clear()
            await self.cycle()
            await self._wait()

    async def _wait(self) -> None:
        if self._wake.is_set():
            return
        loop = asyncio.get_running_loop()
        waiters = {loop.create_task(self._wake.wait()), loop.create_task(self.clock.sleep(RESYNC_SECONDS))}
        try:
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in waiters:
                task.cancel()
            # Not `suppress(CancelledError)` around each await: a stop that cancels this task while it waits for
            # its waiters to end would be swallowed there, and the loop would run on. A cancelled gather raises.
            await asyncio.gather(*waiters, return_exceptions=True)

    def _note(self, written: Obj | None) -> None:
        if written is not None:
            self._written[_key(written)] = written

    def _effective(self, cached: Obj) -> Obj:
        key = _key(cached)
        written = self._written.get(key)
        if written is None:
            return cached
        if _revision(written) > _revision(cached):
            return written
        del self._written[key]
        return cached

    async def cycle(self) -> None:
        now = self.clock.now()
        checks = {str(ac["metadata"]["name"]): ac for ac in self.admission_checks.items()}
        members: dict[str, list[Obj]] = {}
        for cached in self.workloads.items():
            wl = self._effective(cached)
            local_queue = self.local_queues.get(*local_queue_key(wl))
            if local_queue is None or (local_queue.get("spec") or {}).get("stopPolicy", "None") not in ("None", None):
                continue
            cq_name = cluster_queue_name(local_queue)
            if cq_name:
                members.setdefault(cq_name, []).append(wl)
        for cq_name, workloads in sorted(members.items()):
            cluster_queue = self.cluster_queues.get(None, cq_name)
            if cluster_queue is None or not cluster_queue_readiness(cluster_queue, checks).active:
                continue
            await self._schedule_queue(cq_name, cluster_queue, workloads, now)

    async def _schedule_queue(self, cq_name: str, cluster_queue: Obj, workloads: list[Obj], now: float) -> None:
        reserved = [wl for wl in workloads if ws.has_active_quota_reservation(wl)]
        usage = sum_usage(reserved)
        strict = (cluster_queue.get("spec") or {}).get("queueingStrategy") == "StrictFIFO"
        pending = (wl for wl in workloads if is_pending(wl, now))
        for wl in sorted(pending, key=lambda wl: queue_order(wl, self.config)):
            assignment = assign_flavors(wl, cluster_queue, usage)
            if assignment.fits:
                written = await self._reserve(wl, cq_name, cluster_queue, assignment)
                if written is not None:
                    self._note(written)
                    add_usage(usage, assignment.usage)
                    reserved.append(written)
                continue
            victims: list[Obj] = []
            if assignment.no_fit_reason == k.REASON_WAITING_FOR_QUOTA:
                victims = targets(wl, cluster_queue, reserved, usage)
                message = preemption_message(wl, cq_name)
                for victim in victims:
                    if not ws.is_evicted(victim):
                        self._note(await evict_for_preemption(self.client, self.clock, victim, message))
            await self._mark_pending(wl, assignment, len(victims))
            if strict or victims:
                break

    async def _reserve(self, wl: Obj, cq_name: str, cluster_queue: Obj, assignment: Assignment) -> Obj | None:
        admission = {"clusterQueue": cq_name, "podSetAssignments": assignment.podset_assignments}

        def reserve(fresh: Obj) -> bool:
            if not is_pending(fresh, self.clock.now()):
                return False
            now = self.clock.timestamp()
            ws.set_quota_reservation(fresh, admission, now)
            present = {str(check.get("name")) for check in ws.admission_checks(fresh)}
            if checks_for_workload(fresh, cluster_queue) <= present:
                ws.sync_admitted_condition(fresh, now, self.config)
            return True

        meta = wl["metadata"]
        return await writer.update_admission_status(self.client, meta["namespace"], meta["name"], reserve)

    async def _mark_pending(self, wl: Obj, assignment: Assignment, preempting: int) -> None:
        if preempting:
            granular = k.REASON_WAITING_FOR_PREEMPTED
            message = f"{assignment.message}. Pending the preemption of {preempting} workload(s)"
        else:
            granular = k.REASON_WAITING_FOR_QUOTA
            if assignment.no_fit_reason in (k.REASON_EXCEEDS_MAX_QUOTA, k.REASON_INADMISSIBLE):
                granular = k.REASON_EXCEEDS_MAX_QUOTA
            message = assignment.message
        reason = self.config.reason(granular, k.REASON_PENDING)
        current = find(wl, k.QUOTA_RESERVED)
        if current is not None and (current.get("status"), current.get("reason"), current.get("message")) == (
            "False",
            reason,
            message,
        ):
            return

        def mark(fresh: Obj) -> bool:
            if not is_pending(fresh, self.clock.now()):
                return False
            return ws.unset_quota_reservation(fresh, reason, message, self.clock.timestamp(), self.config)

        meta = wl["metadata"]
        self._note(await writer.update_admission_status(self.client, meta["namespace"], meta["name"], mark))

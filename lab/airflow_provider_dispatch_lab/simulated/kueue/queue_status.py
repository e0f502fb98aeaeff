"""The ClusterQueue and LocalQueue status Kueue maintains: the `Active` condition and the workload counts.

`pkg/controller/core/clusterqueue_controller.go` and `localqueue_controller.go`: a ClusterQueue is `Active=True`
(reason `Ready`, `Can admit new workloads`) when the scheduler cache says so (`queues.cluster_queue_readiness`:
every AdmissionCheck it names exists and is Active); otherwise False with the first cause's reason
(`AdmissionCheckNotFound`, `AdmissionCheckInactive`, `Stopped`) and `Can't admit new workloads: <causes>.`.
A LocalQueue is Active when its ClusterQueue is (`Can submit new workloads to clusterQueue`), else
`ClusterQueueIsInactive` / `ClusterQueueDoesNotExist` with `Can't submit new workloads to clusterQueue`.
Counts: `pendingWorkloads`, `reservingWorkloads` (quota reserved), `admittedWorkloads`. Flavor usage fields are
not written. Writes are merge patches of `/status`, made only when something changed.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
from typing import Any

from airflow_provider_dispatch.dispatch.vocabulary import ApiCoordinates
from airflow_provider_dispatch_lab.client import ApiStatusError, Informer, LabClient
from airflow_provider_dispatch_lab.kinds import ADMISSION_CHECK, CLUSTER_QUEUE, LOCAL_QUEUE, WORKLOAD
from airflow_provider_dispatch_lab.simulated.cluster import ClusterContext
from airflow_provider_dispatch_lab.simulated.kueue import constants as k
from airflow_provider_dispatch_lab.simulated.kueue import workload_status as ws
from airflow_provider_dispatch_lab.simulated.kueue.conditions import set_condition
from airflow_provider_dispatch_lab.simulated.kueue.queues import (
    cluster_queue_name,
    cluster_queue_readiness,
    local_queue_key,
)
from airflow_provider_dispatch_lab.simulated.kueue.runner import run_with_informers

Obj = dict[str, Any]
RESYNC_SECONDS = 10.0
logger = logging.getLogger(__name__)


def _counts(workloads: list[Obj]) -> dict[str, int]:
    live = [wl for wl in workloads if not ws.is_finished(wl)]
    return {
        "pendingWorkloads": sum(1 for wl in live if not ws.has_quota_reservation(wl) and ws.is_active(wl)),
        "reservingWorkloads": sum(1 for wl in live if ws.has_quota_reservation(wl)),
        "admittedWorkloads": sum(1 for wl in live if ws.is_admitted(wl)),
    }


class KueueQueueStatusController:
    name = "kueue-queue-status"

    def __init__(self, context: ClusterContext) -> None:
        self.clock = context.clock
        self.client: LabClient = context.client("kueue-queue-controller")
        self.workloads = Informer(self.client, WORKLOAD)
        self.local_queues = Informer(self.client, LOCAL_QUEUE)
        self.cluster_queues = Informer(self.client, CLUSTER_QUEUE)
        self.admission_checks = Informer(self.client, ADMISSION_CHECK)
        self._wake = asyncio.Event()
        for informer in (self.workloads, self.local_queues, self.cluster_queues, self.admission_checks):
            informer.on_change(lambda kind, obj, old: self._wake.set())

    async def run(self) -> None:
        informers = [self.workloads, self.local_queues, self.cluster_queues, self.admission_checks]
        await run_with_informers(self.client, informers, self._loop)

    async def _loop(self) -> None:
        while True:
            self._wake.clear()
            await self.sync()
            with contextlib.suppress(TimeoutError):
                wall = self.clock.wall_seconds(RESYNC_SECONDS)
                async with asyncio.timeout(wall):
                    await self._wake.wait()

    async def sync(self) -> None:
        """One pass over a snapshot of the caches (they change while the writes are awaited)."""
        checks = {str(ac["metadata"]["name"]): ac for ac in self.admission_checks.items()}
        cluster_queues = list(self.cluster_queues.items())
        local_queues = list(self.local_queues.items())
        by_local: dict[tuple[str, str], list[Obj]] = {}
        for wl in self.workloads.items():
            by_local.setdefault(local_queue_key(wl), []).append(wl)
        readiness = {str(cq["metadata"]["name"]): cluster_queue_readiness(cq, checks) for cq in cluster_queues}
        by_cluster: dict[str, list[Obj]] = {}
        for lq in local_queues:
            key = (str(lq["metadata"].get("namespace", "")), str(lq["metadata"]["name"]))
            cq_name = cluster_queue_name(lq) or ""
            by_cluster.setdefault(cq_name, []).extend(by_local.get(key, []))
            state = readiness.get(cq_name)
            if state is None:
                active, reason = False, k.LQ_REASON_CQ_MISSING
            else:
                active, reason = state.active, k.CQ_REASON_READY if state.active else k.LQ_REASON_CQ_INACTIVE
            message = (
                "Can submit new workloads to clusterQueue" if active else "Can't submit new workloads to clusterQueue"
            )
            await self._write(LOCAL_QUEUE, lq, active, reason, message, _counts(by_local.get(key, [])))
        for cq in cluster_queues:
            name = str(cq["metadata"]["name"])
            state = readiness[name]
            counts = _counts(by_cluster.get(name, []))
            await self._write(CLUSTER_QUEUE, cq, state.active, state.reason, state.message, counts)

    async def _write(
        self, coords: ApiCoordinates, obj: Obj, active: bool, reason: str, message: str, counts: dict[str, int]
    ) -> None:
        wanted = copy.deepcopy(obj)
        status = wanted.setdefault("status", {})
        changed = set_condition(wanted, k.ACTIVE, active, reason, message, self.clock.timestamp())
        for field, value in counts.items():
            if status.get(field) != value:
                status[field] = value
                changed = True
        if not changed:
            return
        meta = obj["metadata"]
        body = {"metadata": {"resourceVersion": meta["resourceVersion"]}, "status": status}
        # a conflict or a vanished queue is settled by the informer event that follows, or by the resync
        try:
            await self.client.patch(coords, meta.get("namespace"), meta["name"], body, subresource="status")
        except ApiStatusError as error:
            logger.debug("%s %s: status not written: %s", coords.kind, meta["name"], error)

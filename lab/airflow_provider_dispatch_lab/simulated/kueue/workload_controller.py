"""Kueue's workload controller (`pkg/controller/core/workload_controller.go` `Reconcile`, v0.19.2), per Workload:

1. Finished Workloads are left alone; a Workload without owners that is being deleted loses the finalizer.
2. A check in `Retry` with `requeueAfterSeconds` records `status.requeueState.requeueAt` = the check's
   `lastTransitionTime + requeueAfterSeconds` (`NeedsRequeueAtUpdate`), before anything resets the check.
3. Active Workloads: a `DeactivationTarget=True` sets `spec.active=false` (an Update). A pending Workload waits
   for `requeueAt`, which is then cleared. `Requeued=False` becomes True with reason `Reactivated` (after a
   deactivation) or `BackoffFinished` (after `AdmissionCheck`/`PodsReadyTimeout` evictions, once the backoff
   has passed).
4. Inactive Workloads (`spec.active=false`, by a user or through a DeactivationTarget) are evicted once: reason
   `Deactivated` (`DeactivatedDueTo<target reason>`), message `The workload is deactivated[ due to <target
   message>]`, checks reset, the target and the requeue state removed.
5. `reconcileSyncAdmissionChecks`: a Pending entry per check the ClusterQueue selects, unselected ones removed
   (a `Status().Update`).
6. Not admitted: `QuotaReserved=False` for a missing or inactive LocalQueue/ClusterQueue, and `Admitted` synced
   (this is where `Admitted=True` comes once quota is reserved and every check is Ready).
7. Quota reserved: `reconcileCheckBasedEviction`. A Rejected check sets `DeactivationTarget` (reason
   `AdmissionCheck`, message `AdmissionCheck in Rejected state: "<name>" (<message>)`), which deactivates it
   through 3 and 4; a Retry check evicts it (reason `AdmissionCheck`, message `Evicted due to AdmissionCheck in
   Retry state: "<name>" (<message>)`), the job reconciler then stops the job and releases the quota.
8. Quota reserved, no check-based eviction: `reconcileNotReadyTimeout` (waitForPodsReady, on by default in
   v0.19; `config.py`). An admitted, active, not evicted Workload whose `PodsReady` is not True waits
   `timeout` from its admission (`WaitForStart`, or no PodsReady yet), or `recoveryTimeout` from
   `PodsReady=False` with reason `WaitForRecovery` (its pods were ready once). The reconcile comes back when
   the time is up (`RequeueAfter`); past it, the Workload is evicted with reason `PodsReadyTimeout`, message
   `Exceeded the PodsReady timeout <namespace>/<name>`, the cause (`WaitForStart`/`WaitForRecovery`) counted in
   `schedulingStats.evictions`, and `requeueState` one re-queue more with `requeueAt` its backoff from now
   (`UpdateRequeueState`: 60 s doubling up to 3600 s by default). With `backoffLimitCount` set and reached it is
   deactivated instead (`DeactivationTarget`, reason `RequeuingLimitExceeded`, `triggerDeactivation`). The job
   reconciler then stops the job and releases the quota with `Requeued=False`; 3 finishes the backoff. The
   `PodsReady` condition itself is the job reconciler's (`job_reconciler.py`).

Every status write but 5 is `PatchAdmissionStatus` (`status_writer.py`). Not reproduced: maximum execution
time, stop policies' HoldAndDrain evictions, DRA, TAS, MultiKueue, retention, `blockAdmission`.
"""

from __future__ import annotations

import copy
from typing import Any

from airflow_provider_dispatch_lab.client import Informer, LabClient
from airflow_provider_dispatch_lab.clock import format_timestamp, parse_timestamp
from airflow_provider_dispatch_lab.kinds import ADMISSION_CHECK, CLUSTER_QUEUE, LOCAL_QUEUE, WORKLOAD
from airflow_provider_dispatch_lab.simulated.cluster import ClusterContext
from airflow_provider_dispatch_lab.simulated.kueue import constants as k
from airflow_provider_dispatch_lab.simulated.kueue import status_writer as writer
from airflow_provider_dispatch_lab.simulated.kueue import workload_status as ws
from airflow_provider_dispatch_lab.simulated.kueue.conditions import find, is_true, remove_condition
from airflow_provider_dispatch_lab.simulated.kueue.config import DEFAULT_CONFIG, KueueConfig
from airflow_provider_dispatch_lab.simulated.kueue.queues import (
    checks_for_workload,
    cluster_queue_name,
    cluster_queue_readiness,
    local_queue_key,
)
from airflow_provider_dispatch_lab.simulated.kueue.runner import run_with_informers
from airflow_provider_dispatch_lab.simulated.kueue.workqueue import WorkQueue

Obj = dict[str, Any]
Key = tuple[str, str]


class KueueWorkloadController:
    name = "kueue-workload-controller"

    def __init__(self, context: ClusterContext, config: KueueConfig = DEFAULT_CONFIG) -> None:
        self.clock = context.clock
        self.config = config
        self.client: LabClient = context.client("kueue-workload-controller")
        self.workloads = Informer(self.client, WORKLOAD)
        self.local_queues = Informer(self.client, LOCAL_QUEUE)
        self.cluster_queues = Informer(self.client, CLUSTER_QUEUE)
        self.admission_checks = Informer(self.client, ADMISSION_CHECK)
        self.queue: WorkQueue[Key] = WorkQueue(
            self.clock, backoff_base=config.error_backoff_base, backoff_max=config.error_backoff_max
        )
        self.workloads.on_change(self._on_workload)
        self.local_queues.on_change(self._on_queue_spec)
        self.cluster_queues.on_change(self._on_queue_spec)
        self.admission_checks.on_change(self._on_queue_setup)

    def _on_workload(self, kind: str, obj: Obj, old: Obj | None) -> None:
        meta = obj.get("metadata") or {}
        self.queue.add((str(meta.get("namespace", "")), str(meta.get("name"))))

    def _on_queue_setup(self, kind: str, obj: Obj, old: Obj | None) -> None:
        for wl in self.workloads.items():
            self._on_workload("MODIFIED", wl, None)

    def _on_queue_spec(self, kind: str, obj: Obj, old: Obj | None) -> None:
        """Queues matter to Workloads by their spec; their status (the counts Kueue writes) does not."""
        generation = (obj.get("metadata") or {}).get("generation")
        if kind != "MODIFIED" or old is None or (old.get("metadata") or {}).get("generation") != generation:
            self._on_queue_setup(kind, obj, old)

    async def run(self) -> None:
        informers = [self.workloads, self.local_queues, self.cluster_queues, self.admission_checks]
        await run_with_informers(self.client, informers, lambda: self.queue.run(self.reconcile, self.name))

    def now(self) -> str:
        return self.clock.timestamp()

    async def _apply(self, wl: Obj, mutate: writer.Mutation) -> None:
        """Write only if the change applies to the cached copy too (most reconciles change nothing)."""
        if not mutate(copy.deepcopy(wl)):
            return
        meta = wl["metadata"]
        await writer.update_admission_status(self.client, meta["namespace"], meta["name"], mutate)

    async def reconcile(self, key: Key) -> float | None:
        cached = self.workloads.get(*key)
        if cached is None:
            return None
        wl = copy.deepcopy(cached)
        meta = wl["metadata"]
        if not meta.get("ownerReferences") and meta.get("deletionTimestamp"):
            finalizers = [f for f in meta.get("finalizers") or () if f != k.RESOURCE_IN_USE_FINALIZER]
            if finalizers != list(meta.get("finalizers") or ()):
                meta["finalizers"] = finalizers
                await writer.replace(self.client, wl)
            return None
        if ws.is_finished(wl):
            return None
        now = self.clock.now()
        if ws.needs_requeue_at_update(wl, now) is not None:

            def record_retry_time(w: Obj) -> bool:
                when = ws.needs_requeue_at_update(w, self.clock.now())
                return when is not None and ws.set_requeue_at(w, when)

            await self._apply(wl, record_retry_time)
            return None
        if ws.is_active(wl):
            done, delay = await self._reconcile_active(wl, now)
            if done:
                return delay
        elif await self._reconcile_inactive(wl):
            return None
        local_queue = self.local_queues.get(*local_queue_key(wl))
        cq_name = cluster_queue_name(local_queue)
        cluster_queue = self.cluster_queues.get(None, cq_name) if cq_name else None
        if cluster_queue is not None and await self._sync_checks(wl, cluster_queue):
            return None
        if not ws.is_admitted(wl):
            await self._apply(wl, lambda w: self._sync_unadmitted(w, local_queue, cq_name, cluster_queue))
        if ws.has_quota_reservation(wl):
            if await self._check_based_eviction(wl):
                return None
            return await self._not_ready_timeout(wl)
        return None

    async def _reconcile_active(self, wl: Obj, now: float) -> tuple[bool, float | None]:
        """(done, requeue delay): done when this reconcile wrote something or must wait."""
        if is_true(wl, k.DEACTIVATION_TARGET):
            wl["spec"]["active"] = False
            await writer.replace(self.client, wl)
            return True, None
        due = ws.requeue_at(wl)
        if due is not None:
            if due > now:
                return True, due - now
            if not ws.has_quota_reservation(wl) and not ws.is_finished(wl):
                await self._apply(wl, lambda w: ws.set_requeue_at(w, None))
                return True, None
        requeued = find(wl, k.REQUEUED)
        if requeued is None or requeued.get("status") != "False":
            return False, None
        reason = requeued.get("reason")
        if reason == k.EVICTED_BY_DEACTIVATION:
            await self._apply(
                wl, lambda w: ws.set_requeued(w, k.REASON_REACTIVATED, "The workload was reactivated", True, self.now())
            )
            return True, None
        if reason in (k.EVICTED_BY_ADMISSION_CHECK, k.EVICTED_BY_PODS_READY_TIMEOUT):

            def finish_backoff(w: Obj) -> bool:
                ws.set_requeue_at(w, None)
                return ws.set_requeued(
                    w, k.REASON_BACKOFF_FINISHED, "The workload backoff was finished", True, self.now()
                )

            await self._apply(wl, finish_backoff)
            return True, None
        return False, None

    async def _reconcile_inactive(self, wl: Obj) -> bool:
        if ws.is_evicted(wl) and not (wl.get("status") or {}).get("requeueState"):
            return False

        def deactivate(w: Obj) -> bool:
            if ws.is_active(w):
                return False
            target = find(w, k.DEACTIVATION_TARGET)
            changed = False
            if not ws.is_evicted(w):
                cause, message = "", "The workload is deactivated"
                if target is not None:
                    cause = str(target.get("reason", ""))
                    message = f"{message} due to {target.get('message', '')}"
                ws.prepare_for_eviction(w, k.EVICTED_BY_DEACTIVATION, message, self.now(), cause=cause)
                changed = True
            if target is not None:
                changed |= remove_condition(w, k.DEACTIVATION_TARGET)
            if (w.get("status") or {}).get("requeueState") is not None:
                w["status"]["requeueState"] = None
                changed = True
            return changed

        await self._apply(wl, deactivate)
        return True

    async def _sync_checks(self, wl: Obj, cluster_queue: Obj) -> bool:
        if not ws.sync_admission_check_entries(wl, checks_for_workload(wl, cluster_queue), self.now()):
            return False
        await writer.replace_status(self.client, wl)
        return True

    def _sync_unadmitted(
        self, wl: Obj, local_queue: Obj | None, cq_name: str | None, cluster_queue: Obj | None
    ) -> bool:
        if ws.is_admitted(wl):
            return False
        changed = False
        if not ws.has_quota_reservation(wl):
            misconfigured = self.config.reason(k.REASON_MISCONFIGURED, k.REASON_INADMISSIBLE)
            suspended = self.config.reason(k.REASON_SUSPENDED, k.REASON_INADMISSIBLE)
            queue = (wl.get("spec") or {}).get("queueName", "")
            problem: tuple[str, str] | None = None
            if local_queue is None:
                problem = (misconfigured, f"LocalQueue {queue} doesn't exist")
            elif (local_queue.get("spec") or {}).get("stopPolicy", "None") not in ("None", None):
                problem = (suspended, f"LocalQueue {queue} is inactive")
            elif cluster_queue is None:
                problem = (misconfigured, f"ClusterQueue {cq_name} doesn't exist")
            elif not cluster_queue_readiness(cluster_queue, self._checks_by_name()).active:
                problem = (suspended, f"ClusterQueue {cq_name} is inactive")
            if problem is not None:
                changed |= ws.unset_quota_reservation(wl, problem[0], problem[1], self.now(), self.config)
        return ws.sync_admitted_condition(wl, self.now(), self.config) or changed

    def _checks_by_name(self) -> dict[str, Obj]:
        return {str(ac["metadata"]["name"]): ac for ac in self.admission_checks.items()}

    async def _check_based_eviction(self, wl: Obj) -> bool:
        """`reconcileCheckBasedEviction`: whether it evicted (or deactivated) the Workload."""
        if ws.is_evicted(wl):
            return False
        rejected = ws.checks_in_state(wl, k.CHECK_REJECTED)
        retry = ws.checks_in_state(wl, k.CHECK_RETRY)
        if not rejected and not retry:
            return False
        if rejected:
            message = ws.checks_message(rejected, k.CHECK_REJECTED)

            def reject(w: Obj) -> bool:
                if ws.is_evicted(w) or not ws.checks_in_state(w, k.CHECK_REJECTED):
                    return False
                return ws.set_deactivation_target(w, k.EVICTED_BY_ADMISSION_CHECK, message, self.now())

            await self._apply(wl, reject)
            return True

        def evict(w: Obj) -> bool:
            retrying = ws.checks_in_state(w, k.CHECK_RETRY)
            if ws.is_evicted(w) or not retrying or not ws.has_quota_reservation(w):
                return False
            message = "Evicted due to " + ws.checks_message(retrying, k.CHECK_RETRY)
            ws.prepare_for_eviction(w, k.EVICTED_BY_ADMISSION_CHECK, message, self.now())
            return True

        await self._apply(wl, evict)
        return True

    async def _not_ready_timeout(self, wl: Obj) -> float | None:
        """`reconcileNotReadyTimeout`: the lab seconds until the PodsReady timeout is due, or the eviction."""
        config = self.config.pods_ready
        if config is None or not ws.is_active(wl) or ws.is_evicted(wl):
            return None
        cause, remaining = ws.pods_ready_wait(wl, config, self.clock.now())
        if cause is None:
            return None
        if remaining > 0:
            return remaining
        strategy = config.requeuing_strategy
        count = int(((wl.get("status") or {}).get("requeueState") or {}).get("count") or 0)
        if strategy.backoff_limit_count is not None and count + 1 > strategy.backoff_limit_count:
            message = "exceeding the maximum number of re-queuing retries"
            await self._apply(
                wl,
                lambda w: ws.set_deactivation_target(w, k.REASON_REQUEUING_LIMIT_EXCEEDED, message, self.now()),
            )
            return None
        meta = wl["metadata"]
        message = f"Exceeded the PodsReady timeout {meta['namespace']}/{meta['name']}"

        def evict(w: Obj) -> bool:
            now = self.clock.now()
            if not ws.is_active(w) or ws.is_evicted(w):
                return False
            due, left = ws.pods_ready_wait(w, config, now)
            if due is None or left > 0:
                return False
            ws.update_requeue_state(w, strategy, now)
            ws.prepare_for_eviction(w, k.EVICTED_BY_PODS_READY_TIMEOUT, message, format_timestamp(now), cause=due)
            return True

        await self._apply(wl, evict)
        return None


def requeue_at_seconds(wl: Obj) -> float | None:
    """The recorded backoff end, for tests and drills."""
    value = ((wl.get("status") or {}).get("requeueState") or {}).get("requeueAt")
    return parse_timestamp(str(value)) if value else None

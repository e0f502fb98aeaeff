"""Kueue's job reconciler for TrainJobs (`pkg/controller/jobframework/reconciler.go` `ReconcileGenericJob`).

One reconcile per TrainJob, triggered by the TrainJob, its Workloads and its JobSet (the reconciler `Owns`
JobSets, `trainjob_controller.go`), following upstream's numbered steps:

0. A TrainJob that is gone or being deleted: Kueue's finalizer comes off its Workloads. Without the queue
   label the TrainJob is not Kueue's (`manageJobsWithoutQueueName` is off).
1. `ensureOneWorkload`: the owned Workload whose PodSets match is kept, a non-matching unreserved one of a
   suspended job is updated to match, the others are deleted; a running job with no match is stopped.
   A Finished Workload loses its finalizer; a Workload being deleted stops the job and loses it.
2. A Complete/Failed TrainJob makes its Workload `Finished=True` (reason `Succeeded`/`Failed`), which no longer
   counts against quota.
3. No Workload: a running job is stopped, then the Workload is created (`workload_builder.py`).
5. waitForPodsReady (on by default in v0.19, `config.py`): the `PodsReady` condition Kueue wants now
   (`generatePodsReadyCondition`): False `WaitForStart` while not admitted or before the pods were all ready,
   True `Started` once they are (`trainjob_adapter.pods_ready`), False `WaitForRecovery` when they no longer
   are, True `Recovered` when they are again. Written (`SetConditionAndUpdate`, `status_writer.py`) when its
   type, status and reason differ from the Workload's, and the reconcile ends there. The workload controller
   times it out (`workload_controller.py`, step 8).
6. `Evicted=True`: stop the job (suspend; `jobs are still active` until no Job is active); once
   `!IsActive()`, release the quota: `Requeued` (True at once for `Preempted` and `NodeFailures`, False
   otherwise), `QuotaReserved=False` with the eviction message, admission cleared. For TrainJob this happens
   while the pods may still be Terminating (reconciler.go "The job is no longer active, clear the workloads
   admission").
7. Suspended and admitted: start the job (`RunWithPodSetsInfo`, two requests); a PodSet info that cannot be
   merged makes the Workload `Finished` with reason `FailedToStart`. Suspended, not admitted: follow a queue
   label change.
8. Unsuspended but not admitted: suspend again ("Running job is not admitted by a cluster queue, suspending").

Not reproduced: Events, reclaimable pods (step 4), the readiness metrics of step 5, prebuilt workloads,
MultiKueue. Sources: kubernetes-sigs/kueue v0.19.2, `pkg/controller/jobframework/reconciler.go` and
`pkg/controller/jobs/trainjob/trainjob_controller.go`.
"""

from __future__ import annotations

import copy
from typing import Any

from airflow_provider_dispatch_lab.client import Informer, LabClient, is_not_found
from airflow_provider_dispatch_lab.kinds import (
    CLUSTER_TRAINING_RUNTIME,
    JOBSET,
    TRAINING_RUNTIME,
    TRAINJOB,
    WORKLOAD,
)
from airflow_provider_dispatch_lab.simulated.cluster import ClusterContext
from airflow_provider_dispatch_lab.simulated.kueue import constants as k
from airflow_provider_dispatch_lab.simulated.kueue import status_writer as writer
from airflow_provider_dispatch_lab.simulated.kueue import trainjob_adapter as job
from airflow_provider_dispatch_lab.simulated.kueue import workload_status as ws
from airflow_provider_dispatch_lab.simulated.kueue.conditions import find
from airflow_provider_dispatch_lab.simulated.kueue.config import DEFAULT_CONFIG, KueueConfig
from airflow_provider_dispatch_lab.simulated.kueue.names import is_controlled_by
from airflow_provider_dispatch_lab.simulated.kueue.podsets import (
    PodSetMergeError,
    podset_infos,
    podsets,
    same_podsets,
)
from airflow_provider_dispatch_lab.simulated.kueue.runner import run_with_informers
from airflow_provider_dispatch_lab.simulated.kueue.workload_builder import construct_workload, queue_name
from airflow_provider_dispatch_lab.simulated.kueue.workqueue import WorkQueue

Obj = dict[str, Any]
Key = tuple[str, str]


class RuntimeNotFound(LookupError):
    pass


class StaleWorkloads(RuntimeError):
    """`ErrNoMatchingWorkloads` / `ErrExtraWorkloads`: duplicates were deleted; reconcile again."""


def _owner_trainjob(obj: Obj) -> Key | None:
    meta = obj.get("metadata") or {}
    for ref in meta.get("ownerReferences") or ():
        if ref.get("controller") is True and ref.get("kind") == k.TRAINJOB_KIND:
            return (str(meta.get("namespace", "")), str(ref.get("name")))
    return None


class KueueJobReconciler:
    name = "kueue-trainjob-reconciler"

    def __init__(self, context: ClusterContext, config: KueueConfig = DEFAULT_CONFIG) -> None:
        self.clock = context.clock
        self.config = config
        self.client: LabClient = context.client("kueue-job-controller")
        self.trainjobs = Informer(self.client, TRAINJOB)
        self.workloads = Informer(self.client, WORKLOAD)
        self.jobsets = Informer(self.client, JOBSET)
        self.cluster_runtimes = Informer(self.client, CLUSTER_TRAINING_RUNTIME)
        self.runtimes = Informer(self.client, TRAINING_RUNTIME)
        self.queue: WorkQueue[Key] = WorkQueue(
            self.clock, backoff_base=config.error_backoff_base, backoff_max=config.error_backoff_max
        )
        self.trainjobs.on_change(self._on_trainjob)
        self.workloads.on_change(self._on_owned)
        self.jobsets.on_change(self._on_owned)

    def _on_trainjob(self, kind: str, obj: Obj, old: Obj | None) -> None:
        meta = obj.get("metadata") or {}
        self.queue.add((str(meta.get("namespace", "")), str(meta.get("name"))))

    def _on_owned(self, kind: str, obj: Obj, old: Obj | None) -> None:
        owner = _owner_trainjob(obj)
        if owner is not None:
            self.queue.add(owner)

    async def run(self) -> None:
        informers = [self.trainjobs, self.workloads, self.jobsets, self.cluster_runtimes, self.runtimes]
        await run_with_informers(self.client, informers, lambda: self.queue.run(self.reconcile, self.name))

    def now(self) -> str:
        return self.clock.timestamp()

    # --- lookups ------------------------------------------------------------------------------------------

    def runtime_spec(self, trainjob: Obj) -> Obj:
        ref = (trainjob.get("spec") or {}).get("runtimeRef") or {}
        name = str(ref.get("name", ""))
        if ref.get("kind", CLUSTER_TRAINING_RUNTIME.kind) == TRAINING_RUNTIME.kind:
            runtime = self.runtimes.get(trainjob["metadata"]["namespace"], name)
        else:
            runtime = self.cluster_runtimes.get(None, name)
        if runtime is None:
            raise RuntimeNotFound(f"runtime '{name}' not found")
        return dict(runtime.get("spec") or {})

    def owned_workloads(self, namespace: str, uid: str) -> list[Obj]:
        return [
            copy.deepcopy(wl)
            for wl in self.workloads.items()
            if wl["metadata"].get("namespace") == namespace and is_controlled_by(wl, uid)
        ]

    # --- the reconcile ------------------------------------------------------------------------------------

    async def reconcile(self, key: Key) -> float | None:
        namespace, name = key
        cached = self.trainjobs.get(namespace, name)
        if cached is None or cached["metadata"].get("deletionTimestamp"):
            await self._drop_finalizers(namespace, name, cached)
            return None
        trainjob = copy.deepcopy(cached)
        if not queue_name(trainjob):
            return None
        runtime = self.runtime_spec(trainjob)
        wl = await self._ensure_one_workload(trainjob, runtime)
        if wl is not None and ws.is_finished(wl):
            await self._remove_finalizer(wl)
            return None
        if wl is not None and wl["metadata"].get("deletionTimestamp"):
            await job.stop(self.client, trainjob)
            await self._remove_finalizer(wl)
            return None
        done, succeeded, message = job.finished(trainjob)
        if done:
            if wl is not None and not ws.is_finished(wl):
                reason = k.REASON_SUCCEEDED if succeeded else k.REASON_FAILED
                await self._update_status(wl, lambda w: ws.set_finished(w, reason, message, self.now()))
            return None
        if wl is None:
            if not job.is_suspended(trainjob):
                trainjob = await job.stop(self.client, trainjob)
            await self.client.create(
                WORKLOAD, namespace, construct_workload(trainjob, podsets(trainjob, runtime), self.config)
            )
            return None
        if self.config.pods_ready is not None and await self._sync_pods_ready(trainjob, wl):
            return None
        evicted = find(wl, k.EVICTED)
        if evicted is not None and evicted.get("status") == "True":
            trainjob = await job.stop(self.client, trainjob)
            if ws.has_quota_reservation(wl) and not job.is_active(trainjob):
                await self._release_quota(wl, evicted)
            return None
        if job.is_suspended(trainjob):
            if ws.is_admitted(wl):
                await self._start(trainjob, runtime, wl)
            elif (wl.get("spec") or {}).get("queueName") != queue_name(trainjob):
                wl["spec"]["queueName"] = queue_name(trainjob)
                await writer.replace(self.client, wl)
            return None
        if not ws.is_admitted(wl):
            await job.stop(self.client, trainjob)
        return None

    async def _ensure_one_workload(self, trainjob: Obj, runtime: Obj) -> Obj | None:
        meta = trainjob["metadata"]
        owned = self.owned_workloads(meta["namespace"], meta["uid"])
        wanted = podsets(trainjob, runtime)
        match = next((wl for wl in owned if same_podsets(wanted, (wl.get("spec") or {}).get("podSets") or [])), None)
        to_delete = [wl for wl in owned if wl is not match]
        to_update = None
        if match is None and to_delete and job.is_suspended(trainjob) and not ws.has_quota_reservation(to_delete[0]):
            to_update = to_delete.pop(0)
        if match is None and not job.is_suspended(trainjob) and not job.finished(trainjob)[0]:
            await job.stop(self.client, trainjob)
        deleted = 0
        for wl in to_delete:
            await self._remove_finalizer(wl)
            try:
                await self.client.delete(WORKLOAD, wl["metadata"]["namespace"], wl["metadata"]["name"])
                deleted += 1
            except Exception as error:
                if not is_not_found(error):
                    raise
        if deleted:
            raise StaleWorkloads(f"deleted {deleted} workloads")
        if to_update is not None:
            fresh = construct_workload(trainjob, wanted, self.config)
            to_update["spec"] = {**fresh["spec"], "active": (to_update.get("spec") or {}).get("active", True)}
            return await writer.replace(self.client, to_update)
        return match

    async def _release_quota(self, wl: Obj, evicted: Obj) -> None:
        reason, message = str(evicted.get("reason", "")), str(evicted.get("message", ""))
        requeue_at_once = reason in (k.EVICTED_BY_PREEMPTION, k.EVICTED_DUE_TO_NODE_FAILURES)
        pending = self.config.reason(k.REASON_PENDING_EVALUATION, k.REASON_PENDING)

        def release(fresh: Obj) -> bool:
            if not ws.has_quota_reservation(fresh):
                return False
            now = self.now()
            changed = ws.set_requeued(fresh, reason, message, requeue_at_once, now)
            return ws.unset_quota_reservation(fresh, pending, message, now, self.config) or changed

        await self._update_status(wl, release)

    async def _sync_pods_ready(self, trainjob: Obj, wl: Obj) -> bool:
        """Step 5: write the `PodsReady` condition if its type, status or reason must change; whether it did."""
        meta = trainjob["metadata"]
        ready = job.pods_ready(trainjob, self.jobsets.get(meta["namespace"], meta["name"]))
        status, reason, message = ws.pods_ready_condition(wl, ready)
        if ws.has_condition_with_reason(wl, k.PODS_READY, status, reason):
            return False

        def still_wanted(fresh: Obj) -> bool:
            now = ws.pods_ready_condition(fresh, ready)
            return now == (status, reason, message) and not ws.has_condition_with_reason(
                fresh, k.PODS_READY, status, reason
            )

        condition = {
            "type": k.PODS_READY,
            "status": "True" if status else "False",
            "lastTransitionTime": self.now(),
            "reason": reason,
            "message": message,
        }
        wl_meta = wl["metadata"]
        await writer.set_condition_and_update(
            self.client, wl_meta["namespace"], wl_meta["name"], condition, k.PODS_READY_MANAGER, still_wanted
        )
        return True

    async def _start(self, trainjob: Obj, runtime: Obj, wl: Obj) -> None:
        try:
            infos = podset_infos(wl)
        except PodSetMergeError as error:
            reason = str(error)
            await self._update_status(wl, lambda w: ws.set_finished(w, "FailedToStart", reason, self.now()))
            return
        await job.run_with_podsets_info(self.client, trainjob, runtime, infos)

    async def _update_status(self, wl: Obj, mutate: writer.Mutation) -> None:
        meta = wl["metadata"]
        await writer.update_admission_status(self.client, meta["namespace"], meta["name"], mutate)

    async def _remove_finalizer(self, wl: Obj) -> None:
        finalizers = list(wl["metadata"].get("finalizers") or [])
        if k.RESOURCE_IN_USE_FINALIZER not in finalizers:
            return
        wl = copy.deepcopy(wl)
        wl["metadata"]["finalizers"] = [f for f in finalizers if f != k.RESOURCE_IN_USE_FINALIZER]
        try:
            await writer.replace(self.client, wl)
        except Exception as error:
            if not is_not_found(error):
                raise

    async def _drop_finalizers(self, namespace: str, name: str, trainjob: Obj | None) -> None:
        for wl in self.workloads.items():
            owner = _owner_trainjob(wl)
            uid_matches = trainjob is None or is_controlled_by(wl, trainjob["metadata"].get("uid", ""))
            if owner == (namespace, name) and uid_matches:
                await self._remove_finalizer(copy.deepcopy(wl))

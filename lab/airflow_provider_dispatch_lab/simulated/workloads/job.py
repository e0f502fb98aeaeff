"""The batch/v1 Job controller (research k8s-apis.md §3, §6 rule 6).

`kubernetes/kubernetes:pkg/controller/job/job_controller.go` `syncJob` and `manageJob`, as far as dispatch
and the workload controllers above it depend on them:

- Counting: `active` = pods neither terminal nor being deleted, `terminating` = pods being deleted and not
  terminal, `ready` = active pods with Ready=True (`job_pods.py`). `startTime` is set on the first sync of
  an unsuspended Job, and reset when the Job is resumed (the `Suspended=False` / `JobResumed` transition).
- Suspended (`manageJob`, suspend branch): every active pod loses its tracking finalizer and is deleted
  gracefully (`deleteJobPods`, no grace override, so the pod's own `terminationGracePeriodSeconds`); in the
  same sync `active` drops by the number deleted and `terminating` grows by it. This is the upstream flaw
  that lets JobSet and Trainer report `active: 0` while the pods still run. `Suspended=True`
  (`JobSuspended`, `Job suspended`).
- Running: `wantActive` = parallelism, bounded by the completions still missing; extra pods are deleted, and
  `wantActive - active` pods are created, minus `terminating` only when `onlyReplaceFailedPods` (policy
  `Failed` or a pod failure policy). So with the default `TerminatingOrFailed` the replacements start beside
  the terminating pods. After a pod failure, creation waits for the backoff (10 s doubling up to 10 min,
  `job_pods.py`); that sync reports the current `active`, as Kubernetes v1.36.3 does (`return active, ...`
  in `manageJob`; v1.36.0 and earlier reported `active: 0` there, which the apiserver then refused whenever
  `ready` exceeded it).
- Finishing: failures above `backoffLimit` (or, for restartPolicy OnFailure, container restarts reaching it)
  or a passed `activeDeadlineSeconds` fail the Job; its active pods are deleted (finalizers kept) and the
  terminal condition waits for them (`job_tracking.py`).
- Pods are created with the tracking finalizer and a controller reference, in slow-start batches
  (1, 2, 4, ...); creations and deletions are "expected" until the informer shows them
  (`ControllerExpectations`, 5-minute TTL), and the Job is not managed again before that.
- Pod events resync the Job after `syncJobBatchPeriod` (1 s); Job creation and spec changes at once.
  Pods whose Job is gone or finished, or that have no controller, lose the finalizer through the orphan
  queue (`handleOrphanPod`, `cleanupPodFinalizers`).
- Release of pods whose labels no longer match the Job's selector (`getPodsForJob` lists every pod of the
  namespace and `ClaimPods`, `pkg/controller/controller_ref_manager.go` `ClaimObject` / `ReleasePod`,
  kubernetes/kubernetes v1.34): a pod the Job controls whose labels someone edited so that `spec.selector`
  (by default `batch.kubernetes.io/controller-uid=<job uid>`) no longer matches is released, unless the Job is
  being deleted, by one strategic merge patch that deletes the owner reference and the tracking finalizer
  (`GenerateDeleteOwnerRefStrategicMergeBytes`, with the pod's uid as precondition; 404 and 422 ignored). The
  pod is then no longer the Job's: the Job counts it nowhere, replaces it if its index is missing, and nothing
  deletes it any more (no owner for the garbage collector). A release that fails otherwise fails the sync,
  which is retried.

Not reproduced: adoption of orphan pods by selector, `backoffLimitPerIndex`, `maxFailedIndexes`,
`successPolicy`, pod failure policy rules, duplicate-index cleanup, `managedBy` beyond skipping, elastic
Indexed Jobs, TTL after finished, events and metrics.
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from airflow_provider_dispatch_lab.apiserver.validation.schema_builtin import selector_matches
from airflow_provider_dispatch_lab.client import ApiStatusError, is_not_found
from airflow_provider_dispatch_lab.kinds import JOB, POD
from airflow_provider_dispatch_lab.simulated.cluster import ClusterContext
from airflow_provider_dispatch_lab.simulated.objects import (
    Key,
    controller_of,
    controller_reference,
    key_of,
    meta,
    uid_of,
)
from airflow_provider_dispatch_lab.simulated.queue_controller import QueueController, work
from airflow_provider_dispatch_lab.simulated.work_queue import KeyedQueue
from airflow_provider_dispatch_lab.simulated.workloads import job_pods as jp
from airflow_provider_dispatch_lab.simulated.workloads.job_tracking import (
    COMPLETIONS_REACHED,
    JobTracking,
    SyncContext,
    ensure_condition,
    is_finished,
    new_condition,
)

Obj = dict[str, Any]
BATCH_PERIOD = 1.0
EXPECTATIONS_TTL = 300.0
MAX_CREATE_DELETE_PER_SYNC = 500
JOB_CONTROLLER_NAME = "kubernetes.io/job-controller"


class Expectations:
    """`controller.ControllerExpectations`: pod creations and deletions not yet seen in the cache."""

    def __init__(self, now: Any) -> None:
        self._now = now
        self._records: dict[Key, list[float]] = {}

    def expect(self, key: Key, adds: int, deletes: int) -> None:
        self._records[key] = [adds, deletes, self._now()]

    def observe(self, key: Key, adds: int = 0, deletes: int = 0) -> None:
        record = self._records.get(key)
        if record is not None:
            record[0] -= adds
            record[1] -= deletes

    def satisfied(self, key: Key) -> bool:
        record = self._records.get(key)
        if record is None:
            return True
        return (record[0] <= 0 and record[1] <= 0) or self._now() - record[2] > EXPECTATIONS_TTL

    def forget(self, key: Key) -> None:
        self._records.pop(key, None)


class JobController(JobTracking, QueueController[Key]):
    name = "job-controller"
    workers = 4

    def __init__(self, ctx: ClusterContext) -> None:
        super().__init__(ctx)
        self.jobs = self.informer(JOB)
        self.pods = self.informer(POD)
        self.orphans: KeyedQueue[Key] = KeyedQueue(ctx.clock)
        self.expectations = Expectations(ctx.clock.now)
        self.finalizer_expectations: dict[Key, set[str]] = {}
        self.backoff: dict[Key, jp.BackoffRecord] = {}
        self.jobs.on_change(self._job_changed)
        self.pods.on_change(self._pod_changed)

    def extra_workers(self, group: asyncio.TaskGroup) -> None:
        group.create_task(work(f"{self.name}-orphans", self.orphans, self.sync_orphan), name=f"{self.name}-orphans")

    # ------------------------------------------------------------------------------------------ events

    def _resolve(self, namespace: str, ref: Obj | None) -> Obj | None:
        """`resolveControllerRef`: the cached Job a controller reference names, if the uid matches."""
        if not ref or ref.get("kind") != JOB.kind:
            return None
        job = self.jobs.get(namespace, str(ref.get("name")))
        return job if job is not None and uid_of(job) == ref.get("uid") else None

    def _job_changed(self, kind: str, job: Obj, old: Obj | None) -> None:
        if kind == "MODIFIED" and old is not None and meta(old).get("generation") == meta(job).get("generation"):
            self.queue.add_after(key_of(job), BATCH_PERIOD)
        else:
            self.queue.add(key_of(job))
        if kind == "DELETED" or is_finished(job):
            for pod in self._pods_of(job):
                if jp.has_finalizer(pod):
                    self.orphans.add(key_of(pod))

    def _pod_changed(self, kind: str, pod: Obj, old: Obj | None) -> None:
        if (
            kind == "MODIFIED"
            and old is not None
            and meta(old).get("resourceVersion") == meta(pod).get("resourceVersion")
        ):
            return
        if kind == "DELETED" or jp.deleting(pod):
            self._pod_deleted(pod, final=kind == "DELETED")
            return
        namespace = key_of(pod)[0]
        job = self._resolve(namespace, controller_of(pod))
        if controller_of(pod) is None:
            if jp.has_finalizer(pod):
                self.orphans.add(key_of(pod))
            return
        if job is None:
            return
        if kind == "ADDED":
            self.expectations.observe(key_of(job), adds=1)
        elif not jp.has_finalizer(pod):
            self.finalizer_expectations.get(key_of(job), set()).discard(uid_of(pod))
        self.queue.add_after(key_of(job), BATCH_PERIOD)

    def _pod_deleted(self, pod: Obj, final: bool) -> None:
        job = self._resolve(key_of(pod)[0], controller_of(pod))
        if job is None or is_finished(job):
            if jp.has_finalizer(pod):
                self.orphans.add(key_of(pod))
            return
        self.expectations.observe(key_of(job), deletes=1)
        if final or not jp.has_finalizer(pod):
            self.finalizer_expectations.get(key_of(job), set()).discard(uid_of(pod))
        self.queue.add_after(key_of(job), BATCH_PERIOD)

    def _pods_of(self, job: Obj) -> list[Obj]:
        namespace, uid = key_of(job)[0], uid_of(job)
        return [
            pod
            for pod in self.pods.items()
            if key_of(pod)[0] == namespace and (controller_of(pod) or {}).get("uid") == uid
        ]

    async def _claim(self, job: Obj, pods: list[Obj]) -> list[Obj]:
        """`ClaimPods` for the pods the Job controls: those its selector still matches; the others are released
        (module docstring). Orphans are not adopted (not reproduced)."""
        selector = (job.get("spec") or {}).get("selector")
        if not isinstance(selector, dict):
            return pods
        claimed: list[Obj] = []
        first_error: ApiStatusError | None = None
        for pod in pods:
            if selector_matches(selector, meta(pod).get("labels") or {}):
                claimed.append(pod)
            elif not jp.deleting(job):
                try:
                    await self.client.patch(POD, *key_of(pod), jp.release_patch(pod, job), patch_type="strategic")
                except ApiStatusError as error:
                    if not is_not_found(error) and error.code != 422:
                        first_error = first_error or error
        if first_error is not None:
            raise first_error
        return claimed

    async def sync_orphan(self, key: Key) -> None:
        """`handleOrphanPod`: drop the finalizer of a pod no unfinished Job controls."""
        pod = self.pods.get(*key)
        if pod is None or not jp.has_finalizer(pod):
            return
        job = self._resolve(key[0], controller_of(pod))
        if job is not None and not is_finished(job):
            return
        await self.remove_finalizer(pod)

    # -------------------------------------------------------------------------------------------- sync

    async def sync(self, key: Key) -> None:
        cached = self.jobs.get(*key)
        if cached is None:
            self.expectations.forget(key)
            self.finalizer_expectations.pop(key, None)
            self.backoff.pop(key, None)
            return
        if (cached.get("spec") or {}).get("managedBy", JOB_CONTROLLER_NAME) != JOB_CONTROLLER_NAME:
            return
        if is_finished(cached):
            self.backoff.pop(key, None)
            return
        job = copy.deepcopy(cached)
        status: Obj = job.setdefault("status", {})
        status.setdefault("uncountedTerminatedPods", {})
        satisfied = self.expectations.satisfied(key)
        pods = await self._claim(job, self._pods_of(job))
        ctx = SyncContext(
            key, job, pods, [p for p in pods if jp.is_active(p)], set(self.finalizer_expectations.get(key, ()))
        )
        ctx.ready = sum(1 for p in ctx.active_pods if jp.is_ready(p))
        ctx.terminating = sum(1 for p in pods if jp.is_terminating(p))
        active = len(ctx.active_pods)
        new_succeeded, new_failed = self._new_finished(ctx)
        uncounted = ctx.uncounted
        ctx.succeeded = int(status.get("succeeded") or 0) + len(new_succeeded) + len(uncounted.get("succeeded") or ())
        ctx.failed = int(status.get("failed") or 0) + len(new_failed) + len(uncounted.get("failed") or ())
        suspended = (job.get("spec") or {}).get("suspend") is True
        if not status.get("startTime") and not suspended:
            status["startTime"] = self.clock.timestamp()
        now = self.clock.now()
        ctx.backoff = self.backoff.get(key, jp.BackoffRecord()).updated(new_succeeded, new_failed, now)
        ctx.finished = self.finished_condition(ctx)
        if jp.is_indexed(job):
            completions = int(job["spec"].get("completions") or 0)
            ctx.previous_indexes = jp.parse_indexes(status.get("completedIndexes"), completions)
            ctx.succeeded_indexes = ctx.previous_indexes | {
                i
                for p in pods
                if jp.phase(p) == "Succeeded" and jp.has_finalizer(p) and (i := jp.valid_index(p, job)) is not None
            }
            ctx.succeeded = len(ctx.succeeded_indexes)
        suspend_changed, error = False, None
        if ctx.finished is not None:
            deleted, deleted_ready, error = await self._delete_pods(ctx.active_pods, drop_finalizer=False)
            if deleted != active or not satisfied:
                ctx.finished = None
            active -= deleted
            ctx.terminating += deleted
            ctx.ready -= deleted_ready
        else:
            managed = satisfied and not jp.deleting(job)
            if managed:
                active, error = await self._manage(ctx)
            wanted = (job.get("spec") or {}).get("completions")
            if wanted is None:
                complete = ctx.succeeded > 0 and active == 0
            else:
                complete = ctx.succeeded >= int(wanted) and active == 0
            if complete:
                ctx.finished = new_condition("SuccessCriteriaMet", "True", *COMPLETIONS_REACHED, self.clock.timestamp())
            elif managed:
                suspend_changed = self._suspended_condition(ctx, suspended)
        needs_update = suspend_changed or active != int(status.get("active") or 0)
        needs_update = needs_update or ctx.ready != status.get("ready") or ctx.terminating != status.get("terminating")
        status["active"], status["ready"], status["terminating"] = active, ctx.ready, ctx.terminating
        await self.track_status(ctx, needs_update)
        if error is not None:
            raise error

    def _new_finished(self, ctx: SyncContext) -> tuple[list[Obj], list[Obj]]:
        """`getNewFinishedPods`: terminal (or failed-by-deletion) pods still carrying the finalizer."""
        uncounted = ctx.uncounted
        skip = set(uncounted.get("succeeded") or ()) | set(uncounted.get("failed") or ()) | ctx.expected_removals
        candidates = [
            p
            for p in ctx.pods
            if jp.has_finalizer(p)
            and uid_of(p) not in skip
            and (not jp.is_indexed(ctx.job) or jp.valid_index(p, ctx.job) is not None)
        ]
        succeeded = [p for p in candidates if jp.phase(p) == "Succeeded"]
        failed = [p for p in candidates if jp.is_pod_failed(p, ctx.job)]
        return succeeded, failed

    def _suspended_condition(self, ctx: SyncContext, suspended: bool) -> bool:
        status: Obj = ctx.job["status"]
        conditions: list[Obj] = status.setdefault("conditions", [])
        now = self.clock.timestamp()
        if suspended:
            return ensure_condition(conditions, "Suspended", "True", "JobSuspended", "Job suspended", now)
        changed = ensure_condition(conditions, "Suspended", "False", "JobResumed", "Job resumed", now)
        if changed:
            status["startTime"] = now
        return changed

    # ---------------------------------------------------------------------------------------- manageJob

    async def _manage(self, ctx: SyncContext) -> tuple[int, BaseException | None]:
        job, active = ctx.job, len(ctx.active_pods)
        spec = job.get("spec") or {}
        if spec.get("suspend") is True:
            return await self._remove(ctx, ctx.active_pods, active)
        parallelism = int(spec.get("parallelism") or 0)
        completions = spec.get("completions")
        if completions is None:
            want = active if ctx.succeeded > 0 else parallelism
        else:
            want = max(min(int(completions) - ctx.succeeded, parallelism), 0)
        excess = max(active - want, 0)
        if excess:
            to_delete = jp.removal_order(ctx.active_pods)[:excess][:MAX_CREATE_DELETE_PER_SYNC]
            return await self._remove(ctx, to_delete, active)
        terminating = ctx.terminating if jp.only_replace_failed(job) else 0
        missing = want - terminating - active
        if missing <= 0:
            return active, None
        wait = ctx.backoff.remaining(self.clock.now())
        if wait > 0:
            self.queue.add_after(ctx.key, max(wait, BATCH_PERIOD))
            return active, None
        missing = min(missing, MAX_CREATE_DELETE_PER_SYNC)
        indexes: list[int | None] = [None] * missing
        if jp.is_indexed(job):
            indexes = list(jp.first_pending_indexes(job, ctx.pods, ctx.succeeded_indexes, missing))
        return await self._create(ctx, indexes, active)

    async def _remove(self, ctx: SyncContext, pods: list[Obj], active: int) -> tuple[int, BaseException | None]:
        self.expectations.expect(ctx.key, 0, len(pods))
        removed, removed_ready, error = await self._delete_pods(pods, drop_finalizer=True)
        ctx.terminating += removed
        ctx.ready -= removed_ready
        return active - removed, error

    async def _delete_pods(self, pods: list[Obj], *, drop_finalizer: bool) -> tuple[int, int, BaseException | None]:
        """`deleteJobPods` (finalizer removed first) or `deleteActivePods` (kept); counts and first error."""

        async def delete(pod: Obj) -> None:
            try:
                if drop_finalizer and jp.has_finalizer(pod):
                    await self.remove_finalizer(pod)
                await self.client.delete(POD, *key_of(pod))
            except ApiStatusError as error:
                if not is_not_found(error):
                    self.expectations.observe(self._owner_key(pod), deletes=1)
                    raise

        results = await asyncio.gather(*(delete(p) for p in pods), return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        removed = len(pods) - len(errors)
        ready = sum(
            1 for p, r in zip(pods, results, strict=True) if not isinstance(r, BaseException) and jp.is_ready(p)
        )
        return removed, ready, errors[0] if errors else None

    @staticmethod
    def _owner_key(pod: Obj) -> Key:
        return (key_of(pod)[0], str((controller_of(pod) or {}).get("name") or ""))

    async def _create(
        self, ctx: SyncContext, indexes: list[int | None], active: int
    ) -> tuple[int, BaseException | None]:
        """Slow-start creation: batches of 1, 2, 4, ...; a failing batch skips the rest."""
        self.expectations.expect(ctx.key, len(indexes), 0)
        owner = controller_reference(ctx.job, JOB)
        namespace = ctx.key[0]
        active += len(indexes)
        first_error: BaseException | None = None
        batch, position = min(len(indexes), 1), 0
        while position < len(indexes):
            chunk = indexes[position : position + batch]
            results = await asyncio.gather(
                *(self.client.create(POD, namespace, jp.pod_from_template(ctx.job, owner, i)) for i in chunk),
                return_exceptions=True,
            )
            failures = [r for r in results if isinstance(r, BaseException)]
            for _ in failures:
                self.expectations.observe(ctx.key, adds=1)
            active -= len(failures)
            position += len(chunk)
            if failures:
                first_error = first_error or failures[0]
                skipped = len(indexes) - position
                self.expectations.observe(ctx.key, adds=skipped)
                active -= skipped
                break
            batch = min(2 * batch, len(indexes) - position)
        return active, first_error

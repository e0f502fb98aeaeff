"""How the Job controller counts finished pods and finishes a Job, with finalizers (research k8s-apis.md §3).

`kubernetes/kubernetes:pkg/controller/job/job_controller.go`:

- `trackJobStatusAndRemoveFinalizers`: a pod still carrying `batch.kubernetes.io/job-tracking` whose
  finalizer may go (`canRemoveFinalizer`: the Job is finishing or deleted, the pod Succeeded, or it counts
  as failed) is first recorded in `status.uncountedTerminatedPods` (Indexed Jobs record succeeded pods by
  index in `completedIndexes`), the status is written, then the finalizers are removed
  (`flushUncountedAndRemoveFinalizers`), and only then the uids move into `succeeded` / `failed`
  (`cleanUncountedPodsWithoutFinalizers`). A uid whose finalizer removal is in flight is ignored until the
  informer shows it (`finalizerExpectations`), so a stale cache never counts a pod twice.
- A finish is first recorded as the interim `SuccessCriteriaMet` or `FailureTarget` condition; `Complete`
  or `Failed` (same reason and message) is added by `enactJobFinished` only once no pod is uncounted and,
  since 1.31 (`delayTerminalCondition`, on with `JobPodReplacementPolicy` / `JobManagedBy`), no pod is
  terminating. Success is `CompletionsReached` / `Reached expected number of succeeded pods` (the
  `JobSuccessPolicy` reason, GA in 1.33, as clusters show it); the backoff failure is
  `BackoffLimitExceeded` / `Job has reached the specified backoff limit`.
- `ensureJobConditionStatus`: a condition is replaced when its status, reason or message changes, and a
  False one is never added.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_dispatch_lab.client import ApiStatusError, LabClient, is_not_found
from airflow_provider_dispatch_lab.clock import LabClock, parse_timestamp
from airflow_provider_dispatch_lab.kinds import JOB, POD
from airflow_provider_dispatch_lab.simulated.objects import Key, find_condition, key_of, uid_of
from airflow_provider_dispatch_lab.simulated.work_queue import KeyedQueue
from airflow_provider_dispatch_lab.simulated.workloads import job_pods as jp

Obj = dict[str, Any]

COMPLETIONS_REACHED = ("CompletionsReached", "Reached expected number of succeeded pods")
BACKOFF_LIMIT_EXCEEDED = ("BackoffLimitExceeded", "Job has reached the specified backoff limit")
DEADLINE_EXCEEDED = ("DeadlineExceeded", "Job was active longer than specified deadline")
REMOVE_FINALIZER_PATCH = {"metadata": {"$deleteFromPrimitiveList/finalizers": [jp.TRACKING_FINALIZER]}}


def new_condition(kind: str, status: str, reason: str, message: str, now: str) -> Obj:
    return {
        "type": kind,
        "status": status,
        "lastProbeTime": now,
        "lastTransitionTime": now,
        "reason": reason,
        "message": message,
    }


def ensure_condition(conditions: list[Obj], kind: str, status: str, reason: str, message: str, now: str) -> bool:
    existing = find_condition(conditions, kind)
    if existing is not None:
        if (existing.get("status"), existing.get("reason"), existing.get("message")) != (status, reason, message):
            conditions[conditions.index(existing)] = new_condition(kind, status, reason, message, now)
            return True
        return False
    if status != "False":
        conditions.append(new_condition(kind, status, reason, message, now))
        return True
    return False


def is_finished(job: Mapping[str, Any]) -> bool:
    """`util.IsJobFinished`: Complete or Failed is True."""
    for condition in (job.get("status") or {}).get("conditions") or ():
        if condition.get("type") in ("Complete", "Failed") and condition.get("status") == "True":
            return True
    return False


@dataclass
class SyncContext:
    """`syncJobCtx`: what one sync learned about a Job."""

    key: Key
    job: Obj
    pods: list[Obj]
    active_pods: list[Obj]
    expected_removals: set[str]
    ready: int = 0
    terminating: int = 0
    succeeded: int = 0
    failed: int = 0
    finished: Obj | None = None
    previous_indexes: set[int] = field(default_factory=set)
    succeeded_indexes: set[int] = field(default_factory=set)
    backoff: jp.BackoffRecord = field(default_factory=jp.BackoffRecord)

    @property
    def uncounted(self) -> Obj:
        status: Obj = self.job.setdefault("status", {})
        uncounted: Obj = status.setdefault("uncountedTerminatedPods", {})
        return uncounted


class JobTracking:
    """The status-tracking half of the Job controller; `job.py` holds the other half."""

    client: LabClient
    clock: LabClock
    finalizer_expectations: dict[Key, set[str]]
    backoff: dict[Key, jp.BackoffRecord]
    queue: KeyedQueue[Key]

    def finished_condition(self, ctx: SyncContext) -> Obj | None:
        """The finish this sync works towards: a recorded interim condition, or a new `FailureTarget` for
        too many failures (`backoffLimit`, or restarts for restartPolicy OnFailure) or a passed deadline."""
        job, now = ctx.job, self.clock.timestamp()
        conditions = (job.get("status") or {}).get("conditions")
        met = find_condition(conditions, "SuccessCriteriaMet")
        if met is not None and met.get("status") == "True":
            return met
        target = find_condition(conditions, "FailureTarget")
        if target is not None and target.get("status") == "True":
            return new_condition("Failed", "True", str(target.get("reason")), str(target.get("message")), now)
        spec = job.get("spec") or {}
        if ctx.failed > int(spec.get("backoffLimit", 6)) or self._past_backoff_limit_on_failure(ctx):
            return new_condition("FailureTarget", "True", *BACKOFF_LIMIT_EXCEEDED, now)
        deadline = spec.get("activeDeadlineSeconds")
        started = (job.get("status") or {}).get("startTime")
        if deadline is not None and started and spec.get("suspend") is not True:
            remaining = parse_timestamp(started) + int(deadline) - self.clock.now()
            if remaining <= 0:
                return new_condition("FailureTarget", "True", *DEADLINE_EXCEEDED, now)
            self.queue.add_after(ctx.key, remaining)
        return None

    @staticmethod
    def _past_backoff_limit_on_failure(ctx: SyncContext) -> bool:
        """`pastBackoffLimitOnFailure`: container restarts of running pods, for restartPolicy OnFailure."""
        spec = ctx.job.get("spec") or {}
        if ((spec.get("template") or {}).get("spec") or {}).get("restartPolicy") != "OnFailure":
            return False
        restarts = sum(
            int(status.get("restartCount") or 0)
            for pod in ctx.pods
            if jp.phase(pod) in ("Running", "Pending")
            for group in ("initContainerStatuses", "containerStatuses")
            for status in (pod.get("status") or {}).get(group) or ()
        )
        limit = int(spec.get("backoffLimit", 6))
        return restarts > 0 if limit == 0 else restarts >= limit

    async def write_status(self, job: Obj) -> Obj:
        """`UpdateStatus`, conditional on the resourceVersion; empty fields are left out as Go omits them."""
        status: Obj = job.setdefault("status", {})
        for name in ("conditions", "completedIndexes"):
            if not status.get(name):
                status.pop(name, None)
        return await self.client.replace(JOB, *key_of(job), job, subresource="status")

    async def track_status(self, ctx: SyncContext, needs_flush: bool) -> None:
        """`trackJobStatusAndRemoveFinalizers`."""
        job, indexed = ctx.job, jp.is_indexed(ctx.job)
        completions = int((job.get("spec") or {}).get("completions") or 0)
        pods = sorted(ctx.pods, key=lambda p: jp.completion_index(p) or 0) if indexed else ctx.pods
        with_finalizer = {uid_of(p) for p in pods if jp.has_finalizer(p) and uid_of(p) not in ctx.expected_removals}
        needs_flush = _clean_uncounted(job, with_finalizer) or needs_flush
        uncounted = ctx.uncounted
        already_succeeded, already_failed = set(uncounted.get("succeeded") or ()), set(uncounted.get("failed") or ())
        to_remove: list[Obj] = []
        new_indexes: list[int] = []
        for pod in pods:
            uid = uid_of(pod)
            if not jp.has_finalizer(pod) or uid in ctx.expected_removals:
                continue
            failed = jp.is_pod_failed(pod, job)
            if not self._can_remove_finalizer(ctx, pod, failed):
                continue
            to_remove.append(pod)
            index = jp.valid_index(pod, job)
            if jp.phase(pod) == "Succeeded" and uid not in already_failed:
                if indexed:
                    if index is not None and index not in ctx.previous_indexes:
                        new_indexes.append(index)
                        needs_flush = True
                elif uid not in already_succeeded:
                    uncounted.setdefault("succeeded", []).append(uid)
                    needs_flush = True
            elif (failed or (ctx.finished is not None and ctx.finished["type"] != "SuccessCriteriaMet")) and (
                uid not in already_failed and (not indexed or index is not None)
            ):
                uncounted.setdefault("failed", []).append(uid)
                needs_flush = True
        status: Obj = job.setdefault("status", {})
        if indexed:
            ctx.succeeded_indexes |= set(new_indexes)
            text = jp.format_indexes(i for i in ctx.succeeded_indexes if i < completions)
            if text != (status.get("completedIndexes") or ""):
                needs_flush = True
            status["succeeded"] = len(ctx.succeeded_indexes)
            status["completedIndexes"] = text
        needs_flush = self._record_interim_condition(ctx) or needs_flush
        needs_flush = await self._flush_and_remove_finalizers(ctx, to_remove, with_finalizer, needs_flush)
        if self._enact_finished(ctx):
            needs_flush = True
        if needs_flush:
            ctx.job = await self.write_status(ctx.job)

    @staticmethod
    def _can_remove_finalizer(ctx: SyncContext, pod: Obj, failed: bool) -> bool:
        """`canRemoveFinalizer` (`backoffLimitPerIndex` delays are not reproduced)."""
        if jp.deleting(ctx.job) or ctx.finished is not None or jp.phase(pod) == "Succeeded":
            return True
        return failed

    def _record_interim_condition(self, ctx: SyncContext) -> bool:
        """Write `FailureTarget` / `SuccessCriteriaMet` now; prepare `Failed` / `Complete` for later."""
        finished, now = ctx.finished, self.clock.timestamp()
        if finished is None:
            return False
        conditions: list[Obj] = ctx.job.setdefault("status", {}).setdefault("conditions", [])
        changed = False
        if finished["type"] == "FailureTarget":
            conditions.append(finished)
            changed = True
            ctx.finished = new_condition("Failed", "True", finished["reason"], finished["message"], now)
        elif finished["type"] == "SuccessCriteriaMet":
            if find_condition(conditions, "SuccessCriteriaMet") is None:
                conditions.append(finished)
                changed = True
            ctx.finished = new_condition("Complete", "True", finished["reason"], finished["message"], now)
        return changed

    async def _flush_and_remove_finalizers(
        self, ctx: SyncContext, to_remove: list[Obj], with_finalizer: set[str], needs_flush: bool
    ) -> bool:
        """`flushUncountedAndRemoveFinalizers`; returns whether the status still needs writing."""
        if needs_flush:
            ctx.job = await self.write_status(ctx.job)
            self.backoff[ctx.key] = ctx.backoff
            needs_flush = False
        error: BaseException | None = None
        if to_remove:
            expected = self.finalizer_expectations.setdefault(ctx.key, set())
            expected.update(uid_of(p) for p in to_remove)
            results = await asyncio.gather(*(self.remove_finalizer(p) for p in to_remove), return_exceptions=True)
            for pod, result in zip(to_remove, results, strict=True):
                if isinstance(result, BaseException):
                    expected.discard(uid_of(pod))
                    error = error or result
                else:
                    with_finalizer.discard(uid_of(pod))
        if _clean_uncounted(ctx.job, with_finalizer):
            needs_flush = True
        if error is not None:
            if needs_flush:
                ctx.job = await self.write_status(ctx.job)
            raise error
        return needs_flush

    async def remove_finalizer(self, pod: Obj) -> None:
        """`removeTrackingFinalizerPatch`, a strategic merge patch; a pod already gone counts as done."""
        try:
            await self.client.patch(POD, *key_of(pod), REMOVE_FINALIZER_PATCH, patch_type="strategic")
        except ApiStatusError as error:
            if not is_not_found(error):
                raise

    def _enact_finished(self, ctx: SyncContext) -> bool:
        """`enactJobFinished`: the terminal condition, once nothing is uncounted or terminating."""
        if ctx.finished is None:
            return False
        uncounted = ctx.uncounted
        if uncounted.get("succeeded") or uncounted.get("failed") or ctx.terminating > 0:
            return False
        status: Obj = ctx.job.setdefault("status", {})
        finished = ctx.finished
        ensure_condition(
            status.setdefault("conditions", []),
            finished["type"],
            finished["status"],
            finished["reason"],
            finished["message"],
            self.clock.timestamp(),
        )
        if finished["type"] == "Complete":
            status["completionTime"] = finished["lastTransitionTime"]
        return True


def _clean_uncounted(job: Obj, with_finalizer: set[str]) -> bool:
    """`cleanUncountedPodsWithoutFinalizers`: uids whose finalizer is gone move into the counters."""
    status: Obj = job.setdefault("status", {})
    uncounted: Obj = status.setdefault("uncountedTerminatedPods", {})
    changed = False
    for name, counter in (("succeeded", "succeeded"), ("failed", "failed")):
        listed = list(uncounted.get(name) or ())
        kept = [uid for uid in listed if uid in with_finalizer]
        if len(kept) != len(listed):
            changed = True
            status[counter] = int(status.get(counter) or 0) + len(listed) - len(kept)
        if kept:
            uncounted[name] = kept
        else:
            uncounted.pop(name, None)
    return changed

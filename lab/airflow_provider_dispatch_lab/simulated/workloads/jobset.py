"""The JobSet controller (research k8s-apis.md §2.1, §2.2, §6 rule 5), with its two webhooks.

`kubernetes-sigs/jobset:pkg/controllers/jobset_controller.go` `Reconcile` / `reconcile`, in order:

1. Skip a JobSet being deleted or managed by another controller (`spec.managedBy`).
2. Sort its Jobs and compute `replicatedJobsStatus` (`jobset_jobs.py`). The Jobs are found as `getChildJobs`
   lists them, through the `JobsIndexByJobSetKey` index of `SetupJobSetIndexes`: the controller owner must be a
   JobSet and its UID the JobSet's, so the Jobs of a deleted JobSet whose name was reused (still there while
   the garbage collector deletes them) are not counted. Events still reach the JobSet by the owner's name
   (`Owns(&batchv1.Job{})`).
3. A finished JobSet deletes its remaining active Jobs (Foreground) and stops there. Jobs of a previous
   restart are deleted (Foreground). A failed Job runs the failure policy; enough successful Jobs complete
   the JobSet (`Completed`, `AllJobsCompleted`, `jobset completed successfully`).
4. Missing Jobs are created (`createJobs`; an AlreadyExists from a lagging cache is retried).
5. Suspended: every active Job not yet suspended gets `spec.suspend=true` (an Update; Jobs are kept) and the
   JobSet `Suspended=True` (`SuspendedJobs`, `jobset is suspended`). Not suspended: `resumeJob` for each
   suspended active Job (clear `status.startTime` through `/status`, merge the template's pod labels,
   annotations and nodeSelector with `MergeMaps`, union its tolerations and scheduling gates, set
   `suspend=false`, one Update), then `Suspended=False` (`ResumeJobs`, `jobset is resumed`) if it was True.
6. One status Update at the end if anything changed; a conflict requeues.

Conditions follow `updateCondition`: a condition of a known type is replaced when its status changes (new
transition time), a False one is never added. Not reproduced: the headless Service (the lab serves no
Services), startup policy `InOrder`, `dependsOn`, TTL after finished, in-place and per-Job restarts,
exclusive placement, volume claim policies, events.
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from airflow_provider_dispatch_lab.client import ApiStatusError, is_not_found
from airflow_provider_dispatch_lab.kinds import JOB, JOBSET
from airflow_provider_dispatch_lab.simulated.cluster import ClusterContext
from airflow_provider_dispatch_lab.simulated.objects import (
    Key,
    controller_of,
    find_condition,
    is_deleting,
    key_of,
    merge_maps,
    merge_slices,
    meta,
)
from airflow_provider_dispatch_lab.simulated.queue_controller import QueueController, RetryLater
from airflow_provider_dispatch_lab.simulated.workloads import jobset_jobs as jj
from airflow_provider_dispatch_lab.simulated.workloads.jobset_webhooks import JobSetDefaulter, JobSetValidator

Obj = dict[str, Any]


def update_condition(status: Obj, condition: Obj, now: str) -> bool:
    """`updateCondition`: replace on a status change, add only a True one; whether anything changed."""
    conditions: list[Obj] = status.setdefault("conditions", [])
    new = {**condition, "lastTransitionTime": now}
    existing = find_condition(conditions, str(condition["type"]))
    if existing is not None:
        if existing.get("status") == condition["status"]:
            return False
        conditions[conditions.index(existing)] = new
        return True
    if condition["status"] != "True":
        return False
    conditions.append(new)
    return True


def _condition(kind: str, status: str, reason_message: tuple[str, str]) -> Obj:
    return {"type": kind, "status": status, "reason": reason_message[0], "message": reason_message[1]}


class JobSetController(QueueController[Key]):
    name = "jobset-controller"

    def __init__(self, ctx: ClusterContext) -> None:
        super().__init__(ctx)
        self.jobsets = self.informer(JOBSET)
        self.jobs = self.informer(JOB)
        self.jobsets.on_change(lambda _kind, obj, _old: self.queue.add(key_of(obj)))
        self.jobs.on_change(self._job_changed)
        self.defaulter = JobSetDefaulter()
        self.validator = JobSetValidator()
        self.serve_webhooks(self.defaulter, self.validator)

    def _job_changed(self, _kind: str, obj: Obj, _old: Obj | None) -> None:
        owner = self._owner_name(obj)
        if owner is not None:
            self.queue.add((key_of(obj)[0], owner))

    @staticmethod
    def _jobset_owner(job: Obj) -> Obj | None:
        """The controller owner reference, when it is a JobSet."""
        owner = controller_of(job)
        if owner and owner.get("apiVersion") == JOBSET.api_version and owner.get("kind") == JOBSET.kind:
            return owner
        return None

    @classmethod
    def _owner_name(cls, job: Obj) -> str | None:
        """Where an event of the Job is queued: `handler.EnqueueRequestForOwner` maps it by the owner's name."""
        owner = cls._jobset_owner(job)
        return None if owner is None else str(owner.get("name"))

    def _child_jobs(self, jobset: Obj) -> list[Obj]:
        """`getChildJobs`: the Jobs in the namespace whose `JobsIndexByJobSetKey` (the controller owner's UID, for
        a JobSet owner; `SetupJobSetIndexes`) is this JobSet's UID."""
        namespace, uid = key_of(jobset)[0], meta(jobset).get("uid")
        return [
            job
            for job in self.jobs.items()
            if key_of(job)[0] == namespace and (self._jobset_owner(job) or {}).get("uid") == uid
        ]

    async def sync(self, key: Key) -> None:
        cached = self.jobsets.get(*key)
        if cached is None or is_deleting(cached):
            return
        manager = (cached.get("spec") or {}).get("managedBy")
        if manager and manager != jj.CONTROLLER_NAME:
            return
        jobset = copy.deepcopy(cached)
        status: Obj = jobset.setdefault("status", {})
        before = copy.deepcopy(status)
        now = self.clock.timestamp()
        owned = jj.classify(self._child_jobs(jobset), int(status.get("restarts") or 0))
        statuses = jj.replicated_job_statuses(jobset, owned)
        if not jj.statuses_equal(status.get("replicatedJobsStatus"), statuses):
            status["replicatedJobsStatus"] = statuses
        await self._reconcile(jobset, status, owned, now)
        if not status.get("conditions"):
            status.pop("conditions", None)
        if status != before:
            await self.client.replace(JOBSET, key[0], key[1], jobset, subresource="status")

    async def _reconcile(self, jobset: Obj, status: Obj, owned: jj.ChildJobs, now: str) -> None:
        if jj.finished(jobset):
            await self._delete_jobs(owned.active)
            return
        await self._delete_jobs(owned.previous)
        if owned.failed:
            self._execute_failure_policy(jobset, status, owned, now)
            return
        if owned.successful and jj.success_policy_met(jobset, owned.successful):
            update_condition(status, _condition("Completed", "True", jj.COMPLETED), now)
            status["terminalState"] = "Completed"
            return
        await self._create_jobs(jobset, owned)
        if (jobset.get("spec") or {}).get("suspend"):
            await self._suspend_jobs(owned.active)
            update_condition(status, _condition("Suspended", "True", jj.SUSPENDED), now)
        else:
            await self._resume_jobs(jobset, owned.active)
            update_condition(status, _condition("Suspended", "False", jj.RESUMED), now)

    def _execute_failure_policy(self, jobset: Obj, status: Obj, owned: jj.ChildJobs, now: str) -> None:
        outcome = jj.failure_outcome(jobset, owned.failed)
        if outcome.failed is not None:
            update_condition(status, _condition("Failed", "True", outcome.failed), now)
            status["terminalState"] = "Failed"
        elif outcome.restart_counts is not None:
            status["restarts"] = int(status.get("restarts") or 0) + 1
            if outcome.restart_counts:
                status["restartsCountTowardsMax"] = int(status.get("restartsCountTowardsMax") or 0) + 1
        else:
            raise RetryLater("a failure policy action the lab does not reproduce")

    async def _delete_jobs(self, jobs: list[Obj]) -> None:
        async def delete(job: Obj) -> None:
            try:
                await self.client.delete(JOB, *key_of(job), propagation_policy="Foreground")
            except ApiStatusError as error:
                if not is_not_found(error):
                    raise

        await asyncio.gather(*(delete(job) for job in jobs if not is_deleting(job)))

    async def _create_jobs(self, jobset: Obj, owned: jj.ChildJobs) -> None:
        namespace = key_of(jobset)[0]
        results = await asyncio.gather(
            *(self.client.create(JOB, namespace, job) for job in jj.jobs_to_create(jobset, owned)),
            return_exceptions=True,
        )
        for result in results:
            if isinstance(result, BaseException):
                raise result

    async def _suspend_jobs(self, active: list[Obj]) -> None:
        for job in active:
            if (job.get("spec") or {}).get("suspend") is not True:
                suspended = copy.deepcopy(job)
                suspended["spec"]["suspend"] = True
                await self.client.replace(JOB, *key_of(job), suspended)

    async def _resume_jobs(self, jobset: Obj, active: list[Obj]) -> None:
        templates = {
            rjob["name"]: ((rjob.get("template") or {}).get("spec") or {}).get("template") or {}
            for rjob in jj.replicated_jobs(jobset)
        }
        for job in active:
            if (job.get("spec") or {}).get("suspend") is True:
                await self._resume_job(job, templates)

    async def _resume_job(self, cached: Obj, templates: dict[str, Obj]) -> None:
        """`resumeJob`: the pod template may only change on a suspended Job that has not started."""
        job = copy.deepcopy(cached)
        if (job.get("status") or {}).get("startTime"):
            del job["status"]["startTime"]
            job = await self.client.replace(JOB, *key_of(job), job, subresource="status")
        rjob = (meta(job).get("labels") or {}).get(jj.REPLICATED_JOB_NAME)
        if rjob:
            template = templates.get(rjob) or {}
            template_meta, template_spec = template.get("metadata") or {}, template.get("spec") or {}
            pod_template = job["spec"].setdefault("template", {})
            pod_meta = pod_template.setdefault("metadata", {})
            pod_spec = pod_template.setdefault("spec", {})
            for name in ("labels", "annotations"):
                merged = merge_maps(pod_meta.get(name), template_meta.get(name))
                if merged is not None:
                    pod_meta[name] = merged
            selector = merge_maps(pod_spec.get("nodeSelector"), template_spec.get("nodeSelector"))
            if selector is not None:
                pod_spec["nodeSelector"] = selector
            for name in ("tolerations", "schedulingGates"):
                union = merge_slices(pod_spec.get(name), template_spec.get(name))
                if union is not None:
                    pod_spec[name] = union
        job["spec"]["suspend"] = False
        await self.client.replace(JOB, *key_of(job), job)

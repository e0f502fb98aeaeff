"""The Trainer TrainJob controller (research k8s-apis.md §1.3, §1.4, §6 rule 4), with its two webhooks.

`kubeflow/trainer:pkg/controller/trainjob_controller.go` `Reconcile`, step by step:

1. Read the TrainJob from the cache; keep a copy of its status.
2. `removeFailedCondition`; unless the TrainJob is finished, `reconcileObjects`: find the runtime
   (ClusterTrainingRuntime or TrainingRuntime, through the cache), build the JobSet (`trainer_build.py`)
   and server-side apply it with field owner `trainer` and `ForceOwnership`. An unsupported runtime kind
   sets `Failed` (reason `TrainingRuntimeNotSupported`); a missing runtime is an error, retried. A failed
   apply (refused by a webhook, answered 504, a dropped connection) does not end the reconcile: upstream
   keeps the error (`err = r.reconcileObjects(...)`, an event `TrainJobResourcesCreationFailed`), goes on,
   and returns it joined with the status patch's (`errors.Join`), so the TrainJob's conditions are written
   even though its JobSet was not (v2.3.0 `pkg/controller/trainjob_controller.go` `Reconcile`). So
   `Suspended=True` can be reported while the JobSet still runs.
3. `setSuspendedCondition`, then `setTrainJobStatus`: the JobSet's conditions and replicated-job counts,
   read through the cache (`plugins/jobset/jobset.go` `Status`).
4. `reconcileDeadline`: past `spec.activeDeadlineSeconds` (counted from creation, or from the last resume)
   the TrainJob fails with `DeadlineExceeded` and its JobSet is deleted.
5. If the status changed, a JSON merge patch of the difference on `/status` (`client.MergeFrom`).

The controller watches TrainJobs, the JobSets it controls (`handler.OnlyControllerOwner`) and the runtimes.
Its JobSet informer is also what the validating webhook reads, so the webhook sees exactly the possibly
stale view the controller has. Not reproduced: events, `managedBy` MultiKueue handoff beyond skipping,
the TrainJob status server and progress, runtime finalizers.
"""

from __future__ import annotations

import copy
from typing import Any

from airflow_provider_dispatch.dispatch.vocabulary import ApiCoordinates
from airflow_provider_dispatch_lab.apiserver.registry.resources import default_registry
from airflow_provider_dispatch_lab.client import ApiStatusError, is_not_found
from airflow_provider_dispatch_lab.clock import parse_timestamp
from airflow_provider_dispatch_lab.kinds import CLUSTER_TRAINING_RUNTIME, JOBSET, TRAINING_RUNTIME, TRAINJOB
from airflow_provider_dispatch_lab.simulated.cluster import ClusterContext
from airflow_provider_dispatch_lab.simulated.objects import (
    Key,
    controller_of,
    find_condition,
    is_deleting,
    key_of,
    merge_patch_diff,
    meta,
    set_status_condition,
)
from airflow_provider_dispatch_lab.simulated.queue_controller import RETRYABLE, QueueController, RetryLater
from airflow_provider_dispatch_lab.simulated.workloads import trainer_build as build
from airflow_provider_dispatch_lab.simulated.workloads.trainer_webhooks import TrainJobDefaulter, TrainJobValidator

Obj = dict[str, Any]
_RUNTIME_KINDS = {
    ("trainer.kubeflow.org", "ClusterTrainingRuntime"): CLUSTER_TRAINING_RUNTIME,
    ("trainer.kubeflow.org", "TrainingRuntime"): TRAINING_RUNTIME,
}


class TrainerController(QueueController[Key]):
    name = "trainer-controller"

    def __init__(self, ctx: ClusterContext) -> None:
        super().__init__(ctx)
        self.trainjobs = self.informer(TRAINJOB)
        self.jobsets = self.informer(JOBSET)
        self.runtimes = self.informer(TRAINING_RUNTIME)
        self.cluster_runtimes = self.informer(CLUSTER_TRAINING_RUNTIME)
        self.trainjobs.on_change(lambda _kind, obj, _old: self.queue.add(key_of(obj)))
        self.jobsets.on_change(self._jobset_changed)
        self.runtimes.on_change(lambda _kind, obj, _old: self._runtime_changed(TRAINING_RUNTIME, obj))
        self.cluster_runtimes.on_change(lambda _kind, obj, _old: self._runtime_changed(CLUSTER_TRAINING_RUNTIME, obj))
        jobs = default_registry().by_path("batch", "v1", "jobs")
        assert jobs is not None
        self._job_template_semantics = jobs.schema.strategic_list_semantics
        self.defaulter = TrainJobDefaulter(ctx.clock)
        self.validator = TrainJobValidator(self.cached_jobset)
        self.serve_webhooks(self.defaulter, self.validator)

    async def cached_jobset(self, namespace: str, name: str) -> Obj | None:
        """The controller-runtime cached client's Get: waits for the cache to sync, then reads it."""
        await self.jobsets.synced.wait()
        return self.jobsets.get(namespace, name)

    def _jobset_changed(self, _kind: str, obj: Obj, _old: Obj | None) -> None:
        owner = controller_of(obj)
        if owner and owner.get("kind") == TRAINJOB.kind and owner.get("apiVersion") == TRAINJOB.api_version:
            self.queue.add((key_of(obj)[0], str(owner.get("name"))))

    def _runtime_changed(self, coords: ApiCoordinates, runtime: Obj) -> None:
        """Requeue the TrainJobs that reference a runtime (upstream indexes TrainJobs by runtime reference)."""
        namespace, name = key_of(runtime)
        for trainjob in self.trainjobs.items():
            ref = (trainjob.get("spec") or {}).get("runtimeRef") or {}
            same_scope = not coords.namespaced or key_of(trainjob)[0] == namespace
            if self._runtime_coords(trainjob) is coords and ref.get("name") == name and same_scope:
                self.queue.add(key_of(trainjob))

    async def sync(self, key: Key) -> None:
        cached = self.trainjobs.get(*key)
        if cached is None or is_deleting(cached):
            return
        trainjob = copy.deepcopy(cached)
        if (trainjob.get("spec") or {}).get("managedBy", build.TRAINER_MANAGER) != build.TRAINER_MANAGER:
            return
        previous = copy.deepcopy(trainjob.get("status") or {})
        status: Obj = copy.deepcopy(previous)
        now = self.clock.timestamp()
        build.remove_failed_condition(status)
        trainjob["status"] = status
        failure: BaseException | None = None
        runtime_coords = self._runtime_coords(trainjob)
        if runtime_coords is None:
            ref = (trainjob.get("spec") or {}).get("runtimeRef") or {}
            message = f"unsupported runtime: {ref.get('kind')}.{ref.get('apiGroup')}"
            set_status_condition(
                status.setdefault("conditions", []),
                {"type": "Failed", "status": "True", "reason": build.RUNTIME_NOT_SUPPORTED, "message": message},
                now,
            )
        elif not build.is_finished(trainjob):
            try:
                await self._reconcile_jobset(trainjob, runtime_coords)
            except RETRYABLE as error:  # kept, the status is written anyway, then retried (module docstring)
                failure = error
        build.set_suspended_condition(trainjob, status, now)
        jobset = self.jobsets.get(*key)
        if jobset is not None:
            build.copy_jobset_status(jobset, status, now)
        if self._deadline_exceeded(trainjob, status, now):
            await self._delete_jobset(*key)
        await self._write_status(trainjob, previous, build.tidy(status))
        if failure is not None:
            raise failure

    def _runtime_coords(self, trainjob: Obj) -> ApiCoordinates | None:
        ref = (trainjob.get("spec") or {}).get("runtimeRef") or {}
        return _RUNTIME_KINDS.get(
            (ref.get("apiGroup") or "trainer.kubeflow.org", ref.get("kind") or "ClusterTrainingRuntime")
        )

    async def _reconcile_jobset(self, trainjob: Obj, runtime_coords: ApiCoordinates) -> None:
        namespace, name = key_of(trainjob)
        existing = self.jobsets.get(namespace, name)
        if not build.should_apply(trainjob, existing):
            return
        runtime_name = str(((trainjob.get("spec") or {}).get("runtimeRef") or {}).get("name") or "")
        if runtime_coords is CLUSTER_TRAINING_RUNTIME:
            runtime = self.cluster_runtimes.get(None, runtime_name)
            missing = "ClusterTrainingRuntime specified in TrainJob is not found"
        else:
            runtime = self.runtimes.get(namespace, runtime_name)
            missing = "TrainingRuntime specified in TrainJob is not found"
        if runtime is None:
            raise RetryLater(missing)
        desired = build.build_jobset(trainjob, runtime, self._job_template_semantics)
        await self.client.patch(
            JOBSET, namespace, name, desired, patch_type="apply", field_manager=build.FIELD_OWNER, force=True
        )

    def _deadline_exceeded(self, trainjob: Obj, status: Obj, now: str) -> bool:
        """`reconcileDeadline`: fail the TrainJob once it ran longer than `activeDeadlineSeconds`, counted
        from creation or from the last resume; until then, requeue for the moment it passes."""
        seconds = (trainjob.get("spec") or {}).get("activeDeadlineSeconds")
        if not seconds or build.is_finished(trainjob) or (trainjob.get("spec") or {}).get("suspend"):
            return False
        started = str(meta(trainjob).get("creationTimestamp") or "")
        resumed = find_condition(status.get("conditions"), "Suspended")
        if resumed is not None and resumed.get("status") == "False":
            started = str(resumed.get("lastTransitionTime") or started)
        if not started:
            return False
        deadline = parse_timestamp(started) + int(seconds)
        if self.clock.now() < deadline:
            self.queue.add_after(key_of(trainjob), max(deadline - self.clock.now(), 1.0))
            return False
        reason, message = build.DEADLINE_EXCEEDED
        set_status_condition(
            status.setdefault("conditions", []),
            {"type": "Failed", "status": "True", "reason": reason, "message": message},
            now,
        )
        return True

    async def _delete_jobset(self, namespace: str, name: str) -> None:
        try:
            await self.client.delete(JOBSET, namespace, name)
        except ApiStatusError as error:
            if not is_not_found(error):
                raise

    async def _write_status(self, trainjob: Obj, previous: Obj, status: Obj) -> None:
        if status == previous:
            return
        patch = merge_patch_diff({"status": previous}, {"status": status})
        namespace, name = key_of(trainjob)
        try:
            await self.client.patch(TRAINJOB, namespace, name, patch, patch_type="merge", subresource="status")
        except ApiStatusError as error:
            if not is_not_found(error):
                raise

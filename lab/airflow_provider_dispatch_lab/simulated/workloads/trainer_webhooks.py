"""Trainer's TrainJob webhooks, as admission plugins (research k8s-apis.md §1.5, §6 rules 2 and 3).

Both are registered by `kubeflow/trainer:pkg/webhooks/trainjob_webhook.go` for create and update of
`trainjobs` (not the status subresource), failurePolicy Fail:

- `defaulter.trainjob.trainer.kubeflow.org` (`TrainJobDefaulter.Default`): on create, every runtime patch
  without a `time` gets now; on update, a patch whose manager existed before and whose content (time
  aside) is unchanged keeps the old time, and any other patch without a time gets now. A changed patch
  that carries a time keeps the time it carries: the code only fills in a missing one.
- `validator.trainjob.trainer.kubeflow.org`, of which the lab reproduces the one rule dispatch depends on,
  `plugins/jobset/jobset.go` `checkRuntimePatchesImmutability` at v2.3.0 and master: on update, if the
  runtime patches changed and neither the old nor the new TrainJob is suspended, deny
  `RuntimePatches can only be modified when the TrainJob is suspended before or after the update`;
  otherwise read the JobSet of the same name through the controller's cache (`mgr.GetClient()`, so
  possibly stale; a missing JobSet passes) and deny, for every replicated Job whose
  `status.replicatedJobsStatus[].active > 0`,
  `RuntimePatches cannot be modified when the JobSet's ReplicatedJob <name> is still active`. That count
  excludes terminating pods (Job `status.active`), which is the upstream flaw the lab keeps.

The "changed" comparison is `equality.Semantic.DeepEqual` on the decoded (defaulted) patches; the lab
defaults a copy of the incoming object with the CRD schema first, as the apiserver decodes before admission.
Denials are 403 Forbidden with the apiserver's webhook prefix (`lab/simulated/webhook_errors.py`). Not reproduced: the
validator's other checks (runtime existence, containers and target jobs of patches, initializers).
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable
from typing import Any

from airflow_provider_dispatch_lab.apiserver.registry.admission import AdmissionRequest, Operation
from airflow_provider_dispatch_lab.apiserver.registry.resources import ResourceType
from airflow_provider_dispatch_lab.clock import LabClock
from airflow_provider_dispatch_lab.simulated import webhook_errors

Obj = dict[str, Any]
JobSetReader = Callable[[str, str], Awaitable[Obj | None]]

DEFAULTER = "defaulter.trainjob.trainer.kubeflow.org"
VALIDATOR = "validator.trainjob.trainer.kubeflow.org"
PATCHES_PATH = "spec.runtimePatches"
NOT_SUSPENDED = "RuntimePatches can only be modified when the TrainJob is suspended before or after the update"
STILL_ACTIVE = "RuntimePatches cannot be modified when the JobSet's ReplicatedJob {} is still active"


def _is_trainjob(resource: ResourceType, subresource: str | None, operation: Operation) -> bool:
    return (
        resource.group == "trainer.kubeflow.org"
        and resource.plural == "trainjobs"
        and subresource is None
        and operation in ("CREATE", "UPDATE")
    )


def _patches(obj: Obj | None) -> list[Obj]:
    spec = (obj or {}).get("spec") or {}
    patches = spec.get("runtimePatches") if isinstance(spec, dict) else None
    return [p for p in patches or () if isinstance(p, dict)]


def _decoded(resource: ResourceType, obj: Obj | None) -> Obj:
    """The object as the webhook decodes it: defaulted and pruned by the CRD schema."""
    decoded = copy.deepcopy(obj or {})
    resource.schema.default(decoded)
    resource.schema.prune(decoded)
    return decoded


def _without_time(patch: Obj) -> Obj:
    return {k: v for k, v in patch.items() if k != "time"}


class TrainJobDefaulter:
    name = DEFAULTER
    #: the MutatingWebhookConfiguration name in Trainer's Helm chart (`_helpers.tpl`); mutating webhooks run
    #: in the order of these names (lab/apiserver/registry/admission.py)
    configuration = "defaulter.trainer.kubeflow.org"

    def __init__(self, clock: LabClock) -> None:
        self._clock = clock

    def handles(self, resource: ResourceType, subresource: str | None, operation: Operation) -> bool:
        return _is_trainjob(resource, subresource, operation)

    async def mutate(self, request: AdmissionRequest) -> None:
        now = self._clock.timestamp()
        if request.operation == "CREATE":
            for patch in _patches(request.obj):
                if not patch.get("time"):
                    patch["time"] = now
            return
        old_by_manager = {p.get("manager"): p for p in _patches(_decoded(request.resource, request.old))}
        decoded_new = _patches(_decoded(request.resource, request.obj))
        for patch, decoded in zip(_patches(request.obj), decoded_new, strict=False):
            old = old_by_manager.get(patch.get("manager"))
            if old is not None and _without_time(old) == _without_time(decoded):
                if old.get("time"):
                    patch["time"] = old["time"]
                else:
                    patch.pop("time", None)
                continue
            if not patch.get("time"):
                patch["time"] = now

    async def validate(self, request: AdmissionRequest) -> None:
        return None


class TrainJobValidator:
    name = VALIDATOR

    def __init__(self, read_jobset: JobSetReader) -> None:
        self._read_jobset = read_jobset

    def handles(self, resource: ResourceType, subresource: str | None, operation: Operation) -> bool:
        return _is_trainjob(resource, subresource, operation)

    async def mutate(self, request: AdmissionRequest) -> None:
        return None

    async def validate(self, request: AdmissionRequest) -> None:
        if request.operation != "UPDATE" or request.old is None or request.obj is None:
            return
        messages = await self.runtime_patches_immutability(request.old, request.obj)
        if messages:
            raise webhook_errors.denied(VALIDATOR, messages)

    async def runtime_patches_immutability(self, old: Obj, new: Obj) -> list[str]:
        """`checkRuntimePatchesImmutability` (v2.3.0): the field errors, empty when the update passes."""
        if _patches(old) == _patches(new):
            return []
        old_suspended = (old.get("spec") or {}).get("suspend") is True
        new_suspended = (new.get("spec") or {}).get("suspend") is True
        if not old_suspended and not new_suspended:
            return [webhook_errors.forbidden(PATCHES_PATH, NOT_SUSPENDED)]
        metadata = new.get("metadata") or {}
        jobset = await self._read_jobset(str(metadata.get("namespace") or ""), str(metadata.get("name") or ""))
        if jobset is None:
            return []
        return [
            webhook_errors.forbidden(PATCHES_PATH, STILL_ACTIVE.format(entry.get("name")))
            for entry in (jobset.get("status") or {}).get("replicatedJobsStatus") or ()
            if int(entry.get("active") or 0) > 0
        ]

"""Kueue's TrainJob mutating webhook `mtrainjob.kb.io`, on the lab's admission chain: TrainJob CREATE only.

`pkg/controller/jobs/trainjob/trainjob_webhook.go` `Default` (kubebuilder marker `verbs=create`): a TrainJob
Kueue manages (it has the `kueue.x-k8s.io/queue-name` label; `manageJobsWithoutQueueName` is off by default) is
set `spec.suspend: true`; every TrainJob created, managed or not, gets Kueue's runtime patch appended,
`{manager: kueue.x-k8s.io/manager, trainingRuntimeSpec: {template: {spec: {}}}}` (k8s-apis.md §4.6), which
`RunWithPodSetsInfo` later fills in for a managed one (v0.19.2 appends unconditionally: seen on the real cluster,
docs/fidelity.md). Default LocalQueues and MultiKueue's managedBy are not configured in the lab.

Order with Trainer's defaulter (`defaulter.trainjob.trainer.kubeflow.org`, CREATE and UPDATE, which stamps
`runtimePatches[].time` on new or changed entries): the apiserver calls mutating webhook configurations in the
order of their names (`apiserver/pkg/admission/configuration/mutating_webhook_manager.go`, sorted
`ByName`). Trainer's configuration is `defaulter.trainer.kubeflow.org` (Helm chart `_helpers.tpl`), Kueue's is
`kueue-mutating-webhook-configuration` (`config/default` `namePrefix: kueue-`), so Trainer's runs first and,
neither setting `reinvocationPolicy` (default `Never`), is not called again: on create, Kueue's entry is stored
without `time`. It gets one on the first update that changes it (Kueue's own `RunWithPodSetsInfo`), when
Trainer's defaulter sees a changed entry with no time. The lab's AdmissionChain orders mutating plugins by
their `configuration` name as the apiserver does, so the order of the controller lists does not matter.
"""

from __future__ import annotations

from typing import Any

from airflow_provider_dispatch_lab.apiserver.registry.admission import AdmissionRequest, Operation
from airflow_provider_dispatch_lab.apiserver.registry.resources import ResourceType
from airflow_provider_dispatch_lab.simulated.kueue import constants as k

Obj = dict[str, Any]


def kueue_runtime_patch() -> Obj:
    return {"manager": k.RUNTIME_PATCH_MANAGER, "trainingRuntimeSpec": {"template": {"spec": {}}}}


def default_trainjob(trainjob: Obj) -> bool:
    """Mutate a TrainJob as `Default` does; False when Kueue does not manage it (no queue label). Kueue's runtime
    patch is appended to every TrainJob created, managed or not, and whatever entries it already has (the append
    is unconditional upstream; an entry of Kueue's manager written by the user becomes a duplicate the CRD's
    listMapKey refuses); only a managed one is suspended. Seen on real Kueue v0.19.2 (docs/fidelity.md)."""
    labels = (trainjob.get("metadata") or {}).get("labels") or {}
    managed = bool(labels.get(k.QUEUE_LABEL))
    spec = trainjob.setdefault("spec", {})
    if managed:
        spec["suspend"] = True
    patches = spec.get("runtimePatches")
    if not isinstance(patches, list):
        patches = []
        spec["runtimePatches"] = patches
    patches.append(kueue_runtime_patch())
    return managed


class TrainJobWebhook:
    """The AdmissionPlugin: mutates TrainJob creates, validates nothing (Kueue's `vtrainjob` rules are not used)."""

    name = "mtrainjob.kb.io"
    #: Kueue's MutatingWebhookConfiguration (`config/default` namePrefix `kueue-`): sorts after Trainer's
    configuration = "kueue-mutating-webhook-configuration"

    def handles(self, resource: ResourceType, subresource: str | None, operation: Operation) -> bool:
        return (
            resource.group == k.TRAINER_GROUP
            and resource.plural == "trainjobs"
            and subresource is None
            and operation == "CREATE"
        )

    async def mutate(self, request: AdmissionRequest) -> None:
        if request.obj is not None:
            default_trainjob(request.obj)

    async def validate(self, request: AdmissionRequest) -> None:
        return None

"""JobSet's webhooks, as admission plugins (`kubernetes-sigs/jobset:pkg/webhooks/jobset_webhook.go`).

- `mjobset.kb.io` (`Default`, create and update): success policy `All`, startup policy `AnyOrder`, each
  replicated Job's completion mode `Indexed` and pod restart policy `OnFailure`, DNS hostnames and
  publishNotReadyAddresses on, failure-policy rules named `failurePolicyRule<i>`. This is why Trainer's Jobs
  are Indexed and their pods named `<job>-<index>-<random>`.
- `vjobset.kb.io` (`ValidateUpdate`): when the old or the new JobSet is suspended, the pod templates'
  labels, annotations, nodeSelector, tolerations and schedulingGates may change; everything else in
  `spec.replicatedJobs` is immutable (`apivalidation.ValidateImmutableField`: `field is immutable`), as is
  `spec.managedBy` (research k8s-apis.md §2.2, §6 rule 5). Denials are 403 with the webhook prefix
  (`webhook_errors.py`). Not reproduced: the create-time checks (name lengths, subdomain, failure-policy
  rule names, coordinator), which dispatch does not exercise.
"""

from __future__ import annotations

import copy
from typing import Any

from airflow_provider_dispatch.lab.admission import AdmissionRequest, Operation
from airflow_provider_dispatch.lab.controllers import webhook_errors
from airflow_provider_dispatch.lab.resources import ResourceType

Obj = dict[str, Any]

DEFAULTER = "mjobset.kb.io"
VALIDATOR = "vjobset.kb.io"
MUTABLE_WHILE_SUSPENDED = ("nodeSelector", "tolerations", "schedulingGates")


def _is_jobset(resource: ResourceType, subresource: str | None, operation: Operation) -> bool:
    return (
        resource.group == "jobset.x-k8s.io"
        and resource.plural == "jobsets"
        and subresource is None
        and operation in ("CREATE", "UPDATE")
    )


def default_jobset(jobset: Obj) -> None:
    """`jobSetWebhook.Default`, in place."""
    spec = jobset.get("spec")
    if not isinstance(spec, dict):
        return
    if spec.get("successPolicy") is None:
        spec["successPolicy"] = {"operator": "All"}
    if spec.get("startupPolicy") is None:
        spec["startupPolicy"] = {"startupPolicyOrder": "AnyOrder"}
    for rjob in spec.get("replicatedJobs") or ():
        if not isinstance(rjob, dict):
            continue
        job_spec = rjob.setdefault("template", {}).setdefault("spec", {})
        if job_spec.get("completionMode") is None:
            job_spec["completionMode"] = "Indexed"
        pod_spec = job_spec.setdefault("template", {}).setdefault("spec", {})
        if not pod_spec.get("restartPolicy"):
            pod_spec["restartPolicy"] = "OnFailure"
    network = spec.get("network")
    if not isinstance(network, dict):
        network = spec["network"] = {}
    if network.get("enableDNSHostnames") is None:
        network["enableDNSHostnames"] = True
    if network.get("publishNotReadyAddresses") is None:
        network["publishNotReadyAddresses"] = True
    for index, rule in enumerate((spec.get("failurePolicy") or {}).get("rules") or ()):
        if isinstance(rule, dict) and not rule.get("name"):
            rule["name"] = f"failurePolicyRule{index}"


def _pod_template(rjob: Obj) -> Obj:
    template: Obj = rjob.setdefault("template", {}).setdefault("spec", {}).setdefault("template", {})
    return template


def update_errors(old: Obj, new: Obj) -> list[str]:
    """`ValidateUpdate`: the field errors, empty when the update is allowed."""
    old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
    munged = copy.deepcopy(new_spec.get("replicatedJobs") or [])
    old_jobs = copy.deepcopy(old_spec.get("replicatedJobs") or [])
    if old_spec.get("suspend") is True or new_spec.get("suspend") is True:
        for rjob, old_rjob in zip(munged, old_jobs, strict=False):
            template, old_template = _pod_template(rjob), _pod_template(old_rjob)
            template_meta = template.setdefault("metadata", {})
            old_meta = old_template.get("metadata") or {}
            for name in ("labels", "annotations"):
                template_meta.pop(name, None)
                if name in old_meta:
                    template_meta[name] = copy.deepcopy(old_meta[name])
            pod_spec, old_pod_spec = template.setdefault("spec", {}), old_template.get("spec") or {}
            for name in MUTABLE_WHILE_SUSPENDED:
                pod_spec.pop(name, None)
                if name in old_pod_spec:
                    pod_spec[name] = copy.deepcopy(old_pod_spec[name])
    errors = []
    if _normal(munged) != _normal(old_spec.get("replicatedJobs") or []):
        errors.append(
            webhook_errors.invalid("spec.replicatedJobs", new_spec.get("replicatedJobs"), "field is immutable")
        )
    if new_spec.get("managedBy") != old_spec.get("managedBy"):
        errors.append(webhook_errors.invalid("spec.managedBy", new_spec.get("managedBy"), "field is immutable"))
    return errors


def _normal(value: Any) -> Any:
    """Empty maps and lists equal absent ones, as Go's `omitempty` serialization has them."""
    if isinstance(value, dict):
        return {k: _normal(v) for k, v in value.items() if v not in (None, {}, [])}
    if isinstance(value, list):
        return [_normal(v) for v in value]
    return value


class JobSetDefaulter:
    name = DEFAULTER
    #: JobSet's MutatingWebhookConfiguration (`config/default` namePrefix `jobset-`)
    configuration = "jobset-mutating-webhook-configuration"

    def handles(self, resource: ResourceType, subresource: str | None, operation: Operation) -> bool:
        return _is_jobset(resource, subresource, operation)

    async def mutate(self, request: AdmissionRequest) -> None:
        if request.obj is not None:
            default_jobset(request.obj)

    async def validate(self, request: AdmissionRequest) -> None:
        return None


class JobSetValidator:
    name = VALIDATOR

    def handles(self, resource: ResourceType, subresource: str | None, operation: Operation) -> bool:
        return _is_jobset(resource, subresource, operation)

    async def mutate(self, request: AdmissionRequest) -> None:
        return None

    async def validate(self, request: AdmissionRequest) -> None:
        if request.operation != "UPDATE" or request.obj is None or request.old is None:
            return
        errors = update_errors(request.old, request.obj)
        if errors:
            raise webhook_errors.denied(VALIDATOR, errors)

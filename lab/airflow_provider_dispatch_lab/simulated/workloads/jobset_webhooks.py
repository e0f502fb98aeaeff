"""JobSet's webhooks, as admission plugins (`kubernetes-sigs/jobset:pkg/webhooks/jobset_webhook.go`, v0.12.0).

- `mjobset.kb.io` (`Default`), on CREATE only, as its kubebuilder marker (`verbs=create`) and
  `config/components/webhook/manifests.yaml` register it since v0.9.0 (kubernetes-sigs/jobset#927): success
  policy `All`, startup policy `AnyOrder`, each replicated Job's completion mode `Indexed` and pod restart
  policy `OnFailure`, DNS hostnames and publishNotReadyAddresses on, failure-policy rules named
  `failurePolicyRule<i>`. This is why Trainer's Jobs are Indexed and their pods named `<job>-<index>-<random>`.
  An update is not defaulted again: a write that drops a defaulted field of `spec.replicatedJobs` is refused by
  the validator below. Trainer's server-side apply keeps them, because the fields the webhook set at creation
  belong to no field manager, so an apply that leaves them out does not remove them (the apiserver computes the
  managed fields before mutating admission, `apiserver/pkg/endpoints/handlers/patch.go`).
- `vjobset.kb.io` (`ValidateUpdate`): when the old or the new JobSet is suspended, the pod templates'
  labels, annotations, nodeSelector, tolerations and schedulingGates may change, each replicated Job taking the
  old values of the old replicated Job of the same name (`oldJobsMap`); everything else in
  `spec.replicatedJobs` is immutable (`apivalidation.ValidateImmutableField`: `field is immutable`), as is
  `spec.managedBy` (research k8s-apis.md §2.2, §6 rule 5). The refusal is `apierrors.NewInvalid`, an
  `APIStatus`, so controller-runtime passes its Status on (`validationResponseFromStatus`): the client gets 422
  `Invalid`, `JobSet.jobset.x-k8s.io "<name>" is invalid: ...` behind the webhook prefix, with the causes in
  the details. Seen on the real control plane (`docs/fidelity.md`). Not reproduced: the create-time checks (name
  lengths, subdomain, failure-policy rule names, coordinator), the `ElasticJobSet` gate (alpha, off), which
  dispatch does not exercise.
"""

from __future__ import annotations

import copy
from typing import Any

from airflow_provider_dispatch_lab.apiserver.errors import ApiError
from airflow_provider_dispatch_lab.apiserver.errors import invalid as invalid_error
from airflow_provider_dispatch_lab.apiserver.registry.admission import AdmissionRequest, Operation
from airflow_provider_dispatch_lab.apiserver.registry.resources import ResourceType
from airflow_provider_dispatch_lab.simulated import webhook_errors

Obj = dict[str, Any]

DEFAULTER = "mjobset.kb.io"
VALIDATOR = "vjobset.kb.io"
MUTABLE_WHILE_SUSPENDED = ("nodeSelector", "tolerations", "schedulingGates")


def _is_jobset(resource: ResourceType, subresource: str | None, operation: Operation, verbs: tuple[str, ...]) -> bool:
    return (
        resource.group == "jobset.x-k8s.io"
        and resource.plural == "jobsets"
        and subresource is None
        and operation in verbs
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


def update_errors(old: Obj, new: Obj) -> list[tuple[str, str]]:
    """`ValidateUpdate`: the field errors as (field, `ErrorBody`), empty when the update is allowed."""
    old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
    munged = copy.deepcopy(new_spec.get("replicatedJobs") or [])
    old_by_name = {
        rjob.get("name"): copy.deepcopy(rjob) for rjob in old_spec.get("replicatedJobs") or () if isinstance(rjob, dict)
    }
    if old_spec.get("suspend") is True or new_spec.get("suspend") is True:
        for rjob in munged:
            old_rjob = old_by_name.get(rjob.get("name")) if isinstance(rjob, dict) else None
            if old_rjob is None:
                continue  # a new replicated Job: nothing to take from the old one
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
        errors.append(("spec.replicatedJobs", webhook_errors.invalid_body(munged, "field is immutable")))
    if new_spec.get("managedBy") != old_spec.get("managedBy"):
        errors.append(("spec.managedBy", webhook_errors.invalid_body(new_spec.get("managedBy"), "field is immutable")))
    return errors


def update_refusal(name: str, errors: list[tuple[str, str]]) -> ApiError:
    """The 422 the client sees: `NewInvalid(JobSet, name, errs)`, passed on by controller-runtime and prefixed
    by the apiserver (`webhookerrors.ToStatusErr`)."""
    causes = [{"reason": "FieldValueInvalid", "message": body, "field": path} for path, body in errors]
    refusal = invalid_error("JobSet", "jobset.x-k8s.io", name, causes)
    refusal.message = f'admission webhook "{VALIDATOR}" denied the request: {refusal.message}'
    return refusal


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
        return _is_jobset(resource, subresource, operation, ("CREATE",))

    async def mutate(self, request: AdmissionRequest) -> None:
        if request.obj is not None:
            default_jobset(request.obj)

    async def validate(self, request: AdmissionRequest) -> None:
        return None


class JobSetValidator:
    name = VALIDATOR

    def handles(self, resource: ResourceType, subresource: str | None, operation: Operation) -> bool:
        return _is_jobset(resource, subresource, operation, ("CREATE", "UPDATE"))

    async def mutate(self, request: AdmissionRequest) -> None:
        return None

    async def validate(self, request: AdmissionRequest) -> None:
        if request.operation != "UPDATE" or request.obj is None or request.old is None:
            return
        errors = update_errors(request.old, request.obj)
        if errors:
            raise update_refusal(request.name, errors)

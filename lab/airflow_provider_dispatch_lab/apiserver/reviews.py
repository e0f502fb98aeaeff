"""The review kinds: asked, answered, never stored. What `kubectl auth can-i` and `kubectl auth whoami` create.

Each is create-only (`POST`, answered 201 with the object and its `status`), as kube-apiserver's REST storage for
it at k8s.io/kubernetes v1.36.3 (the pinned version, `controlplane/versions`) answers:

- SelfSubjectAccessReview (`authorization.k8s.io/v1`, `pkg/registry/authorization/selfsubjectaccessreview/
  rest.go`): validated (`ValidateSelfSubjectAccessReview`: exactly one of resourceAttributes and
  nonResourceAttributes; 422 otherwise), then the server's authorizer is asked about the attributes for the
  requesting user (`authorizationutil.ResourceAttributesFrom` / `NonResourceAttributesFrom`), and `status` is
  `allowed`, `denied` (never: neither RBAC nor AlwaysAllow denies) and the authorizer's `reason`. The object is
  answered as sent, its spec untouched.
- SelfSubjectRulesReview (`pkg/registry/authorization/selfsubjectrulesreview/rest.go`), what `kubectl auth can-i
  --list` creates (k8s.io/kubectl v0.36.3 `pkg/cmd/auth/cani.go` `RunAccessList`): 400 `no namespace on
  request` without `spec.namespace`; else the rules that apply to the user in that namespace, from the
  authorizer's rule resolver (`rules_for`: RBAC's `RulesFor`, or AlwaysAllow's `*`), `incomplete: false`, and
  the resolution errors as `evaluationError`. As upstream, the answer carries no spec: a new object with only
  the status.
- SelfSubjectReview (`authentication.k8s.io/v1`, `pkg/registry/authentication/selfsubjectreview/rest.go`), what
  `kubectl auth whoami` creates: `status.userInfo` is the authenticated user (username, uid, groups, extra), and
  `metadata.creationTimestamp` the server's now (lab time).

kubectl posts these in protobuf (`protobuf.py`). An authorizer that cannot resolve rules answers SelfSubjectRules
Review with no rules, `incomplete: true` and an `evaluationError`, as a webhook authorizer does.
"""

from __future__ import annotations

from typing import Any

from airflow_provider_dispatch_lab.apiserver import errors
from airflow_provider_dispatch_lab.apiserver.auth.auth import Authorizer, UserInfo
from airflow_provider_dispatch_lab.apiserver.registry.resources import ResourceType
from airflow_provider_dispatch_lab.apiserver.requests import RequestInfo
from airflow_provider_dispatch_lab.clock import LabClock

Obj = dict[str, Any]
KINDS = ("SelfSubjectAccessReview", "SelfSubjectRulesReview", "SelfSubjectReview")


def _metadata(body: Obj) -> Obj:
    """The object's metadata as Go writes an unset `ObjectMeta`: `creationTimestamp: null` at least."""
    metadata = body.get("metadata")
    return {"creationTimestamp": None, **(metadata if isinstance(metadata, dict) else {})}


def _checked(resource: ResourceType, body: Obj) -> None:
    """The validation errors of the body (422), as the REST gives them."""
    causes = resource.schema.validate(body)
    if causes:
        # The REST builds the error from the internal object, whose kind the decoder left empty.
        found = [{"reason": c.reason, "field": c.field, "message": c.message} for c in causes]
        raise errors.invalid("", resource.group, "", found)


def access_review(resource: ResourceType, body: Obj, user: UserInfo, authorizer: Authorizer) -> Obj:
    _checked(resource, body)
    spec = body.get("spec") or {}
    attributes = spec.get("resourceAttributes")
    if attributes is not None:
        info = RequestInfo(
            is_resource=True,
            path="",
            verb=str(attributes.get("verb") or ""),
            group=str(attributes.get("group") or ""),
            version=str(attributes.get("version") or ""),
            resource=str(attributes.get("resource") or ""),
            namespace=attributes.get("namespace") or None,
            name=attributes.get("name") or None,
            subresource=attributes.get("subresource") or None,
        )
    else:
        non_resource = spec.get("nonResourceAttributes") or {}
        info = RequestInfo(
            is_resource=False, path=str(non_resource.get("path") or ""), verb=str(non_resource.get("verb") or "")
        )
    decision = authorizer.authorize(user, info)
    status: Obj = {"allowed": decision.allowed}
    if decision.reason:
        status["reason"] = decision.reason
    return {
        "kind": resource.kind,
        "apiVersion": resource.api_version,
        "metadata": _metadata(body),
        "spec": spec,
        "status": status,
    }


def rules_review(resource: ResourceType, body: Obj, user: UserInfo, authorizer: Authorizer) -> Obj:
    spec = body.get("spec") or {}
    namespace = spec.get("namespace") if isinstance(spec, dict) else None
    if not namespace:
        raise errors.bad_request("no namespace on request")
    rules_for = getattr(authorizer, "rules_for", None)
    if rules_for is None:
        status: Obj = {
            "resourceRules": [],
            "nonResourceRules": [],
            "incomplete": True,
            "evaluationError": "the lab's authorizer does not support user rule resolution",
        }
    else:
        status = rules_for(user, str(namespace))
    return {
        "kind": resource.kind,
        "apiVersion": resource.api_version,
        "metadata": {"creationTimestamp": None},
        "spec": {},
        "status": status,
    }


def subject_review(resource: ResourceType, user: UserInfo, clock: LabClock) -> Obj:
    info: Obj = {"username": user.name}
    if user.uid:
        info["uid"] = user.uid
    if user.groups:
        info["groups"] = list(user.groups)
    if user.extra:
        info["extra"] = {key: list(values) for key, values in user.extra}
    return {
        "kind": resource.kind,
        "apiVersion": resource.api_version,
        "metadata": {"creationTimestamp": clock.timestamp()},
        "status": {"userInfo": info},
    }


def answer(resource: ResourceType, body: Any, user: UserInfo, authorizer: Authorizer, clock: LabClock) -> Obj:
    """The answer to a review's create (the server answers it 201)."""
    if not isinstance(body, dict):
        raise errors.bad_request(f"the body of a {resource.kind} must be an object")
    if resource.kind == "SelfSubjectAccessReview":
        return access_review(resource, body, user, authorizer)
    if resource.kind == "SelfSubjectRulesReview":
        return rules_review(resource, body, user, authorizer)
    if resource.kind == "SelfSubjectReview":
        return subject_review(resource, user, clock)
    raise errors.method_not_supported(resource.plural, resource.group, "create")


__all__ = ["KINDS", "access_review", "answer", "rules_review", "subject_review"]

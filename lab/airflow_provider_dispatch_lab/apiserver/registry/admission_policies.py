"""ValidatingAdmissionPolicy: the API server's in-process CEL admission (`admissionregistration.k8s.io/v1`).

What the lab reproduces, from `k8s.io/apiserver` v0.36.3 (the library of Kubernetes v1.36.3),
`pkg/admission/plugin/policy/validating` and `pkg/admission/plugin/policy/matching`:

- every binding (`ValidatingAdmissionPolicyBinding`) whose policy exists is considered; a request is validated
  by a policy-binding pair when it matches the policy's `matchConstraints` and the binding's `matchResources`
  (when set): a resource rule matches the operation (or `*`), the API group and version (or `*`) and the resource
  (`pods`, `pods/status`, `pods/*`, `*`, `*/*`, `*/status`); `excludeResourceRules` take it out; a
  `namespaceSelector` is matched against the labels of the request's Namespace (always matching a cluster-scoped
  object other than a Namespace), an `objectSelector` against the old or the new object
  (`webhook/predicates/object/matcher.go`: either matching is enough);
- then every `matchConditions` expression must be true; an error there counts under `failurePolicy`;
- `variables` are evaluated when first used (`composition.go`: lazily, once per evaluation);
- each of `validations` that evaluates to false denies, with the result of `messageExpression` when it is a
  non-empty string, else `message`, else `failed expression: <expression>`; an expression that fails to evaluate
  denies when `failurePolicy` is `Fail` (the default) with `expression '<expression>' resulted in error: <error>`;
- a denial is raised only when the binding's `validationActions` include `Deny` (`Warn` and `Audit` are not
  reproduced: they change nothing stored); the first denial is the answer: `<resource> "<name>" is forbidden:
  ValidatingAdmissionPolicy '<policy>' with binding '<binding>' denied request: <message>`, with the
  validation's `reason` (default Invalid) and its HTTP code (`dispatcher.go`; `admission.NewForbidden`);
- the CEL variables: `object` (null on DELETE), `oldObject` (null on CREATE), `request` (`operation`, `name`,
  `namespace`, `subResource`, `kind`, `resource`, `userInfo`, `dryRun`, and `options`: the request's
  DeleteOptions, UpdateOptions or CreateOptions as sent, `cel/condition.go` `CreateAdmissionRequest`; as in
  `admission/v1` `AdmissionRequest`, an empty `subResource`, `name`, `namespace` or `options` is absent, not
  `""`, so `request.subResource` on a request to the main resource is an error, as the real API server answers
  it: "no such key: subResource"), `namespaceObject`, and `params` (always null: `paramKind` is not reproduced).

The lab evaluates CEL with cel-python (the CRD validation's engine, `validation/schema_cel.py`) on the objects
as JSON, without the typed view the API server builds from OpenAPI: an absent field reads as absent either way.
Not reproduced: `paramKind` and `paramRef`, `auditAnnotations`, the `authorizer` library, type checking (its
warnings in the policy's status), the cost budget, and the delay before a real API server enforces a policy it
has just loaded from its watch (the lab enforces a policy from the write that stores it).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Any, Final

import celpy
from celpy import celtypes
from celpy.adapter import json_to_cel
from celpy.celparser import CELParseError
from celpy.evaluation import CELEvalError

from airflow_provider_dispatch_lab.apiserver.errors import ApiError
from airflow_provider_dispatch_lab.apiserver.registry.admission import AdmissionRequest, Operation
from airflow_provider_dispatch_lab.apiserver.registry.resources import ResourceType
from airflow_provider_dispatch_lab.apiserver.storage.store import Store
from airflow_provider_dispatch_lab.apiserver.validation.schema_builtin import selector_matches

Obj = dict[str, Any]
POLICIES: Final = "validatingadmissionpolicies.admissionregistration.k8s.io"
BINDINGS: Final = "validatingadmissionpolicybindings.admissionregistration.k8s.io"
#: `reasonToCode` in `dispatcher.go`
_CODES: Final = {"Unauthorized": 401, "Forbidden": 403, "Invalid": 422, "RequestEntityTooLarge": 413}
_ENV: Final = celpy.Environment()


@lru_cache(maxsize=512)
def _program(expression: str) -> Any:
    return _ENV.program(_ENV.compile(expression))


class _Denied(Exception):
    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.message, self.reason = message, reason


def _evaluate(expression: str, activation: Mapping[str, Any]) -> Any:
    """The value, or a CELEvalError value (as cel-python carries errors inside an expression)."""
    try:
        return _program(expression).evaluate(dict(activation))
    except CELEvalError as error:
        return error
    except (CELParseError, ValueError, TypeError) as error:
        return CELEvalError(str(error))


class _Variables(celtypes.MapType):
    """`variables`: each evaluated when first read, then kept (`composition.go`)."""

    def __init__(self, declared: Mapping[str, str], activation: dict[str, Any]) -> None:
        super().__init__({})
        self._declared = dict(declared)
        self._activation = activation
        self._values: dict[str, Any] = {}

    def __getitem__(self, key: Any) -> Any:
        name = str(key)
        if name not in self._declared:
            return CELEvalError(f"no such key: {name}")
        if name not in self._values:
            self._values[name] = _evaluate(self._declared[name], self._activation)
        return self._values[name]

    def __contains__(self, key: object) -> bool:
        return str(key) in self._declared


def _resource_matches(pattern: str, plural: str, subresource: str | None) -> bool:
    main, _, sub = pattern.partition("/")
    if main not in ("*", plural):
        return False
    if not sub:
        return not subresource
    return sub == "*" or sub == (subresource or "")


def _rule_matches(rule: Mapping[str, Any], operation: Operation, resource: ResourceType, sub: str | None) -> bool:
    def has(key: str, value: str) -> bool:
        values = rule.get(key) or []
        return "*" in values or value in values

    return (
        has("operations", operation)
        and has("apiGroups", resource.group)
        and has("apiVersions", resource.version)
        and any(_resource_matches(str(p), resource.plural, sub) for p in rule.get("resources") or ())
    )


class AdmissionPolicies:
    """The `ValidatingAdmissionPolicy` admission plugin (module docstring), reading the store directly."""

    name = "ValidatingAdmissionPolicy"

    def __init__(self, store: Store) -> None:
        self._store = store

    def _bindings(self) -> list[Obj]:
        return [obj for _, obj in self._store.scan(BINDINGS, None)]

    def handles(self, resource: ResourceType, subresource: str | None, operation: Operation) -> bool:
        return any(True for _ in self._store.scan(BINDINGS, None))

    async def mutate(self, request: AdmissionRequest) -> None:
        return None

    async def validate(self, request: AdmissionRequest) -> None:
        for binding in sorted(self._bindings(), key=lambda b: str(b["metadata"]["name"])):
            spec = binding.get("spec") or {}
            policy = self._store.get(POLICIES, ("", str(spec.get("policyName") or "")))
            if policy is None or "Deny" not in (spec.get("validationActions") or ()):
                continue
            policy_spec = policy.get("spec") or {}
            if not self._matches(policy_spec.get("matchConstraints") or {}, request):
                continue
            if spec.get("matchResources") and not self._matches(spec["matchResources"], request, narrowing=True):
                continue
            try:
                self._validate(policy_spec, request)
            except _Denied as denied:
                raise self._denial(request, policy, binding, denied) from None

    def _matches(self, match: Mapping[str, Any], request: AdmissionRequest, *, narrowing: bool = False) -> bool:
        rules = match.get("resourceRules")
        # a binding's matchResources without resource rules narrows nothing; a policy's always names its resources
        if (rules or not narrowing) and not any(
            _rule_matches(r, request.operation, request.resource, request.subresource) for r in rules or ()
        ):
            return False
        if any(
            _rule_matches(r, request.operation, request.resource, request.subresource)
            for r in match.get("excludeResourceRules") or ()
        ):
            return False
        namespace_selector = match.get("namespaceSelector") or {}
        if namespace_selector and request.resource.namespaced and request.namespace:
            namespace = self._store.get("namespaces", ("", request.namespace)) or {}
            if not selector_matches(namespace_selector, (namespace.get("metadata") or {}).get("labels") or {}):
                return False
        object_selector = match.get("objectSelector") or {}
        if object_selector:
            candidates = [o for o in (request.obj, request.old) if o is not None]
            if not any(
                selector_matches(object_selector, (o.get("metadata") or {}).get("labels") or {}) for o in candidates
            ):
                return False
        return True

    def _activation(self, request: AdmissionRequest, variables: Mapping[str, str]) -> dict[str, Any]:
        namespace = self._store.get("namespaces", ("", request.namespace)) if request.namespace else None
        body: Obj = {
            "kind": {
                "group": request.resource.group,
                "version": request.resource.version,
                "kind": request.resource.kind,
            },
            "resource": {
                "group": request.resource.group,
                "version": request.resource.version,
                "resource": request.resource.plural,
            },
            "operation": request.operation,
            "userInfo": {"username": request.user.name, "groups": list(request.user.groups)},
            "dryRun": request.dry_run,
        }
        # `admission/v1` AdmissionRequest leaves these out when empty (`omitempty`), and CEL sees them absent
        for key, value in (
            ("subResource", request.subresource),
            ("name", request.name),
            ("namespace", request.namespace),
            ("options", request.options),
        ):
            if value:
                body[key] = value
        activation: dict[str, Any] = {
            "object": json_to_cel(request.obj),
            "oldObject": json_to_cel(request.old),
            "request": json_to_cel(body),
            "params": None,
            "namespaceObject": json_to_cel(namespace),
        }
        activation["variables"] = _Variables(variables, activation)
        return activation

    def _validate(self, spec: Mapping[str, Any], request: AdmissionRequest) -> None:
        fail = (spec.get("failurePolicy") or "Fail") == "Fail"
        declared = {str(v.get("name")): str(v.get("expression")) for v in spec.get("variables") or ()}
        activation = self._activation(request, declared)
        for condition in spec.get("matchConditions") or ():
            expression = str(condition.get("expression"))
            result = _evaluate(expression, activation)
            if isinstance(result, CELEvalError):
                if fail:
                    raise _Denied(f"expression '{expression}' resulted in error: {result.args[0]}", "Invalid")
                return
            if result is not True and result != celtypes.BoolType(True):
                return
        for validation in spec.get("validations") or ():
            expression = str(validation.get("expression"))
            result = _evaluate(expression, activation)
            reason = str(validation.get("reason") or "Invalid")
            if isinstance(result, CELEvalError):
                if fail:
                    raise _Denied(f"expression '{expression}' resulted in error: {result.args[0]}", reason)
                continue
            if result is True or result == celtypes.BoolType(True):
                continue
            raise _Denied(self._message(validation, expression, activation), reason)

    @staticmethod
    def _message(validation: Mapping[str, Any], expression: str, activation: Mapping[str, Any]) -> str:
        text = validation.get("messageExpression")
        if text:
            value = _evaluate(str(text), activation)
            if isinstance(value, str | celtypes.StringType) and str(value).strip() and "\n" not in str(value):
                return str(value)
        message = validation.get("message")
        return str(message) if message else f"failed expression: {expression}"

    @staticmethod
    def _denial(request: AdmissionRequest, policy: Obj, binding: Obj, denied: _Denied) -> ApiError:
        message = (
            f"ValidatingAdmissionPolicy '{policy['metadata']['name']}' with binding '{binding['metadata']['name']}' "
            f"denied request: {denied.message}"
        )
        resource = request.resource
        qualified = f"{resource.plural}.{resource.group}" if resource.group else resource.plural
        details: dict[str, Any] = {"kind": resource.plural, "causes": [{"message": message}]}
        if request.name:
            details["name"] = request.name
        if resource.group:
            details["group"] = resource.group
        named = f' "{request.name}"' if request.name else ""
        return ApiError(
            _CODES.get(denied.reason, 422), denied.reason, f"{qualified}{named} is forbidden: {message}", details
        )

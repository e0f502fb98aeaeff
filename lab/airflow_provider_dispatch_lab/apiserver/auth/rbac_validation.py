"""Defaulting and validation of the RBAC kinds (Role, ClusterRole, RoleBinding, ClusterRoleBinding).

`schema_builtin.KIND_RULES` uses these for the `rbac.authorization.k8s.io/v1` kinds; fields and pruning come,
as for the other built-in kinds, from the client models (`V1Role`, `V1PolicyRule`, `RbacV1Subject`, ...).

- Defaulting is `pkg/apis/rbac/v1/defaults.go`: a binding's `roleRef.apiGroup` defaults to
  `rbac.authorization.k8s.io`, a `User` or `Group` subject's `apiGroup` too, a `ServiceAccount` subject's to ""
  (which, `omitempty`, is stored as no field at all, as the real API server answers).
- Validation is `pkg/apis/rbac/validation/validation.go`: names are only required to be valid path segments
  (`minimalNameRequirements`, `path.IsValidPathSegmentName`: not `.` or `..`, no `/` or `%`), so
  `system:discovery` is a valid name; `validatePolicyRule` (verbs required; non-resource URLs only in
  ClusterRoles and never mixed with resources; resource rules need apiGroups and resources; resourceNames only
  with a single resource); `ValidateRoleBinding`/`ValidateClusterRoleBinding` (roleRef group, kind, name;
  subjects by kind: a ServiceAccount needs a DNS-subdomain name, no apiGroup, and a namespace in a
  ClusterRoleBinding); and on update `cannot change roleRef`.

Not reproduced: the escalation check of `pkg/registry/rbac/*/policybased/storage.go` (a user may only grant
permissions they hold, or must have `escalate`/`bind`), and ClusterRole aggregation (the
`clusterrole-aggregation` controller filling `rules` from `aggregationRule`): in the lab only `system:masters`
writes RBAC objects, and nothing relies on aggregated roles.
"""

from __future__ import annotations

import json
from typing import Any

from airflow_provider_dispatch_lab.apiserver.validation import schema_fields as f
from airflow_provider_dispatch_lab.apiserver.validation import schema_meta
from airflow_provider_dispatch_lab.apiserver.validation.schema_fields import FieldCause

Obj = dict[str, Any]
GROUP = "rbac.authorization.k8s.io"


def path_segment_name(name: str) -> list[str]:
    """`path.IsValidPathSegmentName`."""
    if name in (".", ".."):
        return [f"may not be '{name}'"]
    return [f"may not contain '{c}'" for c in ("/", "%") if c in name]


def _go_strings(values: list[Any]) -> str:
    """A `[]string` as `ErrorBody` prints it: JSON (`schema_fields.go_value`; seen on the real API server)."""
    return f.go_json([str(v) for v in values])


def _invalid_typed(path: str, rendered: str, detail: str) -> FieldCause:
    """`field.Invalid` of a typed Go value, whose text the caller renders."""
    return FieldCause(path, f.INVALID, f"Invalid value: {rendered}: {detail}")


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


# ------------------------------------------------------------------------------------------------ defaulting


def default_binding(binding: Obj) -> None:
    """`SetDefaults_RoleBinding`, `SetDefaults_ClusterRoleBinding`, `SetDefaults_Subject`."""
    role_ref = binding.get("roleRef")
    if isinstance(role_ref, dict) and not role_ref.get("apiGroup"):
        role_ref["apiGroup"] = GROUP
    for subject in _list(binding.get("subjects")):
        if isinstance(subject, dict) and not subject.get("apiGroup"):
            if subject.get("kind") in ("User", "Group"):
                subject["apiGroup"] = GROUP
            elif subject.get("kind") == "ServiceAccount":
                # "" is the default, and the field is `omitempty`: the stored object has no apiGroup at all
                subject.pop("apiGroup", None)


# ------------------------------------------------------------------------------------------------ validation


def _validate_rule(rule: Any, namespaced: bool, path: str) -> list[FieldCause]:
    """`validatePolicyRule`."""
    if not isinstance(rule, dict):
        return []
    causes: list[FieldCause] = []
    if not _list(rule.get("verbs")):
        causes.append(f.required(f.child(path, "verbs"), "verbs must contain at least one value"))
    urls = _list(rule.get("nonResourceURLs"))
    if urls:
        at = f.child(path, "nonResourceURLs")
        if namespaced:
            causes.append(_invalid_typed(at, _go_strings(urls), "namespaced rules cannot apply to non-resource URLs"))
        if _list(rule.get("apiGroups")) or _list(rule.get("resources")) or _list(rule.get("resourceNames")):
            causes.append(
                _invalid_typed(
                    at, _go_strings(urls), "rules cannot apply to both regular resources and non-resource URLs"
                )
            )
        return causes
    if not _list(rule.get("apiGroups")):
        causes.append(f.required(f.child(path, "apiGroups"), "resource rules must supply at least one api group"))
    if not _list(rule.get("resources")):
        causes.append(f.required(f.child(path, "resources"), "resource rules must supply at least one resource"))
    if _list(rule.get("resourceNames")) and len(_list(rule.get("resources"))) > 1:
        causes.append(f.required(f.child(path, "resourceNames"), "resource names cannot apply to multiple resources"))
    return causes


def _validate_rules(role: Obj, namespaced: bool) -> list[FieldCause]:
    causes: list[FieldCause] = []
    for i, rule in enumerate(_list(role.get("rules"))):
        causes.extend(_validate_rule(rule, namespaced, f.index("rules", i)))
    return causes


def validate_role(role: Obj) -> list[FieldCause]:
    return _validate_rules(role, namespaced=True)


def validate_cluster_role(role: Obj) -> list[FieldCause]:
    return _validate_rules(role, namespaced=False)


def _validate_subject(subject: Any, namespaced: bool, path: str) -> list[FieldCause]:
    """`validateRoleBindingSubject`."""
    if not isinstance(subject, dict):
        return []
    causes: list[FieldCause] = []
    name, kind = str(subject.get("name") or ""), str(subject.get("kind") or "")
    api_group = str(subject.get("apiGroup") or "")
    if not name:
        causes.append(f.required(f.child(path, "name")))
    if kind == "ServiceAccount":
        if name:
            causes.extend(f.invalid(f.child(path, "name"), name, m) for m in schema_meta.dns1123_subdomain(name))
        if api_group:
            causes.append(f.not_supported(f.child(path, "apiGroup"), api_group, [""]))
        if not namespaced and not subject.get("namespace"):
            causes.append(f.required(f.child(path, "namespace")))
    elif kind in ("User", "Group"):
        if not name:
            causes.append(f.invalid(f.child(path, "name"), name, f"{kind.lower()} name cannot be empty"))
        if api_group != GROUP:
            causes.append(f.not_supported(f.child(path, "apiGroup"), api_group, [GROUP]))
    else:
        causes.append(f.not_supported(f.child(path, "kind"), kind, ["ServiceAccount", "User", "Group"]))
    return causes


def _validate_binding(binding: Obj, namespaced: bool) -> list[FieldCause]:
    """`ValidateRoleBinding` (namespaced) / `ValidateClusterRoleBinding`."""
    causes: list[FieldCause] = []
    role_ref = binding.get("roleRef")
    role_ref = role_ref if isinstance(role_ref, dict) else {}
    api_group = str(role_ref.get("apiGroup") or "")
    if api_group != GROUP:
        causes.append(f.not_supported("roleRef.apiGroup", api_group, [GROUP]))
    kinds = ["Role", "ClusterRole"] if namespaced else ["ClusterRole"]
    kind = str(role_ref.get("kind") or "")
    if kind not in kinds:
        causes.append(f.not_supported("roleRef.kind", kind, kinds))
    name = str(role_ref.get("name") or "")
    if not name:
        causes.append(f.required("roleRef.name"))
    else:
        causes.extend(f.invalid("roleRef.name", name, m) for m in path_segment_name(name))
    for i, subject in enumerate(_list(binding.get("subjects"))):
        causes.extend(_validate_subject(subject, namespaced, f.index("subjects", i)))
    return causes


def validate_role_binding(binding: Obj) -> list[FieldCause]:
    return _validate_binding(binding, namespaced=True)


def validate_cluster_role_binding(binding: Obj) -> list[FieldCause]:
    return _validate_binding(binding, namespaced=False)


def validate_binding_update(new: Obj, old: Obj) -> list[FieldCause]:
    """`ValidateRoleBindingUpdate` / `ValidateClusterRoleBindingUpdate`: the roleRef is immutable."""
    new_ref, old_ref = new.get("roleRef") or {}, old.get("roleRef") or {}
    go_fields = {"APIGroup": "apiGroup", "Kind": "kind", "Name": "name"}
    if all(new_ref.get(k) == old_ref.get(k) for k in go_fields.values()):
        return []
    # JSON of the internal `rbac.RoleRef`, which has no json tags: its Go field names, in their order
    shown = ",".join(f"{json.dumps(go)}:{f.go_json(str(new_ref.get(k) or ''))}" for go, k in go_fields.items())
    return [_invalid_typed("roleRef", f"{{{shown}}}", "cannot change roleRef")]

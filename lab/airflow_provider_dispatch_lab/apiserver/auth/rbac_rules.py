"""RBAC rule matching, exactly as the apiserver's RBAC authorizer matches: pure functions over plain JSON.

A request is allowed when one rule of one role bound to the user allows it. Matching follows
`kubernetes/kubernetes:plugin/pkg/auth/authorizer/rbac/rbac.go` (`RuleAllows`, `RulesAllow`) and its helpers in
`pkg/apis/rbac/v1/evaluation_helpers.go` (`VerbMatches`, `APIGroupMatches`, `ResourceMatches`,
`ResourceNameMatches`, `NonResourceURLMatches`):

- a resource request matches a rule when the verb, the API group, the resource and the name all match; the
  resource is `resource/subresource` for a subresource, so a rule on `pods` does NOT cover `pods/status`, while
  `*` covers everything and `*/status` covers every `status` subresource;
- `resourceNames` empty means every name; otherwise the request's name must be listed, so a list, a watch or a
  create (which carry no name) never matches a rule with `resourceNames`;
- a non-resource request (`/version`, `/apis/...`) matches on the verb and the path, where a rule URL ending in
  `*` is a prefix.

Which bindings apply to a user follows `pkg/registry/rbac/validation/rule.go` (`appliesTo`, `appliesToUser`): a
`User` subject by name, a `Group` subject by one of the user's groups, a `ServiceAccount` subject by the user
name `system:serviceaccount:<namespace>:<name>`, where a RoleBinding's subject without a namespace means the
binding's own namespace and a ClusterRoleBinding's never matches. The texts that name the source of an
allowance (`RBAC: allowed by ClusterRoleBinding "x" of ClusterRole "y" to Group "z"`) are the describers of the
same file (`describeSubject`, `clusterRoleBindingDescriber`, `roleBindingDescriber`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from airflow_provider_dispatch_lab.apiserver.auth.auth import UserInfo
from airflow_provider_dispatch_lab.apiserver.requests import RequestInfo

ALL = "*"
"""`rbacv1.VerbAll`, `APIGroupAll`, `ResourceAll`, `NonResourceAll`."""
SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"
"""`apiserver/pkg/authentication/serviceaccount/util.go` `ServiceAccountUsernamePrefix`."""


def _strings(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list):
        return ()
    return tuple(item for item in value if isinstance(item, str))


@dataclass(frozen=True)
class PolicyRule:
    """One `rbacv1.PolicyRule`, read from an object in the store."""

    verbs: tuple[str, ...] = ()
    api_groups: tuple[str, ...] = ()
    resources: tuple[str, ...] = ()
    resource_names: tuple[str, ...] = ()
    non_resource_urls: tuple[str, ...] = ()

    @classmethod
    def from_json(cls, rule: Mapping[str, Any]) -> PolicyRule:
        return cls(
            verbs=_strings(rule.get("verbs")),
            api_groups=_strings(rule.get("apiGroups")),
            resources=_strings(rule.get("resources")),
            resource_names=_strings(rule.get("resourceNames")),
            non_resource_urls=_strings(rule.get("nonResourceURLs")),
        )

    def as_json(self) -> dict[str, list[str]]:
        """The rule as a role's `rules` entry carries it, its empty lists left out."""
        fields = (
            ("verbs", self.verbs),
            ("apiGroups", self.api_groups),
            ("resources", self.resources),
            ("resourceNames", self.resource_names),
            ("nonResourceURLs", self.non_resource_urls),
        )
        return {key: list(values) for key, values in fields if values}


def rules_of(role: Mapping[str, Any]) -> tuple[PolicyRule, ...]:
    """The `rules` of a Role or ClusterRole."""
    rules = role.get("rules")
    if not isinstance(rules, list):
        return ()
    return tuple(PolicyRule.from_json(rule) for rule in rules if isinstance(rule, dict))


def verb_matches(rule: PolicyRule, verb: str) -> bool:
    return any(candidate in (ALL, verb) for candidate in rule.verbs)


def api_group_matches(rule: PolicyRule, group: str) -> bool:
    return any(candidate in (ALL, group) for candidate in rule.api_groups)


def resource_matches(rule: PolicyRule, combined_resource: str, subresource: str) -> bool:
    """`ResourceMatches`: `*`, the exact `resource[/subresource]`, or `*/<subresource>` for a subresource."""
    for candidate in rule.resources:
        if candidate in (ALL, combined_resource):
            return True
        if not subresource:
            continue
        if len(candidate) == len(subresource) + 2 and candidate.startswith("*/") and candidate.endswith(subresource):
            return True
    return False


def resource_name_matches(rule: PolicyRule, name: str) -> bool:
    return not rule.resource_names or name in rule.resource_names


def non_resource_url_matches(rule: PolicyRule, path: str) -> bool:
    for candidate in rule.non_resource_urls:
        if candidate in (ALL, path):
            return True
        if candidate.endswith("*") and path.startswith(candidate.rstrip("*")):
            return True
    return False


def rule_allows(request: RequestInfo, rule: PolicyRule) -> bool:
    """`RuleAllows`."""
    if request.is_resource:
        subresource = request.subresource or ""
        combined = f"{request.resource}/{subresource}" if subresource else request.resource
        return (
            verb_matches(rule, request.verb)
            and api_group_matches(rule, request.group)
            and resource_matches(rule, combined, subresource)
            and resource_name_matches(rule, request.name or "")
        )
    return verb_matches(rule, request.verb) and non_resource_url_matches(rule, request.path)


def rules_allow(request: RequestInfo, rules: Iterable[PolicyRule]) -> bool:
    """`RulesAllow`: any rule allows."""
    return any(rule_allows(request, rule) for rule in rules)


# ------------------------------------------------------------------------------------------------- subjects


@dataclass(frozen=True)
class Subject:
    """One `rbacv1.Subject` of a binding."""

    kind: str
    name: str
    namespace: str = ""

    @classmethod
    def from_json(cls, subject: Mapping[str, Any]) -> Subject:
        return cls(str(subject.get("kind") or ""), str(subject.get("name") or ""), str(subject.get("namespace") or ""))


def subjects_of(binding: Mapping[str, Any]) -> tuple[Subject, ...]:
    subjects = binding.get("subjects")
    if not isinstance(subjects, list):
        return ()
    return tuple(Subject.from_json(s) for s in subjects if isinstance(s, dict))


def service_account_username(namespace: str, name: str) -> str:
    """`serviceaccount.MakeUsername`."""
    return f"{SERVICE_ACCOUNT_PREFIX}{namespace}:{name}"


def service_account_groups(namespace: str) -> tuple[str, str]:
    """`serviceaccount.MakeGroupNames`: every service account, and those of its namespace."""
    return ("system:serviceaccounts", f"system:serviceaccounts:{namespace}")


def applies_to_user(user: UserInfo, subject: Subject, namespace: str) -> bool:
    """`appliesToUser`; `namespace` is the RoleBinding's namespace, "" for a ClusterRoleBinding."""
    if subject.kind == "User":
        return user.name == subject.name
    if subject.kind == "Group":
        return subject.name in user.groups
    if subject.kind == "ServiceAccount":
        account_namespace = subject.namespace or namespace
        if not account_namespace:
            return False
        return user.name == service_account_username(account_namespace, subject.name)
    return False


def applies_to(user: UserInfo, subjects: Sequence[Subject], namespace: str) -> int | None:
    """`appliesTo`: the index of the first subject that is `user`, or None."""
    for index, subject in enumerate(subjects):
        if applies_to_user(user, subject, namespace):
            return index
    return None


def describe_subject(subject: Subject, binding_namespace: str) -> str:
    """`describeSubject`: service accounts as `name/namespace` (sic: the upstream order)."""
    if subject.kind == "ServiceAccount":
        return f'{subject.kind} "{subject.name}/{subject.namespace or binding_namespace}"'
    return f'{subject.kind} "{subject.name}"'


def describe_binding(
    binding_kind: str,
    binding_name: str,
    binding_namespace: str,
    role_kind: str,
    role_name: str,
    subject: Subject,
) -> str:
    """`clusterRoleBindingDescriber.String` / `roleBindingDescriber.String` (a RoleBinding as `name/namespace`)."""
    shown = f"{binding_name}/{binding_namespace}" if binding_kind == "RoleBinding" else binding_name
    return f'{binding_kind} "{shown}" of {role_kind} "{role_name}" to {describe_subject(subject, binding_namespace)}'

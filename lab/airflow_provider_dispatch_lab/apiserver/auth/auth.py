"""Who is asking, and may they: the interfaces the server calls on every request.

The real apiserver authenticates (bearer tokens here), then authorizes the request's attributes (verb, API group,
resource, subresource, namespace, name) before anything else happens (`apiserver/pkg/endpoints/filters/
authentication.go`, `authorization.go`). Without an authenticator and authorizer the lab lets everyone do
everything, as a cluster with `--authorization-mode=AlwaysAllow` would; `lab.apiserver.auth.rbac` supplies the token and
role-based ones.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from airflow_provider_dispatch_lab.apiserver.errors import aggregate
from airflow_provider_dispatch_lab.apiserver.requests import RequestInfo


@dataclass(frozen=True)
class UserInfo:
    """`user.Info`: the name, the groups, and the uid and extra an authenticator may add (a service account's
    uid and its token's `authentication.kubernetes.io/credential-id`), which `kubectl auth whoami` shows."""

    name: str
    groups: tuple[str, ...] = field(default=())
    uid: str = ""
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()


ANONYMOUS_ADMIN = UserInfo("lab-admin", ("system:masters", "system:authenticated"))


@dataclass(frozen=True)
class Decision:
    allowed: bool
    reason: str = ""


class Authenticator(Protocol):
    def authenticate(self, authorization: str | None) -> UserInfo | None:
        """The user behind an `Authorization` header, or None for a request to refuse with 401."""


class Authorizer(Protocol):
    def authorize(self, user: UserInfo, request: RequestInfo) -> Decision:
        """Whether `user` may make `request` (a resource request or a non-resource path)."""


class RuleResolver(Protocol):
    """An authorizer that can also say which rules apply to a user (`authorizer.RuleResolver`), for
    SelfSubjectRulesReview: `rules_for` answers its `status` (`SubjectRulesReviewStatus` as JSON)."""

    def rules_for(self, user: UserInfo, namespace: str) -> dict[str, Any]:
        """`resourceRules`, `nonResourceRules`, `incomplete` and, when resolving failed, `evaluationError`."""


def rules_status(
    rules: Iterable[Mapping[str, Any]], *, incomplete: bool = False, errors: Sequence[str] = ()
) -> dict[str, Any]:
    """A `SubjectRulesReviewStatus` from policy rules as JSON: a rule with resources becomes a resource rule, one
    with non-resource URLs a non-resource rule (both, if it has both), each field kept only when not empty, as
    `RBACAuthorizer.RulesFor` and `selfsubjectrulesreview/rest.go` build them and Go's `omitempty` writes them."""
    resource_rules: list[dict[str, Any]] = []
    non_resource_rules: list[dict[str, Any]] = []
    for rule in rules:
        verbs = list(rule.get("verbs") or [])
        if rule.get("resources"):
            entry = {"verbs": verbs}
            entry.update({k: list(rule[k]) for k in ("apiGroups", "resources", "resourceNames") if rule.get(k)})
            resource_rules.append(entry)
        if rule.get("nonResourceURLs"):
            non_resource_rules.append({"verbs": verbs, "nonResourceURLs": list(rule["nonResourceURLs"])})
    status: dict[str, Any] = {
        "resourceRules": resource_rules,
        "nonResourceRules": non_resource_rules,
        "incomplete": incomplete,
    }
    if errors:
        status["evaluationError"] = aggregate(errors)
    return status


class AllowAnyone:
    """Authenticates every request as the lab's admin and allows everything: `--authorization-mode=AlwaysAllow`,
    which allows with no reason and resolves every user's rules to `*` (`apiserver/pkg/authorization/
    authorizerfactory/builtin.go` `alwaysAllowAuthorizer`)."""

    def authenticate(self, authorization: str | None) -> UserInfo | None:
        return ANONYMOUS_ADMIN

    def authorize(self, user: UserInfo, request: RequestInfo) -> Decision:
        return Decision(True, "")

    def rules_for(self, user: UserInfo, namespace: str) -> dict[str, Any]:
        everything = {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "nonResourceURLs": ["*"]}
        return rules_status([everything])

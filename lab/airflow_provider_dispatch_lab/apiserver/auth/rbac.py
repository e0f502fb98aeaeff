"""The lab's authorizer with RBAC on: `--authorization-mode=RBAC` over the RBAC objects in the lab's store.

The chain is the kube-apiserver's (`pkg/kubeapiserver/authorizer/config.go` `New`): first the privileged-group
authorizer, which allows every request of a member of `system:masters` and gives no reason
(`apiserver/pkg/authorization/authorizerfactory/builtin.go` `NewPrivilegedGroups`); then RBAC
(`plugin/pkg/auth/authorizer/rbac/rbac.go` `RBACAuthorizer.Authorize`). The Node authorizer of a real cluster
only concerns kubelets' `system:node:<name>` users, which the lab does not authenticate, so it is left out.

RBAC visits the rules of every ClusterRoleBinding that applies to the user, then of every RoleBinding in the
request's namespace that does (`pkg/registry/rbac/validation/rule.go` `VisitRulesFor`); a RoleBinding may bind
a ClusterRole, whose rules then apply in that namespace only. The first allowing rule decides, with the reason
`RBAC: allowed by <binding>`. A binding whose role is missing contributes an error instead of rules
(`clusterrole.rbac.authorization.k8s.io "x" not found`), and a denial carries those errors as its reason
(`RBAC: <aggregate>`), as a SubjectAccessReview shows. Nothing is ever denied outright: RBAC has no deny rules.

A real apiserver reads roles and bindings through informers. The lab's authorizer is the apiserver's own, so it
reads the store directly, and caches, per user, the rules that apply cluster-wide and, per user and namespace,
those of the namespace's RoleBindings. Any write to an RBAC kind drops the caches (a store listener), so an
object created through the API takes effect on the next request: faster than informers, never staler. The order
in which bindings are visited is the store's (by namespace and name); the real order (the informer's map) is
unspecified, and only the `allowed by` text can show it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from airflow_provider_dispatch_lab import kinds
from airflow_provider_dispatch_lab.apiserver.auth.auth import Decision, UserInfo, rules_status
from airflow_provider_dispatch_lab.apiserver.auth.rbac_rules import (
    PolicyRule,
    applies_to,
    describe_binding,
    rule_allows,
    rules_of,
    subjects_of,
)
from airflow_provider_dispatch_lab.apiserver.errors import aggregate
from airflow_provider_dispatch_lab.apiserver.requests import RequestInfo
from airflow_provider_dispatch_lab.apiserver.storage.store import Store, WatchEvent

PRIVILEGED_GROUP = "system:masters"
"""`user.SystemPrivilegedGroup`."""

RBAC_RESOURCES = frozenset(
    coords.resource for coords in (kinds.ROLE, kinds.CLUSTER_ROLE, kinds.ROLE_BINDING, kinds.CLUSTER_ROLE_BINDING)
)
_CACHE_LIMIT = 4096
"""Resolutions kept before the cache starts afresh: a bound on memory, far above the lab's users x namespaces."""


@dataclass(frozen=True)
class Resolution:
    """The rules that apply to one user in one scope, each with the text naming where it comes from, and the
    errors met while resolving role references."""

    rules: tuple[tuple[str, PolicyRule], ...]
    errors: tuple[str, ...]


class RbacAuthorizer:
    """The privileged-group and RBAC authorizers over `store`; `authorize` is called on every request."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._cluster: dict[tuple[str, tuple[str, ...]], Resolution] = {}
        self._namespaced: dict[tuple[str, tuple[str, ...], str], Resolution] = {}
        self._remove_listener = store.add_listener(self._on_write)

    def close(self) -> None:
        """Stop following the store's writes."""
        self._remove_listener()

    def _on_write(self, event: WatchEvent) -> None:
        if event.resource in RBAC_RESOURCES:
            self._cluster.clear()
            self._namespaced.clear()

    def authorize(self, user: UserInfo, request: RequestInfo) -> Decision:
        if PRIVILEGED_GROUP in user.groups:
            return Decision(True, "")
        errors: list[str] = []
        scopes = [self._cluster_rules(user)]
        if request.namespace:
            scopes.append(self._namespace_rules(user, request.namespace))
        for scope in scopes:
            for source, rule in scope.rules:
                if rule_allows(request, rule):
                    return Decision(True, f"RBAC: allowed by {source}")
            errors.extend(scope.errors)
        return Decision(False, f"RBAC: {aggregate(errors)}" if errors else "")

    def rules_for(self, user: UserInfo, namespace: str) -> dict[str, Any]:
        """`RBACAuthorizer.RulesFor`: the rules of every binding that applies to the user, cluster-wide then in
        `namespace`, in the order `authorize` visits them; the resolution errors as `evaluationError`. Members of
        `system:masters` get cluster-admin's rules through its binding: the privileged-group authorizer is no
        rule resolver (`pkg/kubeapiserver/authorizer/reload.go` adds it to the authorizers only)."""
        scopes = [self._cluster_rules(user)]
        if namespace:
            scopes.append(self._namespace_rules(user, namespace))
        rules = [rule.as_json() for scope in scopes for _, rule in scope.rules]
        return rules_status(rules, errors=[error for scope in scopes for error in scope.errors])

    # ----------------------------------------------------------------------------------------- resolution

    def _cluster_rules(self, user: UserInfo) -> Resolution:
        key = (user.name, user.groups)
        found = self._cluster.get(key)
        if found is None:
            if len(self._cluster) >= _CACHE_LIMIT:
                self._cluster.clear()
            found = self._cluster[key] = self._resolve(user, kinds.CLUSTER_ROLE_BINDING.resource, "")
        return found

    def _namespace_rules(self, user: UserInfo, namespace: str) -> Resolution:
        key = (user.name, user.groups, namespace)
        found = self._namespaced.get(key)
        if found is None:
            if len(self._namespaced) >= _CACHE_LIMIT:
                self._namespaced.clear()
            found = self._namespaced[key] = self._resolve(user, kinds.ROLE_BINDING.resource, namespace)
        return found

    def _resolve(self, user: UserInfo, bindings: str, namespace: str) -> Resolution:
        """The rules of the bindings of one kind that apply to `user` ("" namespace: ClusterRoleBindings)."""
        binding_kind = "RoleBinding" if namespace else "ClusterRoleBinding"
        rules: list[tuple[str, PolicyRule]] = []
        errors: list[str] = []
        for (_, binding_name), binding in self._store.scan(bindings, namespace if namespace else None):
            subjects = subjects_of(binding)
            index = applies_to(user, subjects, namespace)
            if index is None:
                continue
            role_ref: dict[str, Any] = binding.get("roleRef") or {}
            role_kind, role_name = str(role_ref.get("kind") or ""), str(role_ref.get("name") or "")
            role_rules = self._role_rules(role_kind, role_name, namespace)
            if isinstance(role_rules, str):
                errors.append(role_rules)
                continue
            source = describe_binding(binding_kind, binding_name, namespace, role_kind, role_name, subjects[index])
            rules.extend((source, rule) for rule in role_rules)
        return Resolution(tuple(rules), tuple(errors))

    def _role_rules(self, kind: str, name: str, namespace: str) -> tuple[PolicyRule, ...] | str:
        """`GetRoleReferenceRules`: the role's rules, or the error text when it cannot be resolved."""
        if kind == "Role":
            role = self._store.get(kinds.ROLE.resource, (namespace, name)) if namespace else None
            return rules_of(role) if role is not None else f'role.rbac.authorization.k8s.io "{name}" not found'
        if kind == "ClusterRole":
            role = self._store.get(kinds.CLUSTER_ROLE.resource, ("", name))
            if role is None:
                return f'clusterrole.rbac.authorization.k8s.io "{name}" not found'
            return rules_of(role)
        return f'unsupported role reference kind: "{kind}"'

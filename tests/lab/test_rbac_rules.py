"""RBAC as pure functions: rule matching, subjects, the texts that name a source, token parsing.

The cases follow the upstream semantics (`plugin/pkg/auth/authorizer/rbac/rbac.go` `RuleAllows`,
`pkg/apis/rbac/v1/evaluation_helpers.go`, `pkg/registry/rbac/validation/rule.go`); the API-level behaviour is in
test_rbac.py.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from airflow_provider_dispatch_lab import kinds
from airflow_provider_dispatch_lab.apiserver.auth.auth import UserInfo
from airflow_provider_dispatch_lab.apiserver.auth.rbac import RbacAuthorizer
from airflow_provider_dispatch_lab.apiserver.auth.rbac_rules import (
    PolicyRule,
    Subject,
    applies_to,
    describe_binding,
    rule_allows,
)
from airflow_provider_dispatch_lab.apiserver.auth.rbac_tokens import (
    ServiceAccountTokens,
    StaticTokens,
    TokenAuthenticator,
)
from airflow_provider_dispatch_lab.apiserver.errors import aggregate
from airflow_provider_dispatch_lab.apiserver.requests import RequestInfo, parse_request
from airflow_provider_dispatch_lab.apiserver.storage.store import Store
from airflow_provider_dispatch_lab.clock import LabClock


def _request(method: str, path: str, watch: bool = False) -> RequestInfo:
    return parse_request(method, path, watch)


def _rule(verbs: list[str], groups: list[str], resources: list[str], names: list[str] | None = None) -> PolicyRule:
    return PolicyRule.from_json({"verbs": verbs, "apiGroups": groups, "resources": resources, "resourceNames": names})


PODS = "/api/v1/namespaces/ml/pods"
TRAINJOBS = "/apis/trainer.kubeflow.org/v1alpha1/namespaces/ml/trainjobs"


@pytest.mark.parametrize(
    ("rule", "method", "path", "watch", "allowed"),
    [
        (_rule(["get"], [""], ["pods"]), "GET", f"{PODS}/p", False, True),
        (_rule(["get"], [""], ["pods"]), "GET", PODS, False, False),  # a list is not a get
        (_rule(["list"], [""], ["pods"]), "GET", PODS, True, False),  # a watch is not a list
        (_rule(["watch"], [""], ["pods"]), "GET", PODS, True, True),
        (_rule(["*"], [""], ["pods"]), "DELETE", PODS, False, True),  # deletecollection under *
        (_rule(["get"], ["*"], ["trainjobs"]), "GET", f"{TRAINJOBS}/t", False, True),
        (_rule(["get"], [""], ["trainjobs"]), "GET", f"{TRAINJOBS}/t", False, False),  # wrong group
        (_rule(["get"], ["trainer.kubeflow.org"], ["*"]), "GET", f"{TRAINJOBS}/t", False, True),
        (_rule(["patch"], [""], ["pods"]), "PATCH", f"{PODS}/p/status", False, False),  # pods != pods/status
        (_rule(["patch"], [""], ["pods/status"]), "PATCH", f"{PODS}/p/status", False, True),
        (_rule(["patch"], [""], ["pods/status"]), "PATCH", f"{PODS}/p", False, False),
        (_rule(["patch"], [""], ["*/status"]), "PATCH", f"{PODS}/p/status", False, True),
        (_rule(["patch"], [""], ["*/status"]), "PATCH", f"{PODS}/p", False, False),
        (_rule(["create"], [""], ["*/binding"]), "POST", f"{PODS}/p/status", False, False),
        (_rule(["get"], [""], ["pods"], ["p"]), "GET", f"{PODS}/p", False, True),
        (_rule(["get"], [""], ["pods"], ["p"]), "GET", f"{PODS}/q", False, False),
        (_rule(["list"], [""], ["pods"], ["p"]), "GET", PODS, False, False),  # a list names nothing
        (_rule(["create"], [""], ["pods"], ["p"]), "POST", PODS, False, False),
        (_rule(["get"], [""], ["nodes"]), "GET", "/api/v1/nodes/n1", False, True),
    ],
)
def test_rule_allows_resource_requests(rule: PolicyRule, method: str, path: str, watch: bool, allowed: bool) -> None:
    assert rule_allows(_request(method, path, watch), rule) is allowed


@pytest.mark.parametrize(
    ("urls", "path", "allowed"),
    [
        (["/version"], "/version", True),
        (["/version"], "/version/", False),
        (["/apis/*"], "/apis/batch/v1", True),
        (["/apis/*"], "/apis", False),  # "/apis/" is the prefix
        (["/apis", "/apis/*"], "/apis", True),
        (["*"], "/anything/at/all", True),
        (["/healthz"], "/api", False),
    ],
)
def test_rule_allows_non_resource_urls(urls: list[str], path: str, allowed: bool) -> None:
    rule = PolicyRule.from_json({"verbs": ["get"], "nonResourceURLs": urls})
    assert rule_allows(_request("GET", path), rule) is allowed


def test_non_resource_rule_never_matches_a_resource_request() -> None:
    rule = PolicyRule.from_json({"verbs": ["*"], "nonResourceURLs": ["*"]})
    assert rule_allows(_request("GET", f"{PODS}/p"), rule) is False


SA_USER = UserInfo("system:serviceaccount:ml:runner", ("system:serviceaccounts", "system:serviceaccounts:ml"))


@pytest.mark.parametrize(
    ("subjects", "namespace", "expected"),
    [
        ([Subject("User", "alice")], "", None),
        ([Subject("Group", "system:serviceaccounts:ml")], "", 0),
        ([Subject("User", "alice"), Subject("ServiceAccount", "runner", "ml")], "", 1),
        ([Subject("ServiceAccount", "runner")], "ml", 0),  # a RoleBinding's own namespace
        ([Subject("ServiceAccount", "runner")], "", None),  # a ClusterRoleBinding: never
        ([Subject("ServiceAccount", "runner")], "other", None),
        ([Subject("ServiceAccount", "runner", "ml")], "other", 0),  # an explicit namespace wins
        ([Subject("Robot", "system:serviceaccount:ml:runner")], "ml", None),
    ],
)
def test_applies_to_the_first_matching_subject(subjects: list[Subject], namespace: str, expected: int | None) -> None:
    assert applies_to(SA_USER, subjects, namespace) == expected


@pytest.mark.parametrize(
    ("args", "text"),
    [
        (
            ("ClusterRoleBinding", "crb", "", "ClusterRole", "view", Subject("Group", "g")),
            'ClusterRoleBinding "crb" of ClusterRole "view" to Group "g"',
        ),
        (
            ("RoleBinding", "rb", "ml", "Role", "r", Subject("ServiceAccount", "runner")),
            'RoleBinding "rb/ml" of Role "r" to ServiceAccount "runner/ml"',
        ),
        (
            ("RoleBinding", "rb", "ml", "ClusterRole", "edit", Subject("User", "alice")),
            'RoleBinding "rb/ml" of ClusterRole "edit" to User "alice"',
        ),
    ],
)
def test_describe_binding_names_sources_as_upstream(args: tuple[str, str, str, str, str, Subject], text: str) -> None:
    assert describe_binding(*args) == text


@pytest.mark.parametrize(
    ("messages", "text"),
    [
        (("a",), "a"),
        (("a", "b"), "[a, b]"),
        (("a", "a"), "a"),
        (("a", "b", "a"), "[a, b]"),
    ],
)
def test_aggregate_formats_as_utilerrors(messages: tuple[str, ...], text: str) -> None:
    assert aggregate(messages) == text


def test_system_masters_is_allowed_without_any_binding() -> None:
    authorizer = RbacAuthorizer(Store())
    request = _request("DELETE", "/api/v1/nodes/n1")
    assert authorizer.authorize(UserInfo("root", ("system:masters",)), request).allowed is True
    assert authorizer.authorize(UserInfo("root", ("system:authenticated",)), request).allowed is False


def test_token_file_records_parse_as_newcsv() -> None:
    tokens = StaticTokens.from_csv('t1,alice,uid1,"dev,ops"\n\nt2,bob,uid2\n,nobody,uid3\n')
    assert tokens.authenticate_token("t1") == UserInfo("alice", ("dev", "ops"), uid="uid1")
    assert tokens.authenticate_token("t2") == UserInfo("bob", (), uid="uid2")
    assert tokens.authenticate_token("") is None


def test_token_file_refuses_short_records() -> None:
    with pytest.raises(ValueError, match="at least 3 columns"):
        StaticTokens.from_csv("t1,alice\n")


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        (None, UserInfo("system:anonymous", ("system:unauthenticated",))),
        ("Basic dXNlcjpwYXNz", UserInfo("system:anonymous", ("system:unauthenticated",))),
        ("Bearer ", UserInfo("system:anonymous", ("system:unauthenticated",))),
        ("Bearer t1", UserInfo("alice", ("dev", "system:authenticated"))),
        ("bearer t1", UserInfo("alice", ("dev", "system:authenticated"))),
        ("Bearer unknown", None),
    ],
)
def test_bearer_tokens_and_anonymous(header: str | None, expected: UserInfo | None) -> None:
    authenticator = TokenAuthenticator(StaticTokens({"t1": UserInfo("alice", ("dev",))}))
    assert authenticator.authenticate(header) == expected


def test_without_anonymous_access_no_credentials_is_401() -> None:
    authenticator = TokenAuthenticator(StaticTokens({}), anonymous=False)
    assert authenticator.authenticate(None) is None


def _account(namespace: str, name: str, uid: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": name, "namespace": namespace, "uid": uid},
    }


def _store_with_account(namespace: str, name: str, uid: str) -> Store:
    store = Store()
    store.put(kinds.SERVICE_ACCOUNT.resource, (namespace, name), _account(namespace, name, uid))
    return store


def test_service_account_token_is_the_account_with_its_groups_uid_and_credential_id() -> None:
    store = _store_with_account("ml", "runner", "u-1")
    tokens = ServiceAccountTokens(store, LabClock(speed=0))
    token = tokens.issue("ml", "runner")
    user = TokenAuthenticator(StaticTokens({}), tokens).authenticate(f"Bearer {token}")
    jti = json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "=="))["jti"]
    assert user == UserInfo(
        "system:serviceaccount:ml:runner",
        ("system:serviceaccounts", "system:serviceaccounts:ml", "system:authenticated"),
        uid="u-1",
        extra=(("authentication.kubernetes.io/credential-id", (f"JTI={jti}",)),),
    )


def test_service_account_token_expires_in_lab_time() -> None:
    clock = LabClock(speed=0)
    tokens = ServiceAccountTokens(_store_with_account("ml", "runner", "u-1"), clock)
    token = tokens.issue("ml", "runner", expiration_seconds=600)
    authenticator = TokenAuthenticator(StaticTokens({}), tokens)
    assert authenticator.authenticate(f"Bearer {token}") is not None
    clock.advance(600)
    assert authenticator.authenticate(f"Bearer {token}") is None


def test_service_account_token_dies_with_its_account() -> None:
    store = _store_with_account("ml", "runner", "u-1")
    tokens = ServiceAccountTokens(store, LabClock(speed=0))
    token = tokens.issue("ml", "runner")
    authenticator = TokenAuthenticator(StaticTokens({}), tokens)
    store.remove(kinds.SERVICE_ACCOUNT.resource, ("ml", "runner"))
    assert authenticator.authenticate(f"Bearer {token}") is None
    store.put(kinds.SERVICE_ACCOUNT.resource, ("ml", "runner"), _account("ml", "runner", "u-2"))
    assert authenticator.authenticate(f"Bearer {token}") is None  # another account of the same name


def test_a_token_signed_by_another_lab_is_unknown() -> None:
    store = _store_with_account("ml", "runner", "u-1")
    foreign = ServiceAccountTokens(store, LabClock(speed=0)).issue("ml", "runner")
    ours = TokenAuthenticator(StaticTokens({}), ServiceAccountTokens(store, LabClock(speed=0)))
    assert ours.authenticate(f"Bearer {foreign}") is None


def test_issuing_for_a_missing_account_is_refused() -> None:
    with pytest.raises(LookupError, match='serviceaccounts "ghost" not found'):
        ServiceAccountTokens(Store(), LabClock(speed=0)).issue("ml", "ghost")

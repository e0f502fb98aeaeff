"""What `Lab(rbac=True)` adds: token authentication, RBAC authorization, the bootstrap policy, the identities.

At start the lab applies, through its own API and as its admin (server-side apply, field manager
`dispatch-lab`), first the part of the apiserver's bootstrap policy that a client meets
(`plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go` `ClusterRoles`, `ClusterRoleBindings`; the
published `testdata/cluster-roles.yaml`): `cluster-admin` bound to `system:masters`; `system:discovery` and
`system:basic-user` bound to `system:authenticated`; `system:public-info-viewer` bound to
`system:authenticated` and `system:unauthenticated`; `system:service-account-issuer-discovery` bound to
`system:serviceaccounts` (so `kubectl auth can-i --list` lists for a service account what a cluster lists). A real
apiserver writes those from a post-start hook; the controllers' and nodes' roles are left out, because the lab's
controllers run as its admin.

Then it applies dispatch's ClusterRoles from the production manifests
(`deploy/rbac/dispatch-clusterroles.yaml`, found by `lab/deploy_manifests.py`) and the lab's ServiceAccounts
with their ClusterRoleBindings (`rbac_manifests/lab-identities.yaml`, package data); and it issues a service
account token for each identity. The identities:

- `admin`: `lab-admin` in `system:masters` (a static token): everything;
- `writer`: `system:serviceaccount:dispatch-system:dispatch-writer`: release, hold, open, and reads, nodes too;
- `reader`: `...:dispatch-reader`: get/list/watch of the same kinds and of nodes, no writes;
- `no-nodes`: `...:dispatch-no-nodes`: the writer without any access to nodes;
- `controller`: `...:dispatch-admission-controller`: the Kueue admission check controller's least privilege.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from importlib import resources as package_data
from pathlib import Path
from typing import Any

import yaml

from airflow_provider_dispatch.dispatch.vocabulary import ApiCoordinates
from airflow_provider_dispatch_lab.apiserver.auth.auth import UserInfo
from airflow_provider_dispatch_lab.apiserver.auth.rbac import PRIVILEGED_GROUP, RbacAuthorizer
from airflow_provider_dispatch_lab.apiserver.auth.rbac_rules import service_account_username
from airflow_provider_dispatch_lab.apiserver.auth.rbac_tokens import (
    ServiceAccountTokens,
    StaticTokens,
    TokenAuthenticator,
)
from airflow_provider_dispatch_lab.apiserver.registry.resources import Registry
from airflow_provider_dispatch_lab.apiserver.storage.store import Store
from airflow_provider_dispatch_lab.client import LabClient
from airflow_provider_dispatch_lab.clock import LabClock
from airflow_provider_dispatch_lab.deploy_manifests import CLUSTER_ROLES, deploy_file

Obj = dict[str, Any]

ADMIN_USER = "lab-admin"
IDENTITY_NAMESPACE = "dispatch-system"
SERVICE_ACCOUNTS = {
    "writer": "dispatch-writer",
    "reader": "dispatch-reader",
    "no-nodes": "dispatch-no-nodes",
    "controller": "dispatch-admission-controller",
}
"""Identity -> its ServiceAccount in `IDENTITY_NAMESPACE` (`rbac_manifests/lab-identities.yaml`)."""
IDENTITIES = ("admin", *SERVICE_ACCOUNTS)
FIELD_MANAGER = "dispatch-lab"
LAB_IDENTITIES = "lab-identities.yaml"
"""The lab's namespace, accounts and bindings (`rbac_manifests/`), applied after the roles."""

_RBAC_API = "rbac.authorization.k8s.io/v1"
DISCOVERY_URLS = [
    *("/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi", "/openapi/*"),
    *("/readyz", "/version", "/version/"),
]
ISSUER_DISCOVERY_URLS = [
    *("/.well-known/openid-configuration", "/.well-known/openid-configuration/", "/openid/v1/jwks"),
    "/openid/v1/jwks/",
]
_BOOTSTRAP_META = {
    "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
    "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
}


def _cluster_role(name: str, rules: list[Obj]) -> Obj:
    return {
        "apiVersion": _RBAC_API,
        "kind": "ClusterRole",
        "metadata": {"name": name, **_BOOTSTRAP_META},
        "rules": rules,
    }


def _group_binding(name: str, *groups: str) -> Obj:
    return {
        "apiVersion": _RBAC_API,
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name, **_BOOTSTRAP_META},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": g} for g in groups],
    }


def bootstrap_policy() -> list[Obj]:
    """The default ClusterRoles and ClusterRoleBindings every cluster has that matter to a client."""
    authenticated, unauthenticated = "system:authenticated", "system:unauthenticated"
    return [
        _cluster_role(
            "cluster-admin",
            [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}, {"nonResourceURLs": ["*"], "verbs": ["*"]}],
        ),
        _cluster_role("system:discovery", [{"nonResourceURLs": DISCOVERY_URLS, "verbs": ["get"]}]),
        _cluster_role(
            "system:basic-user",
            [
                {
                    "apiGroups": ["authorization.k8s.io"],
                    "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                    "verbs": ["create"],
                },
                {"apiGroups": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"], "verbs": ["create"]},
            ],
        ),
        _cluster_role(
            "system:public-info-viewer",
            [{"nonResourceURLs": ["/healthz", "/livez", "/readyz", "/version", "/version/"], "verbs": ["get"]}],
        ),
        _cluster_role(
            "system:service-account-issuer-discovery",
            [{"nonResourceURLs": ISSUER_DISCOVERY_URLS, "verbs": ["get"]}],
        ),
        _group_binding("cluster-admin", PRIVILEGED_GROUP),
        _group_binding("system:discovery", authenticated),
        _group_binding("system:basic-user", authenticated),
        _group_binding("system:public-info-viewer", authenticated, unauthenticated),
        _group_binding("system:service-account-issuer-discovery", "system:serviceaccounts"),
    ]


@lru_cache(maxsize=1)
def dispatch_manifests() -> tuple[Obj, ...]:
    """dispatch's ClusterRoles (deploy/), then the lab's identities (`rbac_manifests/`), parsed once per process."""
    identities = package_data.files("airflow_provider_dispatch_lab").joinpath("rbac_manifests", LAB_IDENTITIES)
    documents: list[Obj] = []
    for source in (deploy_file(CLUSTER_ROLES), identities):
        with source.open("r", encoding="utf-8") as stream:
            documents.extend(d for d in yaml.safe_load_all(stream) if isinstance(d, dict))
    return tuple(documents)


def _coordinates(registry: Registry, document: Obj) -> ApiCoordinates:
    resource = registry.by_kind(str(document.get("apiVersion")), str(document.get("kind")))
    if resource is None:
        raise ValueError(f"the lab does not serve {document.get('apiVersion')} {document.get('kind')}")
    return ApiCoordinates(resource.group, resource.version, resource.plural, resource.kind, resource.namespaced)


async def apply_documents(client: LabClient, registry: Registry, documents: Sequence[Obj]) -> list[Obj]:
    """`kubectl apply --server-side --force-conflicts` of each document, in order; returns the stored objects."""
    stored = []
    for document in documents:
        coords = _coordinates(registry, document)
        meta = document.get("metadata") or {}
        namespace = meta.get("namespace") if coords.namespaced else None
        stored.append(
            await client.patch(
                coords,
                namespace,
                str(meta["name"]),
                document,
                patch_type="apply",
                field_manager=FIELD_MANAGER,
                force=True,
            )
        )
    return stored


class LabRbac:
    """The authenticator and authorizer the lab's server calls, and the identities' tokens."""

    def __init__(self, store: Store, clock: LabClock, registry: Registry, *, admin_tokens: Sequence[str]) -> None:
        self.registry = registry
        self.admin_tokens = tuple(admin_tokens)
        if not self.admin_tokens:
            raise ValueError("the lab needs an admin token to provision RBAC through its API")
        admin = UserInfo(ADMIN_USER, (PRIVILEGED_GROUP,), uid=ADMIN_USER)  # as the real cluster's token file says
        self.service_accounts = ServiceAccountTokens(store, clock)
        self.authenticator = TokenAuthenticator(
            StaticTokens(dict.fromkeys(self.admin_tokens, admin)), self.service_accounts
        )
        self.authorizer = RbacAuthorizer(store)
        self._tokens: dict[str, str] = {"admin": self.admin_tokens[0]}

    async def provision(self, url: str, ca_file: Path | None = None) -> None:
        """Apply the bootstrap policy and the manifests through the API, then issue the identities' tokens."""
        ca = None if ca_file is None else str(ca_file)
        client = LabClient(url, self.admin_tokens[0], user_agent="dispatch-lab-rbac-bootstrap", ca_file=ca)
        try:
            await apply_documents(client, self.registry, [*bootstrap_policy(), *dispatch_manifests()])
        finally:
            await client.close()
        for identity, account in SERVICE_ACCOUNTS.items():
            self._tokens[identity] = self.service_accounts.issue(IDENTITY_NAMESPACE, account)

    def token_for(self, identity: str) -> str:
        """The bearer token of one of `IDENTITIES` (available once the lab has started)."""
        if identity not in IDENTITIES:
            raise KeyError(f"unknown lab identity {identity!r}; the lab provisions {', '.join(IDENTITIES)}")
        token = self._tokens.get(identity)
        if token is None:
            raise RuntimeError(f"the lab identity {identity!r} has no token yet: start the lab first")
        return token

    @staticmethod
    def username_of(identity: str) -> str:
        """The user name the apiserver sees for an identity (what 403 messages name)."""
        if identity == "admin":
            return ADMIN_USER
        if identity not in SERVICE_ACCOUNTS:
            raise KeyError(f"unknown lab identity {identity!r}; the lab provisions {', '.join(IDENTITIES)}")
        return service_account_username(IDENTITY_NAMESPACE, SERVICE_ACCOUNTS[identity])

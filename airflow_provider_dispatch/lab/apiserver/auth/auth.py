"""Who is asking, and may they: the interfaces the server calls on every request.

The real apiserver authenticates (bearer tokens here), then authorizes the request's attributes (verb, API group,
resource, subresource, namespace, name) before anything else happens (`apiserver/pkg/endpoints/filters/
authentication.go`, `authorization.go`). Without an authenticator and authorizer the lab lets everyone do
everything, as a cluster with `--authorization-mode=AlwaysAllow` would; `lab.apiserver.auth.rbac` supplies the token and
role-based ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from airflow_provider_dispatch.lab.apiserver.requests import RequestInfo


@dataclass(frozen=True)
class UserInfo:
    name: str
    groups: tuple[str, ...] = field(default=())


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


class AllowAnyone:
    """Authenticates every request as the lab's admin and allows everything."""

    def authenticate(self, authorization: str | None) -> UserInfo | None:
        return ANONYMOUS_ADMIN

    def authorize(self, user: UserInfo, request: RequestInfo) -> Decision:
        return Decision(True, "the lab runs without RBAC")

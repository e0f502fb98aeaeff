"""Who a bearer token is: static tokens and service account tokens, as the kube-apiserver authenticates them.

The request authenticator is the kube-apiserver's chain (`pkg/kubeapiserver/authenticator/config.go` `New`):

- `Authorization: Bearer <token>` goes to the token authenticators in turn (`apiserver/pkg/authentication/
  request/bearertoken/bearertoken.go`; the scheme is matched case-insensitively, an empty token is no token).
  A token that none of them knows is an error, `invalid bearer token`: the answer is 401 with the Status
  `Unauthorized`, never anonymous access.
- Static tokens are `--token-auth-file`'s CSV records `token,user,uid[,"group1,group2"]`
  (`apiserver/pkg/authentication/token/tokenfile/tokenfile.go` `NewCSV`).
- Service account tokens are JWTs the apiserver issues (TokenRequest, `kubectl create token`) with the claims
  of `pkg/serviceaccount/claims.go` `Claims`: `sub` `system:serviceaccount:<ns>:<name>`, `kubernetes.io`
  `{namespace, serviceaccount: {name, uid}}`, `iat`/`nbf`/`exp`. Validation (`claims.go` `validator.Validate`)
  refuses an expired token and one whose service account is gone or was re-created (another uid). The user has
  the groups `system:serviceaccounts` and `system:serviceaccounts:<ns>` (`serviceaccount.MakeGroupNames`), the
  account's uid, and the extra `authentication.kubernetes.io/credential-id: JTI=<the token's jti>`
  (`ServiceAccountInfo.UserInfo`), which `kubectl auth whoami` shows. A static token's user has the file's uid.
  Differences: the lab signs with HMAC-SHA256 and a per-lab key (a real apiserver signs RS256 with
  `--service-account-signing-key-file`; clients never verify either), times are lab time, and there is no
  `serviceaccounts/<name>/token` endpoint: tokens come from `ServiceAccountTokens.issue`.
- Every authenticated user gets `system:authenticated` unless they have it or `system:unauthenticated`
  already (`apiserver/pkg/authentication/group/authenticated_group_adder.go`).
- A request without credentials is `system:anonymous` in `system:unauthenticated` when anonymous access is on,
  the kube-apiserver default (`--anonymous-auth=true`, `apiserver/pkg/authentication/request/anonymous`);
  RBAC then lets it read only what `system:public-info-viewer` grants.
"""

from __future__ import annotations

import base64
import binascii
import csv
import dataclasses
import hashlib
import hmac
import io
import json
import secrets
import uuid
from collections.abc import Mapping
from typing import Any

from airflow_provider_dispatch_lab import kinds
from airflow_provider_dispatch_lab.apiserver.auth.auth import UserInfo
from airflow_provider_dispatch_lab.apiserver.auth.rbac_rules import service_account_groups, service_account_username
from airflow_provider_dispatch_lab.apiserver.storage.store import Store
from airflow_provider_dispatch_lab.clock import LabClock

AUTHENTICATED = "system:authenticated"
UNAUTHENTICATED = "system:unauthenticated"
ANONYMOUS = UserInfo("system:anonymous", (UNAUTHENTICATED,))
DEFAULT_ISSUER = "https://kubernetes.default.svc.cluster.local"
CREDENTIAL_ID = "authentication.kubernetes.io/credential-id"
"""`user.CredentialIDKey` (apiserver/pkg/authentication/user/user.go)."""
"""`--service-account-issuer` of kubeadm clusters; also the default audience of issued tokens."""
DEFAULT_EXPIRATION_SECONDS = 365 * 24 * 3600
"""Lab-issued tokens last a lab year (`ExpirationExtensionSeconds`, what kubelets' projected tokens get), so that
a lab at 100x keeps its identities for days of wall time. `issue` takes a shorter one for expiry tests."""


_VERIFIED_LIMIT = 1024


class InvalidTokenError(Exception):
    """A token a token authenticator recognises as its own but refuses (expired, account gone)."""


class StaticTokens:
    """`--token-auth-file`: fixed tokens for fixed users."""

    def __init__(self, users: Mapping[str, UserInfo]) -> None:
        self._users = dict(users)

    @classmethod
    def from_csv(cls, text: str) -> StaticTokens:
        """Parse the token file format; a record of fewer than 3 columns is refused, as `NewCSV` refuses it."""
        users: dict[str, UserInfo] = {}
        for number, record in enumerate(csv.reader(io.StringIO(text)), start=1):
            if not record:
                continue
            if len(record) < 3:
                raise ValueError(
                    f"token file record {number} must have at least 3 columns (token, user name, user uid), "
                    f"found {len(record)}"
                )
            if not record[0]:
                continue  # NewCSV warns about an empty token and skips the record
            groups = tuple(record[3].split(",")) if len(record) >= 4 else ()
            users[record[0]] = UserInfo(record[1], groups, uid=record[2])
        return cls(users)

    def authenticate_token(self, token: str) -> UserInfo | None:
        return self._users.get(token)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class ServiceAccountTokens:
    """Issues and validates service account JWTs against the ServiceAccounts in the store."""

    def __init__(self, store: Store, clock: LabClock, *, issuer: str = DEFAULT_ISSUER) -> None:
        self._store = store
        self._clock = clock
        self._issuer = issuer
        self._key = secrets.token_bytes(32)
        self._header = _b64(json.dumps({"alg": "HS256", "kid": "dispatch-lab"}, separators=(",", ":")).encode())
        self._verified: dict[str, dict[str, Any]] = {}
        """Claims of tokens whose signature was checked: every request carries its token again."""

    def issue(self, namespace: str, name: str, expiration_seconds: int = DEFAULT_EXPIRATION_SECONDS) -> str:
        """A token for the ServiceAccount `namespace/name`, which must exist (TokenRequest answers 404 else)."""
        account = self._store.get(kinds.SERVICE_ACCOUNT.resource, (namespace, name))
        if account is None:
            raise LookupError(f'serviceaccounts "{name}" not found in namespace "{namespace}"')
        if expiration_seconds <= 0:
            raise ValueError("expiration_seconds must be positive")
        now = int(self._clock.now())
        claims = {
            "aud": [self._issuer],
            "exp": now + expiration_seconds,
            "iat": now,
            "iss": self._issuer,
            "jti": str(uuid.uuid4()),
            "kubernetes.io": {
                "namespace": namespace,
                "serviceaccount": {"name": name, "uid": account["metadata"]["uid"]},
            },
            "nbf": now,
            "sub": service_account_username(namespace, name),
        }
        payload = _b64(json.dumps(claims, separators=(",", ":")).encode())
        return f"{self._header}.{payload}.{self._sign(f'{self._header}.{payload}')}"

    def _sign(self, signed: str) -> str:
        return _b64(hmac.new(self._key, signed.encode(), hashlib.sha256).digest())

    def _claims(self, token: str) -> dict[str, Any] | None:
        """The claims of a token this lab signed, or None for anything else (not ours: the next authenticator)."""
        claims = self._verified.get(token)
        if claims is None:
            claims = self._verify(token)
            if claims is not None:
                if len(self._verified) >= _VERIFIED_LIMIT:
                    self._verified.clear()
                self._verified[token] = claims
        return claims

    def _verify(self, token: str) -> dict[str, Any] | None:
        parts = token.split(".")
        if len(parts) != 3 or not hmac.compare_digest(self._sign(f"{parts[0]}.{parts[1]}"), parts[2]):
            return None
        try:
            claims = json.loads(_unb64(parts[1]))
        except (ValueError, binascii.Error):
            return None
        if not isinstance(claims, dict) or claims.get("iss") != self._issuer:
            return None
        return claims

    def authenticate_token(self, token: str) -> UserInfo | None:
        claims = self._claims(token)
        if claims is None:
            return None
        now = self._clock.now()
        if now >= float(claims.get("exp", 0)):
            raise InvalidTokenError("service account token has expired")
        if now < float(claims.get("nbf", 0)):
            raise InvalidTokenError("service account token is not valid yet")
        private = claims.get("kubernetes.io") or {}
        namespace = str(private.get("namespace") or "")
        account_ref = private.get("serviceaccount") or {}
        name, uid = str(account_ref.get("name") or ""), str(account_ref.get("uid") or "")
        account = self._store.get(kinds.SERVICE_ACCOUNT.resource, (namespace, name))
        if account is None:
            raise InvalidTokenError(f'serviceaccounts "{name}" not found')
        if account["metadata"].get("uid") != uid:
            raise InvalidTokenError(
                f"service account UID ({account['metadata'].get('uid')}) does not match claim ({uid})"
            )
        jti = str(claims.get("jti") or "")
        # `ServiceAccountInfo.UserInfo` (apiserver/pkg/authentication/serviceaccount/util.go, v0.36.3): the
        # account's uid, and the token's id as `authentication.kubernetes.io/credential-id` (`JTI=<jti>`)
        extra = ((CREDENTIAL_ID, (f"JTI={jti}",)),) if jti else ()
        return UserInfo(service_account_username(namespace, name), service_account_groups(namespace), uid, extra)


class TokenAuthenticator:
    """The request authenticator the server calls: bearer tokens, then anonymous, then `system:authenticated`."""

    def __init__(
        self,
        static: StaticTokens,
        service_accounts: ServiceAccountTokens | None = None,
        *,
        anonymous: bool = True,
    ) -> None:
        self.static = static
        self.service_accounts = service_accounts
        self.anonymous = anonymous

    def authenticate(self, authorization: str | None) -> UserInfo | None:
        token = _bearer(authorization)
        if token is None:
            return ANONYMOUS if self.anonymous else None
        user = self.static.authenticate_token(token)
        if user is None and self.service_accounts is not None:
            try:
                user = self.service_accounts.authenticate_token(token)
            except InvalidTokenError:
                return None
        if user is None:
            return None  # invalid bearer token: 401 even with anonymous access on
        if AUTHENTICATED in user.groups or UNAUTHENTICATED in user.groups or user.name == ANONYMOUS.name:
            return user
        return dataclasses.replace(user, groups=(*user.groups, AUTHENTICATED))


def _bearer(authorization: str | None) -> str | None:
    """`bearertoken.go`: `Bearer <token>`, scheme case-insensitive; anything else carries no token."""
    if not authorization:
        return None
    parts = authorization.strip().split(" ", 2)
    if len(parts) < 2 or parts[0].lower() != "bearer" or not parts[1]:
        return None
    return parts[1]

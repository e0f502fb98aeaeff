"""The apiserver's error answers as `metav1.Status` bodies.

Clients classify failures by `code` and `reason` (kubernetes `ApiException.status`, `kubernetes_asyncio` the same),
and controllers by `reason` (`apierrors.IsConflict`, `IsNotFound`, ...), so the lab must send the bodies the real
apiserver sends. Shapes and messages follow `k8s.io/apimachinery/pkg/api/errors/errors.go` (`NewNotFound`,
`NewAlreadyExists`, `NewConflict`, `NewInvalid`, `NewForbidden`, `NewGone`, `NewResourceExpired`,
`NewTooManyRequests`, `NewInternalError`, `NewBadRequest`, `NewMethodNotSupported`, `NewTimeoutError`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass
class ApiError(Exception):
    """An error the server answers with a Status body and the HTTP code in `code`."""

    code: int
    reason: str
    message: str
    details: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        return f"{self.code} {self.reason}: {self.message}"

    def status(self) -> dict[str, Any]:
        """The `Status` object, as `apierrors.StatusError.ErrStatus` serializes."""
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": dict(self.metadata),
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details:
            body["details"] = self.details
        return body


def aggregate(messages: Sequence[str]) -> str:
    """`utilerrors.NewAggregate(errs).Error()` (`apimachinery/pkg/util/errors/errors.go`): one message alone,
    several de-duplicated (first occurrence kept) inside brackets and joined by ", ".

    Field-error lists (webhook denials, label-selector requirements) and RBAC's resolution errors all print
    through this one Go function, so the lab has one copy. Callers pass at least one message: Go's empty
    aggregate is nil, which none of them prints.
    """
    unique = list(dict.fromkeys(messages))
    if len(unique) == 1:
        return unique[0]
    return "[" + ", ".join(unique) + "]"


def _qualified(plural: str, group: str) -> str:
    """`pods` or `trainjobs.trainer.kubeflow.org`: the resource as apierrors names it (`GroupResource.String`)."""
    return f"{plural}.{group}" if group else plural


def _details(name: str | None, group: str, kind: str) -> dict[str, Any]:
    details: dict[str, Any] = {"kind": kind}
    if name:
        details["name"] = name
    if group:
        details["group"] = group
    return details


def not_found(plural: str, group: str, name: str) -> ApiError:
    return ApiError(404, "NotFound", f'{_qualified(plural, group)} "{name}" not found', _details(name, group, plural))


def already_exists(plural: str, group: str, name: str) -> ApiError:
    return ApiError(
        409,
        "AlreadyExists",
        f'{_qualified(plural, group)} "{name}" already exists',
        _details(name, group, plural),
    )


def conflict(plural: str, group: str, name: str, why: str) -> ApiError:
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {_qualified(plural, group)} "{name}": {why}',
        _details(name, group, plural),
    )


MODIFIED = "the object has been modified; please apply your changes to the latest version and try again"


def invalid(kind: str, group: str, name: str, causes: Sequence[dict[str, str]]) -> ApiError:
    """422 Invalid: `<Kind>.<group> "<name>" is invalid: <field>: <message>, ...` as `apierrors.NewInvalid`."""
    qualified_kind = f"{kind}.{group}" if group else kind
    summary = ", ".join(f"{c['field']}: {c['message']}" if c.get("field") else c["message"] for c in causes)
    if len(causes) == 1:
        message = f'{qualified_kind} "{name}" is invalid: {summary}'
    else:
        message = f'{qualified_kind} "{name}" is invalid: [{summary}]'
    details = _details(name, group, kind)
    details["causes"] = [dict(c) for c in causes]
    return ApiError(422, "Invalid", message, details)


def forbidden(
    user: str, verb: str, plural: str, group: str, namespace: str | None, name: str | None, reason: str = ""
) -> ApiError:
    """403 as the RBAC authorizer words it (`apiserver/pkg/endpoints/handlers/responsewriters/errors.go`).

    `plural` may be `pods/status`: the sentence names the subresource, while the qualified resource in front
    and `details.kind` do not (`Forbidden` builds its GroupResource from the resource alone)."""
    base = plural.split("/", 1)[0]
    resource = _qualified(base, group)
    where = f' in the namespace "{namespace}"' if namespace else " at the cluster scope"
    named = f' "{name}"' if name else ""
    sentence = f'User "{user}" cannot {verb} resource "{plural}" in API group "{group}"{where}'
    if reason:
        sentence = f"{sentence}: {reason}"  # `Forbidden` appends the authorizer's reason when it gave one
    return ApiError(403, "Forbidden", f"{resource}{named} is forbidden: {sentence}", _details(name, group, base))


def unauthorized() -> ApiError:
    return ApiError(401, "Unauthorized", "Unauthorized")


def gone(message: str) -> ApiError:
    return ApiError(410, "Gone", message)


def expired(message: str) -> ApiError:
    """410 with reason Expired, as `apierrors.NewResourceExpired` (continue tokens, too-old watches)."""
    return ApiError(410, "Expired", message)


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def method_not_supported(plural: str, group: str, verb: str) -> ApiError:
    return ApiError(
        405,
        "MethodNotAllowed",
        f'{verb} is not supported on resources of kind "{_qualified(plural, group)}"',  # Go's %q
        {"kind": plural, **({"group": group} if group else {})},
    )


def unsupported_media_type(content_type: str) -> ApiError:
    return ApiError(415, "UnsupportedMediaType", f"the body of the request was in an unknown format: {content_type}")


def too_many_requests(retry_after_seconds: int) -> ApiError:
    return ApiError(
        429,
        "TooManyRequests",
        "Too many requests, please try again later.",
        {"retryAfterSeconds": retry_after_seconds},
        {"Retry-After": str(retry_after_seconds)},
    )


def internal_error(message: str) -> ApiError:
    return ApiError(
        500,
        "InternalError",
        f"Internal error occurred: {message}",
        {"causes": [{"message": message}]},
    )


def timeout(message: str, retry_after_seconds: int = 1) -> ApiError:
    return ApiError(504, "Timeout", message, {"retryAfterSeconds": retry_after_seconds})


def not_acceptable_resource_version(requested: int, current: int) -> ApiError:
    """A list or watch asked for a resourceVersion the store has not reached yet.

    The apiserver waits up to 3 s for the watch cache and then answers 504 "Too large resource version"
    (`apiserver/pkg/storage/errors.go` `NewTooLargeResourceVersionError`, reason Timeout with cause
    ResourceVersionTooLarge).
    """
    error = timeout(f"Too large resource version: {requested}, current: {current}")
    error.details["causes"] = [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}]
    return error

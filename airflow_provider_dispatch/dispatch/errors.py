"""The errors dispatch raises, and the mapping from an API failure to them (DESIGN §5).

Two families, because the caller must know whether waiting can help:

* `UnreachableError`: a failed call to retry (API unreachable, 5xx, 429, timeout, a conflict that persisted
  through the operation's own attempts (conflicts.py), expired resourceVersion, suspension not yet
  observed) and `PodsRemainError`, the drain check's "not yet".
* `RefusedError`: retrying the same call cannot succeed (not found, not managed by dispatch, invalid name,
  forbidden, spec rejected, already exists as another object, finished).

Every message names the object as `namespace/name` and says what would unblock it. Messages never carry
credentials: the API server's Status message is included (it names users, never tokens), and any text is
scrubbed of bearer tokens, credential fields and URL user-info before it goes in.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, ClassVar, Final

from airflow_provider_dispatch.dispatch.blocking import RemainingPod
from airflow_provider_dispatch.dispatch.explain import pods_remain_reason


def _restore(cls: type[DispatchError], args: tuple[Any, ...]) -> DispatchError:
    error = cls.__new__(cls)
    Exception.__init__(error, *args)
    return error


class DispatchError(Exception):
    """Base of every dispatch error. `ref` is the object as `namespace/name` (a node name for nodes)."""

    retryable: ClassVar[bool] = False

    def __init__(self, message: str, *, ref: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.ref = ref

    def __str__(self) -> str:
        return self.message

    def __reduce__(self) -> tuple[Any, ...]:
        # Subclasses have other constructor signatures; rebuild from state so errors survive pickling.
        return (_restore, (type(self), self.args), self.__dict__)


class UnreachableError(DispatchError):
    """A failed call to retry: nothing was decided (DESIGN §5; Airflow: AirflowException, retried)."""

    retryable: ClassVar[bool] = True


class ConflictError(UnreachableError):
    """409: the object changed between the read that was checked and the conditional write; check again."""


class PersistentConflictError(ConflictError):
    """Every attempt of an operation met a conflict (conflicts.py): another writer keeps changing the object
    between dispatch's read and its write. Nothing was admitted or held by the last attempt; retry later."""


class SuspensionNotObservedError(UnreachableError):
    """Held, but Trainer/JobSet have not observed it yet: Jobs may still create pods (DESIGN §3.1)."""


class HoldSettlingError(SuspensionNotObservedError):
    """The hold is observed, but a write a controller started before it may still land for `seconds_left`
    more seconds of the API server's clock (evidence.py): wait that long, then check again."""

    def __init__(self, message: str, *, ref: str | None = None, seconds_left: float = 0.0) -> None:
        super().__init__(message, ref=ref)
        self.seconds_left = seconds_left


class PodsRemainError(UnreachableError):
    """The drain check found remaining pods: nothing raised or admitted, the hold stays (DESIGN §3.5)."""

    def __init__(self, ref: str, remaining: Sequence[RemainingPod], *, now: datetime | None = None) -> None:
        #: the message in its parts (`dispatch.reasons`): what the release operator shows while it waits
        self.reason = pods_remain_reason(ref, remaining, now=now)
        super().__init__(self.reason.text(), ref=ref)
        self.remaining: tuple[RemainingPod, ...] = tuple(remaining)

    @property
    def ceased(self) -> bool:
        """Every remaining pod's processes are proven gone; the pod objects are still there."""
        return all(pod.ceased for pod in self.remaining)


class RefusedError(DispatchError):
    """A refusal: retrying the same call cannot succeed (Airflow: AirflowFailException, no retry)."""


class NotFoundError(RefusedError):
    pass


class InvalidParameterError(RefusedError):
    """A parameter that is not usable, often a template that rendered `None` or nothing (validation.py); refused
    before any request is made."""


class NotManagedError(RefusedError):
    """The TrainJob lacks valid dispatch labels (or a valid admission number): dispatch does not manage it."""


class InvalidNameError(RefusedError):
    """A name or label value that would not be safe in a selector or a URL."""


class ForbiddenError(RefusedError):
    """The credentials lack a permission (403) or were not accepted (401)."""


class SpecRejectedError(RefusedError):
    """The API server rejected the object (400/422), or dispatch refused it before writing (unsafe)."""


class AlreadyExistsError(RefusedError):
    """`open` found another object (not the same dispatch object) under that name."""


class FinishedError(RefusedError):
    """The held TrainJob has finished (Complete or Failed): unsuspending it would admit nothing."""


class PodFenceError(RefusedError):
    """`require_pod_fence`: the pod fence was not in force, unchanged, for the whole execution (fence.py), so a
    pod of it may have left the API unseen; nothing was admitted."""


class NotInChainError(RefusedError):
    """A TrainJob carries a restart chain's job id but is not one of its submissions (`<name>-<k>`, labelled
    submission k, run by Trainer's own controller): the chain cannot tell its executions apart from it."""


# --- classification of API failures -------------------------------------------------------------------------

_SCRUBBERS = (
    (re.compile(r"(?i)\bbearer\s+[^\s,;\"']+"), "Bearer <redacted>"),
    (
        re.compile(
            r"(?i)\b(authorization|token|password|passwd|secret|client-key-data|client-certificate-data|"
            r"certificate-authority-data)([\"']?\s*[:=]\s*)[\"']?[^\s,;\"']+"
        ),
        r"\1\2<redacted>",
    ),
    (re.compile(r"://[^/@\s]+@"), "://<redacted>@"),
)
_DETAIL_LIMIT = 400


def scrub(text: str) -> str:
    """Remove anything credential-like from a text that will go into a message, and cut it short."""
    for pattern, replacement in _SCRUBBERS:
        text = pattern.sub(replacement, text)
    text = " ".join(text.split())
    return text if len(text) <= _DETAIL_LIMIT else text[: _DETAIL_LIMIT - 3] + "..."


def _status_parts(body: object) -> tuple[str, str]:
    """(reason, message) from a Kubernetes Status body, or from whatever text the driver had."""
    if isinstance(body, bytes):
        body = body.decode("utf-8", errors="replace")
    if isinstance(body, Mapping):
        reason = body.get("reason")
        message = body.get("message")
        causes = body.get("details", {}).get("causes") if isinstance(body.get("details"), Mapping) else None
        text = message if isinstance(message, str) else ""
        if isinstance(causes, list):
            fields = [
                f"{c.get('field', '')}: {c.get('message', '')}".strip(": ") for c in causes if isinstance(c, Mapping)
            ]
            if fields and not text:
                text = "; ".join(fields)
        return (reason if isinstance(reason, str) else ""), scrub(text)
    if isinstance(body, str):
        return "", scrub(body)
    return "", ""


def _scope(ref: str) -> str:
    return f'in namespace "{ref.split("/", 1)[0]}"' if "/" in ref else "at cluster scope"


#: the RBAC verbs that change state; a request with one of them is a write
WRITE_VERBS: Final = frozenset({"create", "update", "patch", "delete"})


def classify_api_failure(
    status_code: int | None, status_body: object, ref: str, verb: str, resource: str = ""
) -> DispatchError:
    """Map one failed API call to the error to raise.

    `status_code` None means the call never got an HTTP answer (connection refused or reset, DNS, TLS,
    timeout); `status_body` is the decoded Status dict, or text. `verb` is the RBAC verb (get, list, update,
    create) and `resource` the RBAC resource (`nodes`, `trainjobs.trainer.kubeflow.org`): together the
    permission a 403 says is missing.
    """
    reason, detail = _status_parts(status_body)
    call = " ".join(part for part in (verb, resource) if part) or "call"
    said = f": {detail}" if detail else ""
    if status_code is None:
        if verb in WRITE_VERBS:
            # A write whose answer was lost may have been applied. A retry is still safe: every admitting write
            # is conditional on the resourceVersion that was checked, and release of a running object writes
            # nothing and returns its execution.
            outcome = "The write may or may not have been applied; a retry finds out and never admits twice"
        else:
            outcome = "Nothing was decided or written"
        return UnreachableError(
            f"{ref}: the Kubernetes API could not be reached ({call}{said}). {outcome}; retry once the API "
            "server is reachable.",
            ref=ref,
        )
    if status_code == 409:
        return ConflictError(
            f"{ref} changed between the read that was checked and the write ({call}: 409 "
            f"{reason or 'Conflict'}"
            f"{said}). Nothing was admitted; retry, and the check runs again on the new state.",
            ref=ref,
        )
    if status_code == 410:
        return UnreachableError(
            f"{ref}: the resourceVersion read is no longer available ({call}: 410 {reason or 'Gone'}{said}). "
            "Retry, and the read starts over.",
            ref=ref,
        )
    if status_code == 429:
        return UnreachableError(
            f"{ref}: the API server is throttling requests ({call}: 429 TooManyRequests{said}). Retry later.",
            ref=ref,
        )
    if status_code in (408, 504) or status_code >= 500:
        return UnreachableError(
            f"{ref}: the API server failed the call ({call}: {status_code} {reason}{said}). Nothing was "
            "decided; retry once it answers again.",
            ref=ref,
        )
    if status_code == 404:
        return NotFoundError(
            f"{ref} was not found ({call}: 404{said}). Create it, or check the namespace and name.",
            ref=ref,
        )
    if status_code == 403:
        permission = f"{verb} {resource}".strip()
        return ForbiddenError(
            f"{ref}: forbidden: the credentials dispatch uses lack the permission `{permission}` "
            f"{_scope(ref)} (403{said}). Grant `{permission}` to that identity (a Role or ClusterRole "
            "binding).",
            ref=ref,
        )
    if status_code == 401:
        return ForbiddenError(
            f"{ref}: the API server did not accept the credentials ({call}: 401 Unauthorized). Renew the "
            "token or fix the connection's kubeconfig.",
            ref=ref,
        )
    if status_code in (400, 422):
        return SpecRejectedError(
            f"{ref}: the API server rejected the request ({call}: {status_code} "
            f"{reason or 'Invalid'}{said}). "
            "Nothing was written; fix the object and try again.",
            ref=ref,
        )
    if 400 <= status_code < 500:
        return RefusedError(
            f"{ref}: the API server refused the request ({call}: {status_code} {reason}{said}).",
            ref=ref,
        )
    return UnreachableError(
        f"{ref}: unexpected answer from the API server ({call}: {status_code} {reason}{said}). Retry.",
        ref=ref,
    )

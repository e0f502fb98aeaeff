"""The HTTP form of a program's request and the decoding of its answer, shared by the sync and async shells.

The adapters (`sync_adapter`, `async_adapter`) differ only in which client carries a call out; everything they
have in common about the wire is here, once, and pure (no client import, no socket):

* `http_call`: a `Request` of `programs` as method, REST path (`ApiCoordinates.path`, built only from names the
  programs validated), query and body. The admitting write is a PUT (replace) of the object as read, so the API
  server applies it only at the resourceVersion that was checked; nothing here ever PATCHes. The body is sent as
  `application/json` and every answer is asked for as `application/json`: no client model is built for a
  request or an answer (50,000 pods decode as plain JSON, once).
* `server_time`: the answer to `ServerTime`, the API server's `Date` header (its clock);
* `decode_answer`: the status and raw bytes of an HTTP answer as the program wants them: the decoded object for
  a 2xx, else `ApiFailure(status, Status dict or text)`.
* `transport_failure`: an exception that means "no HTTP answer" (refused, reset, timed out, TLS) as
  `ApiFailure(None, short text)`. The text names exception types and the OS reason only: never headers, bodies
  or the kubeconfig, so no credential can reach a message (errors.py scrubs again).
* `kubeconfig_refusal`: a kubeconfig that cannot be loaded, named without quoting it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any, Final, Literal

from airflow_provider_dispatch.dispatch.errors import WRITE_VERBS, RefusedError, scrub
from airflow_provider_dispatch.dispatch.programs import (
    ApiFailure,
    CreateObject,
    GetNode,
    GetObject,
    ListObjects,
    ReplaceObject,
    Request,
    Response,
    ServerTime,
)
from airflow_provider_dispatch.dispatch.vocabulary import NODE

Method = Literal["GET", "PUT", "POST"]

JSON: Final = "application/json"
#: sent with every call: answers as JSON (never protobuf or a table), bodies as plain JSON (a PUT, never a patch)
HEADERS: Final = {"Accept": JSON, "Content-Type": JSON}
#: the name under which both generated clients keep the kubeconfig's bearer token (`Configuration.auth_settings`)
AUTH_SETTINGS: Final = ("BearerToken",)
#: the RBAC verbs of the requests that write
#: (connect, read) seconds per call. The read timeout bounds the wait for each chunk of an answer, not the whole
#: answer, so a large list that keeps arriving is not cut off, while a server that stops answering is.
DEFAULT_TIMEOUT: Final = (10.0, 60.0)
_TEXT_LIMIT: Final = 240


@dataclass(frozen=True)
class HttpCall:
    """One REST call: what a client needs to carry out a program's request."""

    method: Method
    path: str
    query: tuple[tuple[str, str], ...] = ()
    body: dict[str, Any] | None = None

    @property
    def writes(self) -> bool:
        return self.method != "GET"


def plain_json(body: Mapping[str, Any]) -> dict[str, Any]:
    """`body` as plain dicts and lists, as the clients' serializers expect (they reject other Mappings)."""
    result = json.loads(json.dumps(body))
    if not isinstance(result, dict):
        raise TypeError("a request body must be a JSON object")
    return result


def http_call(request: Request) -> HttpCall:
    """The REST call for a program's request (programs/protocol.py: the driver contract)."""
    if isinstance(request, ServerTime):
        return HttpCall("GET", "/version")
    if isinstance(request, GetNode):
        return HttpCall("GET", NODE.path(None, request.name))
    if isinstance(request, GetObject):
        return HttpCall("GET", request.coords.path(request.namespace, request.name))
    if isinstance(request, ListObjects):
        return HttpCall("GET", request.coords.path(request.namespace), tuple(request.query().items()))
    if isinstance(request, ReplaceObject):
        return HttpCall("PUT", request.coords.path(request.namespace, request.name), body=plain_json(request.body))
    if isinstance(request, CreateObject):
        return HttpCall("POST", request.coords.path(request.namespace), body=plain_json(request.body))
    raise TypeError(f"not a dispatch request: {request!r}")


def _text(data: bytes | str | None) -> str:
    if data is None:
        return ""
    return data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data


def decode_status_body(data: bytes | str | None) -> Mapping[str, Any] | str:
    """The body of a failed call: the Status object when it is one, else (short) text."""
    text = _text(data)
    try:
        decoded = json.loads(text)
    except ValueError:
        return text[:_TEXT_LIMIT]
    return decoded if isinstance(decoded, dict) else text[:_TEXT_LIMIT]


def decode_answer(status: int, data: bytes | str | None) -> Response:
    """An HTTP answer as the program receives it: the object for a 2xx, else an `ApiFailure`.

    A 2xx whose body is not a JSON object is no answer the program could act on: it is reported like a lost
    answer (status None), which every program treats as "retry", never as success.
    """
    if not 200 <= status < 300:
        return ApiFailure(status, decode_status_body(data))
    try:
        decoded = json.loads(data or b"")
    except ValueError:
        decoded = None
    if not isinstance(decoded, dict):
        return ApiFailure(None, f"the API server answered {status} with a body that is not a JSON object")
    return decoded


def server_time(status: int, date_header: str | None) -> Response:
    """The answer to `ServerTime`: the `Date` header of a 2xx answer as RFC 3339 (the API server's clock).

    An answer without a usable `Date` is reported like a lost answer (retryable): a settle judged against an
    unknown clock would prove nothing."""
    if not 200 <= status < 300:
        return ApiFailure(status, None)
    try:
        moment = parsedate_to_datetime(date_header or "")
    except (TypeError, ValueError):
        moment = None
    if moment is None or moment.tzinfo is None:
        return ApiFailure(None, "the API server's answer carried no usable Date header")
    return {"date": moment.strftime("%Y-%m-%dT%H:%M:%SZ")}


def _cause(error: BaseException) -> BaseException | None:
    """The exception `error` wraps: urllib3's `reason` or an exception among its args (ProtocolError),
    aiohttp's `os_error`, or the chained one."""
    candidates = [getattr(error, "reason", None), getattr(error, "os_error", None), *error.args]
    for inner in candidates:
        if isinstance(inner, BaseException) and inner is not error:
            return inner
    return error.__cause__ or error.__context__


def describe_transport_error(error: BaseException) -> str:
    """A short, credential-free description: the exception types down to the root, and the OS reason."""
    names = [type(error).__name__]
    root = error
    seen = {id(error)}
    inner = _cause(error)
    while inner is not None and id(inner) not in seen and len(names) < 4:
        seen.add(id(inner))
        names.append(type(inner).__name__)
        root = inner
        inner = _cause(inner)
    if isinstance(root, TimeoutError) or "Timeout" in type(root).__name__:
        reason = "timed out"
    elif isinstance(root, OSError) and root.strerror:
        reason = root.strerror
    else:
        reason = str(root).split(": ")[-1] if str(root) else ""
    chain = " < ".join(dict.fromkeys(names))
    return scrub(f"{chain}: {reason}"[:_TEXT_LIMIT] if reason else chain)


def transport_failure(request: Request, error: BaseException) -> ApiFailure:
    """No HTTP answer at all. For a write the answer may be lost after the server applied it; the error the
    program raises says so (`classify_api_failure` knows the verb)."""
    return ApiFailure(None, describe_transport_error(error))


def kubeconfig_refusal(source: str, error: BaseException) -> RefusedError:
    """A kubeconfig that cannot be loaded. Only the exception type, and the library's own message for its
    ConfigException (which names keys, not values), go in: a YAML error would quote the file's lines."""
    detail = type(error).__name__
    if type(error).__name__ == "ConfigException":
        detail += f": {scrub(str(error))[:200]}"
    return RefusedError(f"the kubeconfig {source} could not be loaded ({detail}). Fix the connection's kubeconfig.")


__all__ = [
    "AUTH_SETTINGS",
    "DEFAULT_TIMEOUT",
    "HEADERS",
    "WRITE_VERBS",
    "HttpCall",
    "decode_answer",
    "decode_status_body",
    "describe_transport_error",
    "http_call",
    "kubeconfig_refusal",
    "plain_json",
    "server_time",
    "transport_failure",
]

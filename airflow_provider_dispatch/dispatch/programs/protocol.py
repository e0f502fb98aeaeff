"""What a program and its driver exchange: the requests, the answers, and the drivers that run a program.

Each program is a generator. It yields a `Request` (a small frozen dataclass), receives the decoded JSON
answer as a dict, or an `ApiFailure(status, body)` value, and finally returns its result or raises a
`DispatchError`. The decision logic is in the programs once; the sync and async adapters only carry requests out
(docs/architecture.md):

    result = drive(release("ml/ft-7", now=now), respond)        # respond(request) -> dict | ApiFailure

Driver contract, per request:

* `GetObject`: GET `coords.path(namespace, name)`; `GetNode`: GET `/api/v1/nodes/{name}`;
* `ListObjects`: GET `coords.path(namespace)` with `labelSelector`, `resourceVersion`, `resourceVersionMatch`,
  `limit`, `continue` as query parameters, each only when not None; answer the List object as returned
  (`metadata.resourceVersion`, `metadata.continue`, `items`);
* `ServerTime`: GET `/version`; answer `{"date": <the answer's Date header as RFC 3339>}` (`transport.server_time`);
* `ReplaceObject`: PUT `coords.path(namespace, name)` with `body` (it carries `metadata.resourceVersion`, so
  the write is conditional); `CreateObject`: POST `coords.path(namespace)` with `body`;
* any HTTP error: `ApiFailure(status_code, decoded Status dict or text)`; no HTTP answer at all (connection
  refused, reset, TLS, timeout): `ApiFailure(None, short text)`. Never raise into the program, never retry a
  write on the program's behalf: the program decides.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final, Literal, TypeAlias, TypeVar, cast

from airflow_provider_dispatch.dispatch import vocabulary as v

# --- requests and responses --------------------------------------------------------------------------------


@dataclass(frozen=True)
class GetObject:
    coords: v.ApiCoordinates
    namespace: str | None
    name: str

    verb: ClassVar[str] = "get"

    def describe(self) -> str:
        return f"get {self.coords.resource} {self.namespace + '/' if self.namespace else ''}{self.name}"


@dataclass(frozen=True)
class ListObjects:
    coords: v.ApiCoordinates
    namespace: str | None
    label_selector: str | None = None
    resource_version: str | None = None
    resource_version_match: str | None = None
    limit: int | None = None
    continue_: str | None = None

    verb: ClassVar[str] = "list"

    def query(self) -> dict[str, str]:
        """The query parameters, under their API names, only those set."""
        pairs = {
            "labelSelector": self.label_selector,
            "resourceVersion": self.resource_version,
            "resourceVersionMatch": self.resource_version_match,
            "limit": None if self.limit is None else str(self.limit),
            "continue": self.continue_,
        }
        return {key: value for key, value in pairs.items() if value is not None}

    def describe(self) -> str:
        query = "&".join(f"{k}={val}" for k, val in self.query().items() if k != "continue")
        return f"list {self.coords.resource} in {self.namespace or 'cluster'}" + (f"?{query}" if query else "")


@dataclass(frozen=True)
class ReplaceObject:
    coords: v.ApiCoordinates
    body: Mapping[str, Any] = field(hash=False)

    verb: ClassVar[str] = "update"

    @property
    def namespace(self) -> str | None:
        return v.namespace_of(self.body) or None

    @property
    def name(self) -> str:
        return v.name_of(self.body)

    def describe(self) -> str:
        rv = v.field(self.body, "metadata", "resourceVersion")
        return f"update {self.coords.resource} {self.namespace}/{self.name} at resourceVersion {rv}"


@dataclass(frozen=True)
class CreateObject:
    coords: v.ApiCoordinates
    namespace: str
    body: Mapping[str, Any] = field(hash=False)

    verb: ClassVar[str] = "create"

    def describe(self) -> str:
        return f"create {self.coords.resource} {self.namespace}/{v.name_of(self.body)}"


@dataclass(frozen=True)
class GetNode:
    name: str

    verb: ClassVar[str] = "get"
    coords: ClassVar[v.ApiCoordinates] = v.NODE

    def describe(self) -> str:
        return f"get nodes {self.name}"


@dataclass(frozen=True)
class ServerTime:
    """The API server's clock: the `Date` of its answer to GET /version, as `{"date": "<RFC 3339>"}`.

    Settling a hold (evidence.py) compares the times the API server wrote with the API server's own now, so the
    clocks of Airflow workers and triggerers never enter the decision."""

    verb: ClassVar[str] = "get"
    coords: ClassVar[v.ApiCoordinates] = v.ApiCoordinates("", "", "version", "Version", namespaced=False)

    def describe(self) -> str:
        return "get /version (the API server's time)"


Request: TypeAlias = GetObject | ListObjects | ReplaceObject | CreateObject | GetNode | ServerTime


@dataclass(frozen=True)
class ApiFailure:
    """A failed call, as a value: HTTP status (None: no HTTP answer) and the Status body or text."""

    status: int | None
    body: Any = None

    @property
    def reason(self) -> str:
        reason = self.body.get("reason") if isinstance(self.body, Mapping) else None
        return reason if isinstance(reason, str) else ""


Response: TypeAlias = Mapping[str, Any] | ApiFailure
_T = TypeVar("_T")
Program: TypeAlias = Generator[Request, Response, _T]

PodReadStrategy: TypeAlias = Literal["pinned", "full"]
DEFAULT_POD_READ: Final[PodReadStrategy] = "pinned"
DEFAULT_PAGE_SIZE: Final = 500
#: how often the full list restarts after 410 before the read gives up (retryable)
MAX_LIST_RESTARTS: Final = 5
#: answers to a pinned (Exact) list that mean "not here, use the full list"
EXACT_REFUSED: Final = frozenset({400, 410, 422, 501, 504})


def drive(program: Program[_T], respond: Callable[[Request], Response]) -> _T:
    """Run a program, carrying out each request with `respond`. Pure: all I/O is in `respond`."""
    try:
        request = next(program)
    except StopIteration as stop:
        return cast(_T, stop.value)
    while True:
        response = respond(request)
        try:
            request = program.send(response)
        except StopIteration as stop:
            return cast(_T, stop.value)
        del response  # not kept alive while the next request is carried out (a page of a 50,000-pod list)


async def drive_async(program: Program[_T], respond: Callable[[Request], Awaitable[Response]]) -> _T:
    """`drive` for an async `respond` (the kubernetes_asyncio adapter)."""
    try:
        request = next(program)
    except StopIteration as stop:
        return cast(_T, stop.value)
    while True:
        response = await respond(request)
        try:
            request = program.send(response)
        except StopIteration as stop:
            return cast(_T, stop.value)
        del response

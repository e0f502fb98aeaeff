"""Sans-I/O programs: release, hold, open, inspect, find, remaining_pods, ceased, kueue_admit, drain.

Each program is a generator. It yields a `Request` (a small frozen dataclass), receives the decoded JSON
answer as a dict, or an `ApiFailure(status, body)` value, and finally returns its result or raises a
`DispatchError`. The decision logic is here once; the sync and async adapters only carry requests out
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

All names that reach a request were validated first (validation.py). The only clock is the `now` parameter,
used in explanations.

The consistent read of the namespace's pods (DESIGN §3.2), `read_pods`, has two strategies:

* `"pinned"` (the default): list by each selector server-side. The first list has resourceVersion unset, a
  quorum read; its list resourceVersion R pins the second list (`resourceVersion=R`,
  `resourceVersionMatch=Exact`), so both selections come from the same snapshot. Pages use `limit`/`continue`;
  a continue token stays within its snapshot. It reads only the object's pods, which matters in a namespace of
  50,000 pods. If the server refuses the pinned list (400, 410, 422, 501, 504), a page expires (410), or
  answers another resourceVersion than R (it ignored Exact), the read falls back to the full list: never to an
  unpinned second list.
* `"full"`: one namespace-wide list, resourceVersion unset (a quorum read, never `resourceVersion=0`), paged,
  restarting from the first page when a page answers 410 Gone; the selection is then applied locally.

Both return the same set: the server-side selectors and the local matcher are the same equality predicates,
and server results are filtered locally again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, ClassVar, Final, Literal, Protocol, TypeAlias, TypeVar, cast

from airflow_provider_dispatch.dispatch import vocabulary as v
from airflow_provider_dispatch.dispatch.admission import (
    admission_body,
    check_runtime_safe,
    dispatch_runtime_patch,
    hold_body,
    kueue_admission_body,
    record_body,
    runtime_reference,
)
from airflow_provider_dispatch.dispatch.assessment import (
    DrainReport,
    Execution,
    ManagedObject,
    Mode,
    Released,
    Status,
    assess,
    finished,
    is_held,
    managed,
    remaining_report,
)
from airflow_provider_dispatch.dispatch.blocking import RemainingPod, nodes_to_read
from airflow_provider_dispatch.dispatch.errors import (
    AlreadyExistsError,
    ConflictError,
    DispatchError,
    FinishedError,
    HoldSettlingError,
    InvalidNameError,
    NotFoundError,
    PodsRemainError,
    RefusedError,
    SpecRejectedError,
    SuspensionNotObservedError,
    UnreachableError,
    classify_api_failure,
)
from airflow_provider_dispatch.dispatch.evidence import (
    DEFAULT_SETTLE_SECONDS,
    HoldEvidence,
    expected_job_names,
    judge_hold,
)
from airflow_provider_dispatch.dispatch.fencing import (
    ExecutionPods,
    blocking_pods,
    missing_names,
    nodes_to_check,
    record,
    recorded,
    relabelled_pods,
)
from airflow_provider_dispatch.dispatch.nodes import NodeLookup, NodeRead
from airflow_provider_dispatch.dispatch.selection import Lineage, Selection, jobset_job_names
from airflow_provider_dispatch.dispatch.unfinished import with_unfinished
from airflow_provider_dispatch.dispatch.validation import (
    Ref,
    parse_ref,
    validate_job_id,
    validate_label_value,
    validate_namespace,
    validate_node_name,
    validate_submission,
    validate_trainjob_name,
)

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


# --- small steps --------------------------------------------------------------------------------------------


def _failure(request: Request, failure: ApiFailure, ref: str) -> DispatchError:
    return classify_api_failure(failure.status, failure.body, ref, request.verb, request.coords.resource)


def _object(response: Response, request: Request, ref: str) -> Mapping[str, Any]:
    if isinstance(response, ApiFailure):
        raise _failure(request, response, ref)
    if not isinstance(response, Mapping):
        raise UnreachableError(f"{ref}: unexpected answer to {request.describe()}; retry.", ref=ref)
    return response


def call(request: Request, ref: str) -> Program[Mapping[str, Any]]:
    """One request whose failure is raised, classified."""
    response = yield request
    return _object(response, request, ref)


def read_trainjob(ref: Ref) -> Program[Mapping[str, Any]]:
    request = GetObject(v.TRAINJOB, ref.namespace, ref.name)
    response = yield request
    if isinstance(response, ApiFailure) and response.status == 404:
        raise NotFoundError(
            f"TrainJob {ref} was not found. Open it through dispatch, or check the namespace and name.",
            ref=str(ref),
        )
    return _object(response, request, str(ref))


def read_jobset(ref: Ref) -> Program[Mapping[str, Any] | None]:
    """The TrainJob's JobSet (same name), or None while Trainer has not created it."""
    request = GetObject(v.JOBSET, ref.namespace, ref.name)
    response = yield request
    if isinstance(response, ApiFailure) and response.status == 404:
        return None
    return _object(response, request, str(ref))


def read_runtime(trainjob: Mapping[str, Any]) -> Program[Mapping[str, Any]]:
    ref = f"{v.namespace_of(trainjob)}/{v.name_of(trainjob)}"
    coords, name = runtime_reference(trainjob)
    request = GetObject(coords, v.namespace_of(trainjob) if coords.namespaced else None, name)
    response = yield request
    if isinstance(response, ApiFailure) and response.status == 404:
        where = f" in namespace {v.namespace_of(trainjob)}" if coords.namespaced else ""
        raise NotFoundError(
            f"TrainJob {ref} runs {coords.kind} {name}{where}, which was not found. Create the runtime or "
            "fix spec.runtimeRef.",
            ref=ref,
        )
    return _object(response, request, ref)


def _workloads(obj: ManagedObject) -> Program[list[Mapping[str, Any]]]:
    """The Kueue Workloads of a TrainJob, found by the `kueue.x-k8s.io/job-uid` label (k8s-apis §4.2)."""
    if obj.uid is None:
        return []
    uid = validate_label_value(obj.uid, "TrainJob uid", ref=str(obj.ref))
    selector = f"{v.LABEL_KUEUE_JOB_UID}={uid}"
    items = yield from _list_all(v.WORKLOAD, obj.ref.namespace, selector, str(obj.ref))
    return [w for w in items if v.labels_of(w).get(v.LABEL_KUEUE_JOB_UID) == uid]


def read_workloads(obj: ManagedObject) -> Program[list[Mapping[str, Any]]]:
    """The Kueue Workloads of a TrainJob (`hooks.checks.outcome_check` reads them for its explanation)."""
    return (yield from _workloads(obj))


def _list_all(
    coords: v.ApiCoordinates,
    namespace: str | None,
    selector: str | None,
    ref: str,
    *,
    keep: Callable[[Mapping[str, Any]], bool] | None = None,
) -> Program[list[Mapping[str, Any]]]:
    """Every item of a paged list (quorum read), restarting on 410; failures raised; `keep` filters pages."""
    for _ in range(MAX_LIST_RESTARTS):
        pages = yield from _list_pages(coords, namespace, selector, None, None, DEFAULT_PAGE_SIZE, ref, keep)
        if isinstance(pages, _PageFailure):
            if pages.failure.status == 410:
                continue
            raise _failure(pages.request, pages.failure, ref)
        return pages.items
    raise UnreachableError(f"{ref}: the list of {coords.resource} kept expiring (410 Gone); retry.", ref=ref)


# --- the consistent pod read --------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Pages:
    items: list[Mapping[str, Any]]
    resource_version: str


@dataclass(frozen=True)
class _PageFailure:
    request: ListObjects
    failure: ApiFailure


def _list_pages(
    coords: v.ApiCoordinates,
    namespace: str | None,
    selector: str | None,
    resource_version: str | None,
    match: str | None,
    page_size: int,
    ref: str,
    keep: Callable[[Mapping[str, Any]], bool] | None = None,
) -> Program[_Pages | _PageFailure]:
    """One paged list. Continued pages carry only the token: it pins them to the first page's snapshot.

    `keep`, when given, filters each page as it arrives, so that a namespace-wide list holds one page and the
    kept items at a time rather than every pod of the namespace (the full read of 50,000 pods)."""
    items: list[Mapping[str, Any]] = []
    list_rv: str | None = None
    token: str | None = None
    while True:
        if token is None:
            request = ListObjects(coords, namespace, selector, resource_version, match, page_size)
        else:
            request = ListObjects(coords, namespace, selector, limit=page_size, continue_=token)
        response = yield request
        if isinstance(response, ApiFailure):
            return _PageFailure(request, response)
        page = _object(response, request, ref)
        if list_rv is None:
            rv = v.field(page, "metadata", "resourceVersion")
            list_rv = rv if isinstance(rv, str) else ""
        token_value = v.field(page, "metadata", "continue")
        token = token_value if isinstance(token_value, str) and token_value else None
        found = v.object_list(page, "items")
        items.extend(found if keep is None else (item for item in found if keep(item)))
        del found, page, response  # nothing holds this page while the next one is read
        if token is None:
            return _Pages(items, list_rv)


@dataclass(frozen=True)
class PodRead:
    """The object's pods from one consistent read, the snapshot's resourceVersion, and how it was read."""

    pods: tuple[Mapping[str, Any], ...]
    resource_version: str
    strategy: PodReadStrategy


def _read_pinned(selection: Selection, page_size: int, ref: str) -> Program[PodRead | None]:
    """Per-selector lists at one resourceVersion; None when the full list must be used instead."""
    first, *others = selection.selectors
    pages = yield from _list_pages(v.POD, selection.namespace, first, None, None, page_size, ref)
    if isinstance(pages, _PageFailure):
        if pages.failure.status == 410:
            return None
        raise _failure(pages.request, pages.failure, ref)
    if not pages.resource_version:
        return None
    groups = [pages.items]
    for selector in others:
        pinned = yield from _list_pages(
            v.POD, selection.namespace, selector, pages.resource_version, "Exact", page_size, ref
        )
        if isinstance(pinned, _PageFailure):
            if pinned.failure.status in EXACT_REFUSED:
                return None
            raise _failure(pinned.request, pinned.failure, ref)
        if pinned.resource_version != pages.resource_version:
            return None
        groups.append(pinned.items)
    return PodRead(selection.select(*groups), pages.resource_version, "pinned")


class _Chooser(Protocol):
    """A selection of an object's pods: `Selection` (labels) or `Lineage` (labels, owner, name)."""

    def matches(self, pod: Mapping[str, Any]) -> bool: ...

    def select(self, *groups: Iterable[Mapping[str, Any]]) -> tuple[Mapping[str, Any], ...]: ...


def _read_full(chooser: _Chooser, namespace: str, page_size: int, ref: str) -> Program[PodRead]:
    for _ in range(MAX_LIST_RESTARTS):
        pages = yield from _list_pages(v.POD, namespace, None, None, None, page_size, ref, keep=chooser.matches)
        if isinstance(pages, _PageFailure):
            if pages.failure.status == 410:
                continue
            raise _failure(pages.request, pages.failure, ref)
        return PodRead(chooser.select(pages.items), pages.resource_version, "full")
    raise UnreachableError(
        f"{ref}: the pod list of namespace {namespace} kept expiring (410 Gone) before it was read "
        "to the end; nothing was decided. Retry.",
        ref=ref,
    )


def read_pods(
    selection: Selection,
    *,
    ref: str,
    strategy: PodReadStrategy = DEFAULT_POD_READ,
    page_size: int = DEFAULT_PAGE_SIZE,
) -> Program[PodRead]:
    """The object's pods in one consistent read, Terminating ones included (DESIGN §3.2; module docstring)."""
    if strategy == "pinned":
        pinned = yield from _read_pinned(selection, page_size, ref)
        if pinned is not None:
            return pinned
    return (yield from _read_full(selection, selection.namespace, page_size, ref))


def read_nodes(names: Sequence[str], *, ref: str) -> Program[dict[str, NodeLookup]]:
    """The named Nodes: 404 reads as gone, 403 as not readable; other failures are raised.

    After one 403 the remaining nodes are taken as not readable without asking: that can only withhold a
    "ceased", never grant one. A name that is not a valid node name is never put in a URL; it reads as not
    readable (the API server would not have accepted it on a pod).
    """
    result: dict[str, NodeLookup] = {}
    forbidden = False
    for name in names:
        try:
            validate_node_name(name)
        except InvalidNameError:
            result[name] = NodeRead.NOT_READABLE
            continue
        if forbidden:
            result[name] = NodeRead.NOT_READABLE
            continue
        request = GetNode(name)
        response = yield request
        if isinstance(response, ApiFailure) and response.status == 404:
            result[name] = NodeRead.GONE
        elif isinstance(response, ApiFailure) and response.status == 403:
            result[name] = NodeRead.NOT_READABLE
            forbidden = True
        else:
            result[name] = _object(response, request, ref)
    return result


#: recorded pods a drain check looks up with one GET each; beyond, one namespace-wide list finds them
MAX_LOOKUPS: Final = 32


def _lookup_recorded(
    names: Sequence[str], namespace: str, *, ref: str, page_size: int
) -> Program[dict[str, Mapping[str, Any] | None]]:
    """The pods now under the recorded names the label selections did not list (fencing.py), None where
    there is none. A name that is not a valid pod name is never put in a URL: no pod can have it."""
    if not names:
        return {}
    if len(names) > MAX_LOOKUPS:
        wanted = set(names)
        items = yield from _list_all(v.POD, namespace, None, ref, keep=lambda pod: v.name_of(pod) in wanted)
        found = {v.name_of(pod): pod for pod in items}
        return {name: found.get(name) for name in names}
    result: dict[str, Mapping[str, Any] | None] = {}
    for name in names:
        try:
            validate_node_name(name)  # a pod name is an RFC 1123 subdomain too
        except InvalidNameError:
            result[name] = None
            continue
        request = GetObject(v.POD, namespace, name)
        response = yield request
        if isinstance(response, ApiFailure) and response.status == 404:
            result[name] = None
        else:
            result[name] = _object(response, request, ref)
    return result


@dataclass(frozen=True)
class Drain:
    """What one drain check read (the pods, the recorded pods the labels missed, the Nodes it needed) and what
    of it blocks an admission.

    `remaining` is judged once here; `report` words it for the sensor, the trigger and `remaining_pods`, and
    release and `inspect` use the parts they need, so every caller decides from the same verdict.
    """

    read: PodRead
    lookups: dict[str, Mapping[str, Any] | None]
    nodes: dict[str, NodeLookup]
    remaining: tuple[RemainingPod, ...]

    def report(self, ref: str, *, now: datetime | None) -> DrainReport:
        """The drain report of this check (`assessment.DrainReport`), its resourceVersion the pod list's."""
        return remaining_report(ref, self.remaining, self.read.resource_version, now=now)


def drain(
    selection: Selection,
    *,
    ref: str,
    execution_pods: ExecutionPods | None,
    strategy: PodReadStrategy = DEFAULT_POD_READ,
    page_size: int = DEFAULT_PAGE_SIZE,
) -> Program[Drain]:
    """The drain check's reads: the consistent pod read; the recorded pods it did not list, looked up by name
    (a pod whose labels were edited is found there); then the Nodes it needs: of the pods that may block, and
    the recorded nodes where a pod the hold saw is gone (fencing.py). Writes nothing.

    The one sequence every drain check runs (release, kueue_admit, inspect, find, remaining_pods and
    `hooks.checks.drain_check`). `execution_pods` is the hold's record (`fencing.recorded`, None when there
    is none) and has no default: a caller that forgot it would not see a pod that vanished or was relabelled.
    """
    read = yield from read_pods(selection, ref=ref, strategy=strategy, page_size=page_size)
    missing = missing_names(execution_pods, read.pods)
    lookups = yield from _lookup_recorded(missing, selection.namespace, ref=ref, page_size=page_size)
    found = relabelled_pods(execution_pods, lookups)
    nodes = yield from read_nodes(nodes_to_check([*read.pods, *found], execution_pods), ref=ref)
    remaining = blocking_pods(read.pods, nodes, execution_pods, selection.namespace, lookups)
    return Drain(read, lookups, nodes, remaining)


def _replace(coords: v.ApiCoordinates, body: Mapping[str, Any], ref: str) -> Program[Mapping[str, Any]]:
    """A conditional replace; 409 raises ConflictError (retryable: the check runs again)."""
    return (yield from call(ReplaceObject(coords, body), ref))


# --- the hold's evidence and record ---------------------------------------------------------------------------


def server_time(ref: str) -> Program[datetime | None]:
    """The API server's clock (`ServerTime`); None when its answer carried no usable `Date`."""
    request = ServerTime()
    response = yield request
    return v.parse_time(_object(response, request, ref).get("date"))


def read_jobs(ref: Ref, jobset: Mapping[str, Any] | None) -> Program[dict[str, Mapping[str, Any] | None]]:
    """The Jobs the JobSet's spec implies, each read itself (a quorum GET); None where one does not exist."""
    result: dict[str, Mapping[str, Any] | None] = {}
    for name in expected_job_names(jobset):
        try:
            validate_node_name(name)  # a Job name is an RFC 1123 subdomain too
        except InvalidNameError:
            result[name] = None
            continue
        request = GetObject(v.JOB, ref.namespace, name)
        response = yield request
        result[name] = (
            None
            if isinstance(response, ApiFailure) and response.status == 404
            else _object(response, request, str(ref))
        )
    return result


def hold_evidence(
    obj: ManagedObject, execution_pods: ExecutionPods | None, *, settle_seconds: float
) -> Program[HoldEvidence]:
    """What judging the hold needs (evidence.py): the JobSet, its Jobs, and the API server's time."""
    jobset = yield from read_jobset(obj.ref)
    jobs = yield from read_jobs(obj.ref, jobset)
    now = yield from server_time(str(obj.ref))
    return HoldEvidence(jobset, jobs, execution_pods, now, settle_seconds)


def _replicated_jobs_of_runtime(trainjob: Mapping[str, Any]) -> Program[list[Mapping[str, Any]]]:
    try:
        runtime = yield from read_runtime(trainjob)
    except NotFoundError:
        return []
    return v.object_list(runtime, "spec", "template", "spec", "replicatedJobs")


def read_lineage(
    obj: ManagedObject, trainjob: Mapping[str, Any], *, page_size: int
) -> Program[tuple[tuple[Mapping[str, Any], ...], dict[str, NodeLookup]]]:
    """What a record is made of: the object's pods by a selection no label edit defeats (`selection.Lineage`), one
    full read of the namespace paid once per hold, the Job names from the JobSet, or from the runtime when there
    is none; then the Nodes of those that may run, whose Ready transition the record keeps (fencing.py)."""
    jobset = yield from read_jobset(obj.ref)
    if jobset is not None:
        replicated = v.object_list(jobset, "spec", "replicatedJobs")
    else:
        replicated = yield from _replicated_jobs_of_runtime(trainjob)
    lineage = Lineage(obj.selection, frozenset(jobset_job_names(obj.ref.name, replicated)))
    read = yield from _read_full(lineage, obj.ref.namespace, page_size, str(obj.ref))
    nodes = yield from read_nodes(nodes_to_read(read.pods), ref=str(obj.ref))
    return read.pods, nodes


def ensure_record(
    trainjob: Mapping[str, Any], obj: ManagedObject, *, page_size: int
) -> Program[tuple[Mapping[str, Any], ExecutionPods]]:
    """The record of the current execution's pods on a held object, written first when there is none (the
    object was suspended by someone else, or by Kueue): its pods by lineage, stamped with the API server's time.
    Returns the object as written (the next write is conditional on it) and the record.

    A never-admitted object (A = 0) needs no settle (evidence.py), so its record is written only when the
    lineage read finds pods a namesake left that may still run; otherwise the (empty) record is not written
    and the next check reads the namespace again."""
    text = str(obj.ref)
    existing = recorded(trainjob, obj.admission, text)
    if existing is not None:
        return trainjob, existing
    since = yield from server_time(text)
    pods, nodes = yield from read_lineage(obj, trainjob, page_size=page_size)
    made = record(obj.admission, pods, since=since, nodes=nodes)
    if obj.admission == 0 and not made.names and not made.nodes:
        return trainjob, made
    current = yield from _same_execution_after_read(trainjob, obj)
    written = yield from _replace(v.TRAINJOB, record_body(current, made.to_annotation()), text)
    return written, made


def _same_execution_after_read(trainjob: Mapping[str, Any], obj: ManagedObject) -> Program[Mapping[str, Any]]:
    """The TrainJob read again after the namespace's pods were (a full read takes seconds in a large namespace,
    and Trainer writes the TrainJob's status meanwhile): the record's write is conditional on this read, and still
    about the execution the pods were read for, held or not as it was. Otherwise a retryable ConflictError."""
    current = yield from read_trainjob(obj.ref)
    same = managed(current)
    if (same.uid, same.admission, is_held(current)) != (obj.uid, obj.admission, is_held(trainjob)):
        raise ConflictError(
            f"TrainJob {obj.ref} changed while dispatch read its pods (execution {obj.admission} -> "
            f"{same.admission}, held {is_held(trainjob)} -> {is_held(current)}); nothing was written. Retry.",
            ref=str(obj.ref),
        )
    return current


# --- release ------------------------------------------------------------------------------------------------


def _written_execution(response: Mapping[str, Any], expected: Execution) -> Execution:
    try:
        return managed(response).execution
    except RefusedError:
        return expected


def _refuse_unadmittable(trainjob: Mapping[str, Any], ref: str) -> None:
    if v.field(trainjob, "metadata", "deletionTimestamp") is not None:
        raise NotFoundError(
            f"TrainJob {ref} is being deleted, so it is not admitted. Open a new TrainJob once it is gone.",
            ref=ref,
        )
    done = finished(trainjob)
    if done is not None:
        raise FinishedError(
            f"TrainJob {ref} has finished ({done[1].get('type')}: {done[1].get('reason', '')}); unsuspending "
            "it would admit nothing. Open a new TrainJob (a new submission) instead.",
            ref=ref,
        )


def _check_before_admission(
    trainjob: Mapping[str, Any],
    obj: ManagedObject,
    execution_pods: ExecutionPods,
    *,
    now: datetime | None,
    pod_read: PodReadStrategy,
    page_size: int,
    settle_seconds: float,
    accepted_risks: Collection[str],
) -> Program[Mapping[str, Any]]:
    """DESIGN §3 on a held, recorded object; returns the runtime. Raises unless the object may be admitted:
    the runtime policy; the hold observed for this execution (evidence.py; the pods are not read before, since
    the Jobs may still create some); the drain check; then the settle. Remaining pods are reported before the
    settle because they say more (which pod, on which node, what would unblock it) and usually outlast it."""
    ref = str(obj.ref)
    runtime = yield from read_runtime(trainjob)
    check_runtime_safe(trainjob, runtime, accepted_risks)
    evidence = yield from hold_evidence(obj, execution_pods, settle_seconds=settle_seconds)
    verdict = judge_hold(trainjob, evidence, obj.admission)
    if verdict is not None and verdict.seconds_left is None:
        raise SuspensionNotObservedError(f"{verdict.reason}. Nothing was admitted.", ref=ref)
    drained = yield from drain(
        obj.selection, ref=ref, execution_pods=execution_pods, strategy=pod_read, page_size=page_size
    )
    if drained.remaining:
        raise PodsRemainError(ref, drained.remaining, now=now)
    if verdict is not None and verdict.seconds_left is not None:
        message = f"{verdict.reason}. Nothing was admitted."
        raise HoldSettlingError(message, ref=ref, seconds_left=verdict.seconds_left)
    return runtime


def release(
    ref: str | Ref,
    *,
    now: datetime | None = None,
    pod_read: PodReadStrategy = DEFAULT_POD_READ,
    page_size: int = DEFAULT_PAGE_SIZE,
    settle_seconds: float = DEFAULT_SETTLE_SECONDS,
    accepted_risks: Collection[str] = frozenset(),
) -> Program[Execution]:
    """Lift the hold and admit a new execution after the drain check passes (DESIGN §3); return its identity.

    An object already running returns its current execution and nothing is written (a retry after a lost
    response). A held object without dispatch's record of its execution's pods (suspended by someone else) gets
    the record first (`ensure_record`). Kueue mode: reactivate the Workload (Kueue re-admits; the admission
    check raises A), and return the current execution; waiting for Admitted is the caller's.
    """
    target = parse_ref(ref)
    trainjob = yield from read_trainjob(target)
    obj = managed(trainjob)
    text = str(obj.ref)
    if obj.mode is Mode.KUEUE:
        yield from _set_workloads_active(obj, active=True)
        return replace(obj.execution, released=Released.WORKLOAD_ACTIVE)
    if not is_held(trainjob):
        return replace(obj.execution, released=Released.ALREADY_RUNNING)
    _refuse_unadmittable(trainjob, text)
    trainjob, execution_pods = yield from ensure_record(trainjob, obj, page_size=page_size)
    runtime = yield from _check_before_admission(
        trainjob,
        obj,
        execution_pods,
        now=now,
        pod_read=pod_read,
        page_size=page_size,
        settle_seconds=settle_seconds,
        accepted_risks=accepted_risks,
    )
    admitted_at = yield from server_time(text)
    body, execution = admission_body(trainjob, runtime, admitted_at=admitted_at, accepted_risks=accepted_risks)
    try:
        written = yield from _replace(v.TRAINJOB, body, text)
    except ConflictError:
        # The object changed after the read that was checked. If it now runs, an admission happened: another
        # caller's, or this very write re-sent after its answer was lost (a client retrying an idempotent PUT).
        # Either way the object has one execution and releasing a running object returns it (DESIGN §3).
        # Otherwise the conflict stays retryable and the check runs again on the new state.
        current = yield from read_trainjob(target)
        if not is_held(current):
            return replace(managed(current).execution, released=Released.RUNNING_AFTER_CONFLICT)
        raise
    return replace(_written_execution(written, execution), released=Released.ADMITTED)


def kueue_admit(
    ref: str | Ref,
    *,
    admission_key: str,
    now: datetime | None = None,
    pod_read: PodReadStrategy = DEFAULT_POD_READ,
    page_size: int = DEFAULT_PAGE_SIZE,
    settle_seconds: float = DEFAULT_SETTLE_SECONDS,
    accepted_risks: Collection[str] = frozenset(),
) -> Program[Execution]:
    """Kueue mode, for the admission check controller: the drain check, then A+1 (suspend left to Kueue).

    `admission_key` identifies one Workload admission (the controller chooses it, e.g. Workload uid and the
    QuotaReserved transition time). When the TrainJob already carries that key, A was raised for this
    admission and the current execution is returned with nothing written: idempotent per Workload admission.
    Kueue suspends the TrainJob without a dispatch hold, so the first check after a suspension writes the
    record of the execution's pods (`ensure_record`), and the hold then settles (evidence.py).
    """
    target = parse_ref(ref)
    trainjob = yield from read_trainjob(target)
    obj = managed(trainjob)
    text = str(obj.ref)
    if obj.mode is not Mode.KUEUE:
        raise SpecRejectedError(
            f"TrainJob {text} has no {v.LABEL_KUEUE_QUEUE_NAME} label, so it is not in Kueue mode; use release.",
            ref=text,
        )
    if v.annotations_of(trainjob).get(v.ANNOTATION_ADMISSION_KEY) == admission_key:
        return obj.execution
    if not is_held(trainjob):
        raise SuspensionNotObservedError(
            f"TrainJob {text} is not suspended, so the admission check cannot admit it; Kueue suspends an "
            "unadmitted TrainJob again. Nothing was raised.",
            ref=text,
        )
    _refuse_unadmittable(trainjob, text)
    trainjob, execution_pods = yield from ensure_record(trainjob, obj, page_size=page_size)
    runtime = yield from _check_before_admission(
        trainjob,
        obj,
        execution_pods,
        now=now,
        pod_read=pod_read,
        page_size=page_size,
        settle_seconds=settle_seconds,
        accepted_risks=accepted_risks,
    )
    body, execution = kueue_admission_body(
        trainjob, runtime, admission_key=admission_key, accepted_risks=accepted_risks
    )
    written = yield from _replace(v.TRAINJOB, body, text)
    return _written_execution(written, execution)


# --- hold ---------------------------------------------------------------------------------------------------


def _set_workloads_active(obj: ManagedObject, *, active: bool) -> Program[int]:
    """Kueue mode hold/release: `spec.active` on the TrainJob's Workloads; returns how many were written."""
    written = 0
    for workload in (yield from _workloads(obj)):
        if (v.field(workload, "spec", "active") is not False) == active:
            continue
        spec = v.field(workload, "spec")
        body = {key: value for key, value in workload.items() if key != "status"}
        body["spec"] = {**(dict(spec) if isinstance(spec, Mapping) else {}), "active": active}
        yield from _replace(v.WORKLOAD, body, str(obj.ref))
        written += 1
    return written


def hold(
    ref: str | Ref, *, pod_read: PodReadStrategy = DEFAULT_POD_READ, page_size: int = DEFAULT_PAGE_SIZE
) -> Program[Execution]:
    """Keep the object from running (plain: `spec.suspend: true`; Kueue: Workload `spec.active: false`).

    Plain mode reads the execution's pods first, by lineage (one full read of the namespace, so that a pod
    whose labels were edited is recorded too), and records, in the same conditional write that suspends,
    which of them were not finished, their uids and nodes, the API server's time, and when dispatch started
    the execution (fencing.py, evidence.py). A failed read writes nothing (retryable): a hold without its
    record would be a hold that a force deletion or a label edit can defeat. An object already held without
    a record of its current execution (suspended by someone else) gets the record; one already held with it
    is left as it is. `pod_read` is accepted for symmetry with the other programs: the hold always reads the
    whole namespace. Returns the current execution identity.
    """
    del pod_read
    target = parse_ref(ref)
    trainjob = yield from read_trainjob(target)
    obj = managed(trainjob)
    text = str(obj.ref)
    if obj.mode is Mode.KUEUE:
        workloads = yield from _workloads(obj)
        if not workloads and not is_held(trainjob):
            raise UnreachableError(
                f"TrainJob {obj.ref} runs under Kueue but has no Workload yet, so there is nothing to "
                "deactivate; retry once Kueue has created it.",
                ref=text,
            )
        yield from _set_workloads_active(obj, active=False)
        return obj.execution
    if is_held(trainjob):
        yield from ensure_record(trainjob, obj, page_size=page_size)
        return obj.execution
    since = yield from server_time(text)
    pods, nodes = yield from read_lineage(obj, trainjob, page_size=page_size)
    trainjob = yield from _same_execution_after_read(trainjob, obj)
    # a record of this execution on a running object means it was held and resumed outside dispatch since
    # dispatch started it: its start is then unknown (evidence.py)
    resumed_outside = recorded(trainjob, obj.admission, text) is not None
    started = None if resumed_outside else v.parse_time(v.annotations_of(trainjob).get(v.ANNOTATION_ADMITTED_AT))
    made = record(obj.admission, pods, since=since, started=started, nodes=nodes)
    yield from _replace(v.TRAINJOB, hold_body(trainjob, made.to_annotation()), text)
    return obj.execution


# --- open ---------------------------------------------------------------------------------------------------

#: metadata the API server sets; dropped from a manifest before it is created
_SERVER_METADATA: Final = (
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "generation",
    "managedFields",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "selfLink",
)


def prepare_manifest(manifest: Mapping[str, Any], ref: str | Ref | None = None) -> tuple[Ref, dict[str, Any]]:
    """The create body for `open`: the manifest, held, without server-set fields; refused when unusable."""
    if not isinstance(manifest, Mapping):
        raise SpecRejectedError("the TrainJob manifest must be an object (a dict)")
    metadata = manifest.get("metadata")
    if not isinstance(metadata, Mapping):
        raise SpecRejectedError("the TrainJob manifest has no metadata: give metadata.name and the dispatch labels")
    given = parse_ref(ref) if ref is not None else None
    if "generateName" in metadata and "name" not in metadata:
        raise SpecRejectedError("the TrainJob manifest uses metadata.generateName; open needs a fixed metadata.name")
    name = validate_trainjob_name(metadata.get("name"))
    namespace = metadata.get("namespace") or (given.namespace if given else None)
    if namespace is None:
        raise SpecRejectedError(f"the TrainJob manifest {name} has no metadata.namespace, and no ref was given")
    target = Ref(validate_namespace(namespace), name)
    text = str(target)
    if given is not None and given != target:
        raise SpecRejectedError(f"the manifest names TrainJob {text} but open was asked for {given}", ref=text)
    for key, expected in (("apiVersion", v.TRAINJOB.api_version), ("kind", v.TRAINJOB.kind)):
        if manifest.get(key, expected) != expected:
            raise SpecRejectedError(
                f"the manifest for {text} has {key} {manifest.get(key)!r}; open creates a {expected} only",
                ref=text,
            )
    found = v.labels_of(manifest)
    for key, check in ((v.LABEL_JOB_ID, validate_job_id), (v.LABEL_SUBMISSION, validate_submission)):
        if key not in found:
            raise SpecRejectedError(
                f"the manifest for TrainJob {text} lacks the label {key}; open needs {v.LABEL_JOB_ID} and "
                f"{v.LABEL_SUBMISSION} to identify its executions",
                ref=text,
            )
        check(found[key], ref=text)
    if v.ANNOTATION_ADMISSION in v.annotations_of(manifest):
        raise SpecRejectedError(
            f"the manifest for TrainJob {text} sets the annotation {v.ANNOTATION_ADMISSION}; dispatch owns "
            "the admission number, remove it",
            ref=text,
        )
    patches = v.object_list(manifest, "spec", "runtimePatches")
    if any(p.get("manager") == v.RUNTIME_PATCH_MANAGER for p in patches):
        raise SpecRejectedError(
            f"the manifest for TrainJob {text} carries a runtime patch of manager {v.RUNTIME_PATCH_MANAGER}; "
            "dispatch owns that patch, remove it",
            ref=text,
        )
    spec = manifest.get("spec")
    if not isinstance(spec, Mapping):
        raise SpecRejectedError(f"the manifest for TrainJob {text} has no spec", ref=text)
    body_metadata = {k: val for k, val in metadata.items() if k not in _SERVER_METADATA}
    body_metadata["namespace"] = target.namespace
    body = {
        "apiVersion": v.TRAINJOB.api_version,
        "kind": v.TRAINJOB.kind,
        "metadata": body_metadata,
        "spec": {**dict(spec), "suspend": True},
    }
    runtime_reference(body)
    return target, body


def open(
    manifest: Mapping[str, Any],
    *,
    ref: str | Ref | None = None,
    now: datetime | None = None,
    pod_read: PodReadStrategy = DEFAULT_POD_READ,
    page_size: int = DEFAULT_PAGE_SIZE,
    settle_seconds: float = DEFAULT_SETTLE_SECONDS,
    accepted_risks: Collection[str] = frozenset(),
) -> Program[Execution]:
    """Create the object held, then release it: the same check applies (a namesake may have left pods).

    The create body carries the record of execution 0 (fencing.py): the pods a namesake left, read by lineage,
    so that release needs no write of its own before it checks. On AlreadyExists the existing TrainJob is taken
    as this object when it carries the same job id and submission (a retried open after a lost response);
    anything else is refused (AlreadyExistsError). Right after creation Trainer has usually not observed the
    hold yet, so the release raises SuspensionNotObservedError; retrying open then continues with the existing
    object.
    """
    target, body = prepare_manifest(manifest, ref)
    text = str(target)
    runtime = yield from read_runtime(body)
    check_runtime_safe(body, runtime, accepted_risks)
    obj = managed(body)
    dispatch_runtime_patch(runtime, obj.execution)
    since = yield from server_time(text)
    leftovers, nodes = yield from read_lineage(obj, body, page_size=page_size)
    annotations = body["metadata"].setdefault("annotations", {})
    annotations[v.ANNOTATION_EXECUTION_PODS] = record(0, leftovers, since=since, nodes=nodes).to_annotation()
    request = CreateObject(v.TRAINJOB, target.namespace, body)
    response = yield request
    if isinstance(response, ApiFailure):
        if response.status != 409:
            raise _failure(request, response, text)
        lookup = GetObject(v.TRAINJOB, target.namespace, target.name)
        existing = yield lookup
        if isinstance(existing, ApiFailure) and existing.status == 404:
            raise UnreachableError(
                f"TrainJob {text} existed when open tried to create it and is gone now (it was being "
                "deleted); retry open.",
                ref=text,
            )
        _same_object_or_refuse(_object(existing, lookup, text), body, text)
    else:
        _object(response, request, text)
    return (
        yield from release(
            target,
            now=now,
            pod_read=pod_read,
            page_size=page_size,
            settle_seconds=settle_seconds,
            accepted_risks=accepted_risks,
        )
    )


def _same_object_or_refuse(existing: Mapping[str, Any], body: Mapping[str, Any], text: str) -> None:
    mine = v.labels_of(body)
    theirs = v.labels_of(existing)
    same = all(theirs.get(key) == mine.get(key) for key in (v.LABEL_JOB_ID, v.LABEL_SUBMISSION))
    if not same:
        raise AlreadyExistsError(
            f"TrainJob {text} already exists as another object (job id {theirs.get(v.LABEL_JOB_ID)!r}, "
            f"submission {theirs.get(v.LABEL_SUBMISSION)!r}; open was asked for job id "
            f"{mine.get(v.LABEL_JOB_ID)!r}, "
            f"submission {mine.get(v.LABEL_SUBMISSION)!r}). Delete it, or open under another name.",
            ref=text,
        )
    if v.field(existing, "metadata", "deletionTimestamp") is not None:
        raise UnreachableError(f"TrainJob {text} exists but is being deleted; retry open once it is gone.", ref=text)


# --- read-only programs -------------------------------------------------------------------------------------


def _inspect_object(
    trainjob: Mapping[str, Any],
    *,
    now: datetime | None,
    pod_read: PodReadStrategy,
    page_size: int,
    settle_seconds: float,
) -> Program[Status]:
    obj = managed(trainjob)
    workload: Mapping[str, Any] | None = None
    if obj.mode is Mode.KUEUE:
        workloads = yield from _workloads(obj)
        workload = workloads[0] if workloads else None
    execution_pods = recorded(trainjob, obj.admission, str(obj.ref))
    evidence = yield from hold_evidence(obj, execution_pods, settle_seconds=settle_seconds)
    drained = yield from drain(
        obj.selection, ref=str(obj.ref), execution_pods=execution_pods, strategy=pod_read, page_size=page_size
    )
    status = assess(
        trainjob, evidence, drained.read.pods, drained.nodes, lookups=drained.lookups, workload=workload, now=now
    )
    return with_unfinished(status, trainjob, drained.read.pods, drained.nodes, workload=workload, now=now)


def inspect(
    ref: str | Ref,
    *,
    now: datetime | None = None,
    pod_read: PodReadStrategy = DEFAULT_POD_READ,
    page_size: int = DEFAULT_PAGE_SIZE,
    settle_seconds: float = DEFAULT_SETTLE_SECONDS,
) -> Program[Status]:
    """The status of one object (DESIGN §7). Writes nothing."""
    trainjob = yield from read_trainjob(parse_ref(ref))
    return (
        yield from _inspect_object(
            trainjob, now=now, pod_read=pod_read, page_size=page_size, settle_seconds=settle_seconds
        )
    )


def find(
    namespace: str,
    job_id: str,
    *,
    now: datetime | None = None,
    pod_read: PodReadStrategy = DEFAULT_POD_READ,
    page_size: int = DEFAULT_PAGE_SIZE,
    settle_seconds: float = DEFAULT_SETTLE_SECONDS,
) -> Program[Status]:
    """The status of the newest TrainJob in the namespace with that job id (by creationTimestamp, then name).

    Several TrainJobs can share a job id (one per submission); the newest is the job's current submission.
    Writes nothing.
    """
    validate_namespace(namespace)
    validate_job_id(job_id)
    where = f"{namespace}/*"
    items = yield from _list_all(v.TRAINJOB, namespace, f"{v.LABEL_JOB_ID}={job_id}", where)
    matching = [t for t in items if v.labels_of(t).get(v.LABEL_JOB_ID) == job_id]
    if not matching:
        raise NotFoundError(
            f"no TrainJob in namespace {namespace} carries {v.LABEL_JOB_ID}={job_id}. Open one, or check the "
            "namespace and job id.",
            ref=where,
        )

    def newest(t: Mapping[str, Any]) -> tuple[str, str]:
        stamp = v.field(t, "metadata", "creationTimestamp")
        return (stamp if isinstance(stamp, str) else "", v.name_of(t))

    return (
        yield from _inspect_object(
            max(matching, key=newest), now=now, pod_read=pod_read, page_size=page_size, settle_seconds=settle_seconds
        )
    )


@dataclass(frozen=True)
class Listed:
    """One TrainJob of `list_managed`: its status, or the refusal that kept it from being assessed."""

    ref: str
    created: str | None
    status: Status | None = None
    refused: RefusedError | None = None


def list_managed(
    namespace: str | None,
    *,
    now: datetime | None = None,
    pod_read: PodReadStrategy = DEFAULT_POD_READ,
    page_size: int = DEFAULT_PAGE_SIZE,
    settle_seconds: float = DEFAULT_SETTLE_SECONDS,
) -> Program[tuple[Listed, ...]]:
    """Every TrainJob carrying dispatch's job-id label in the namespace (None: all), each assessed as `inspect`
    assesses it, ordered by namespace and name. Writes nothing.

    One TrainJob that cannot be assessed (its labels are not dispatch's, say) is a refusal in its entry, so one
    bad object does not hide the others; a failure worth retrying (unreachable, 5xx) ends the whole list.
    """
    if namespace is not None:
        validate_namespace(namespace)
    where = f"{namespace or '*'}/*"
    items = yield from _list_all(v.TRAINJOB, namespace, v.LABEL_JOB_ID, where)
    listed: list[Listed] = []
    for trainjob in sorted(items, key=lambda t: (v.namespace_of(t), v.name_of(t))):
        ref = f"{v.namespace_of(trainjob)}/{v.name_of(trainjob)}"
        stamp = v.field(trainjob, "metadata", "creationTimestamp")
        created = stamp if isinstance(stamp, str) else None
        try:
            status = yield from _inspect_object(
                trainjob, now=now, pod_read=pod_read, page_size=page_size, settle_seconds=settle_seconds
            )
        except RefusedError as error:
            listed.append(Listed(ref, created, refused=error))
            continue
        listed.append(Listed(ref, created, status=status))
    return tuple(listed)


def remaining_pods(
    ref: str | Ref,
    *,
    job_id: str | None = None,
    submission: str | None = None,
    now: datetime | None = None,
    pod_read: PodReadStrategy = DEFAULT_POD_READ,
    page_size: int = DEFAULT_PAGE_SIZE,
) -> Program[DrainReport]:
    """The object's remaining pods with their node states. Writes nothing; works read-only.

    When the TrainJob no longer exists (deleted; its pods may linger), pods are selected by jobset-name, and
    by `job_id`/`submission` when given.
    """
    target = parse_ref(ref)
    text = str(target)
    request = GetObject(v.TRAINJOB, target.namespace, target.name)
    response = yield request
    execution_pods: ExecutionPods | None = None
    if isinstance(response, ApiFailure) and response.status == 404:
        selection = Selection(target.namespace, target.name, job_id, submission)
    else:
        trainjob = _object(response, request, text)
        obj = managed(trainjob)
        selection = obj.selection
        execution_pods = recorded(trainjob, obj.admission, text)
    drained = yield from drain(
        selection, ref=text, execution_pods=execution_pods, strategy=pod_read, page_size=page_size
    )
    return drained.report(text, now=now)


def ceased(
    ref: str | Ref,
    *,
    job_id: str | None = None,
    submission: str | None = None,
    pod_read: PodReadStrategy = DEFAULT_POD_READ,
    page_size: int = DEFAULT_PAGE_SIZE,
) -> Program[bool]:
    """Every remaining pod's processes are proven gone (True also when none remains). Writes nothing."""
    report = yield from remaining_pods(
        ref, job_id=job_id, submission=submission, pod_read=pod_read, page_size=page_size
    )
    return report.ceased


__all__ = [
    "DEFAULT_PAGE_SIZE",
    "DEFAULT_POD_READ",
    "EXACT_REFUSED",
    "ApiFailure",
    "CreateObject",
    "Drain",
    "GetNode",
    "GetObject",
    "ListObjects",
    "Listed",
    "PodRead",
    "PodReadStrategy",
    "Program",
    "ReplaceObject",
    "Request",
    "Response",
    "call",
    "ceased",
    "drain",
    "drive",
    "drive_async",
    "find",
    "hold",
    "inspect",
    "kueue_admit",
    "list_managed",
    "open",
    "prepare_manifest",
    "read_nodes",
    "read_pods",
    "release",
    "remaining_pods",
]

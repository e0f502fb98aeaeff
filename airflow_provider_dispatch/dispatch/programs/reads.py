"""The small steps every program is built of: one call, its failure classified, and the reads of single objects.

`call` carries one request and turns an `ApiFailure` into the `DispatchError` it means
(`errors.classify_api_failure`); `read_trainjob`, `read_jobset`, `read_runtime`, the Workloads and the API
server's clock (`server_time`) are the reads the operations share. All names that reach a request were validated
first (validation.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from airflow_provider_dispatch.dispatch import vocabulary as v
from airflow_provider_dispatch.dispatch.admission import runtime_reference
from airflow_provider_dispatch.dispatch.assessment import ManagedObject
from airflow_provider_dispatch.dispatch.errors import (
    DispatchError,
    NotFoundError,
    UnreachableError,
    classify_api_failure,
)
from airflow_provider_dispatch.dispatch.programs.protocol import (
    DEFAULT_PAGE_SIZE,
    MAX_LIST_RESTARTS,
    ApiFailure,
    GetObject,
    ListObjects,
    Program,
    Request,
    Response,
    ServerTime,
)
from airflow_provider_dispatch.dispatch.validation import Ref, validate_label_value

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


def server_time(ref: str) -> Program[datetime | None]:
    """The API server's clock (`ServerTime`); None when its answer carried no usable `Date`."""
    request = ServerTime()
    response = yield request
    return v.parse_time(_object(response, request, ref).get("date"))

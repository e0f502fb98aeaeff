"""The consistent read of the namespace's pods, the Nodes fencing needs, and `drain`, the one drain check's reads.

The consistent read (DESIGN §3.2), `read_pods`, has two strategies:

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
and server results are filtered locally again. `drain` is the one read sequence of every drain check (pods,
then the Nodes fencing needs), which the release, the Kueue admission check and `hooks/checks.py` share.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final, Protocol

from airflow_provider_dispatch.dispatch import vocabulary as v
from airflow_provider_dispatch.dispatch.assessment import DrainReport, remaining_report
from airflow_provider_dispatch.dispatch.blocking import RemainingPod
from airflow_provider_dispatch.dispatch.errors import InvalidNameError, UnreachableError
from airflow_provider_dispatch.dispatch.fencing import (
    ExecutionPods,
    blocking_pods,
    judged_nodes,
    missing_names,
    nodes_to_check,
    relabelled_pods,
)
from airflow_provider_dispatch.dispatch.nodes import DEFAULT_CLOCK_SKEW_SECONDS, NodeLookup, NodeRead
from airflow_provider_dispatch.dispatch.programs.protocol import (
    DEFAULT_PAGE_SIZE,
    DEFAULT_POD_READ,
    EXACT_REFUSED,
    MAX_LIST_RESTARTS,
    ApiFailure,
    GetNode,
    GetObject,
    PodReadStrategy,
    Program,
    ReplaceObject,
)
from airflow_provider_dispatch.dispatch.programs.reads import (
    _failure,
    _list_all,
    _list_pages,
    _object,
    _PageFailure,
    call,
    server_time,
)
from airflow_provider_dispatch.dispatch.selection import Selection
from airflow_provider_dispatch.dispatch.validation import validate_node_name

# --- the consistent pod read --------------------------------------------------------------------------------


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
    #: `nodes` with each deletion judged (`fencing.judged_nodes`): what the verdict used
    judged: dict[str, NodeLookup] = field(default_factory=dict)
    #: the API server's time read after the Nodes, when one was found deleted (None otherwise)
    server_now: datetime | None = None

    @property
    def pods(self) -> list[Mapping[str, Any]]:
        """Every pod this check saw: the listed ones and the recorded ones found by name."""
        return [*self.read.pods, *(pod for pod in self.lookups.values() if pod is not None)]

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
    clock_skew_seconds: float = DEFAULT_CLOCK_SKEW_SECONDS,
) -> Program[Drain]:
    """The drain check's reads: the consistent pod read; the recorded pods it did not list, looked up by name
    (a pod whose labels were edited is found there); then the Nodes it needs: of the pods that may block, and
    the recorded nodes where a pod the hold saw is gone (fencing.py); and, when a Node was found deleted, the API
    server's time after that (a deletion is proof only a while after it was first seen: `fencing.judged_nodes`).
    Writes nothing.

    The one sequence every drain check runs (release, kueue_admit, inspect, find, remaining_pods and
    `hooks.checks.drain_check`). `execution_pods` is the hold's record (`fencing.recorded`, None when there
    is none) and has no default: a caller that forgot it would not see a pod that vanished or was relabelled.
    `nodes` in the result are as read (a writer's check records deletions from them); `remaining` is judged on
    `judged`.
    """
    read = yield from read_pods(selection, ref=ref, strategy=strategy, page_size=page_size)
    missing = missing_names(execution_pods, read.pods)
    lookups = yield from _lookup_recorded(missing, selection.namespace, ref=ref, page_size=page_size)
    found = relabelled_pods(execution_pods, lookups)
    nodes = yield from read_nodes(nodes_to_check([*read.pods, *found], execution_pods), ref=ref)
    # read after the Nodes: a Node found deleted was deleted by then (what a writer records as its first sight)
    now = (yield from server_time(ref)) if NodeRead.GONE in nodes.values() else None
    judged = judged_nodes(nodes, execution_pods, now, clock_skew_seconds, [*read.pods, *found])
    remaining = blocking_pods(read.pods, judged, execution_pods, selection.namespace, lookups)
    return Drain(read, lookups, nodes, remaining, judged, now)


def _replace(coords: v.ApiCoordinates, body: Mapping[str, Any], ref: str) -> Program[Mapping[str, Any]]:
    """A conditional replace; 409 raises ConflictError (retryable: the check runs again)."""
    return (yield from call(ReplaceObject(coords, body), ref))

"""LIST: selectors, resourceVersion semantics and pagination, as the apiserver serves them.

resourceVersion on a list (`https://kubernetes.io/docs/reference/using-api/api-concepts/#semantics-for-get-and-list`,
`apiserver/pkg/storage/interfaces.go` `ListOptions`, `apimachinery/pkg/apis/meta/internalversion/validation`):

- unset: the most recent state, a consistent (quorum) read;
- `0`: any state the server has (the watch cache's, which may be stale); the lab serves the latest unless a fault
  makes it stale;
- `N` with `resourceVersionMatch` unset or `NotOlderThan`: at least as new as N (504 "Too large resource
  version" if the store has not reached N);
- `N` with `Exact`: exactly the state at N (410 Expired once N is compacted);
- `resourceVersionMatch` without `resourceVersion`, with `continue`, or `Exact` with `0`: 422 Invalid
  `ListOptions.meta.k8s.io` (`ValidateListOptions`); `resourceVersion` with `continue`: 400.

Pagination (`limit`, `continue`): every page is read at the revision of the first, so a paged list is one
snapshot; the continue token carries that revision and the last key, like etcd3's (`storage/etcd3/store.go`
`encodeContinue`), and expires with a 410 when the revision is compacted (the apiserver's message, with a fresh
inconsistent-continue token, follows `storage/errors.go`; the real API server serves pages and exact reads from its
watch cache, which outlives an etcd compaction: docs/fidelity.md). `remainingItemCount` is set only when no selector
filters the list.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_provider_dispatch_lab.apiserver import errors
from airflow_provider_dispatch_lab.apiserver.errors import bad_request, expired, not_acceptable_resource_version
from airflow_provider_dispatch_lab.apiserver.registry.resources import ResourceType
from airflow_provider_dispatch_lab.apiserver.storage.selectors import (
    FieldSelector,
    LabelSelector,
    SelectorError,
    field_values,
    parse_field_selector,
)
from airflow_provider_dispatch_lab.apiserver.storage.store import CompactedError, FutureRevisionError, Key, Store

Obj = dict[str, Any]

CONTINUE_TOO_OLD = (
    "The provided continue parameter is too old to display a consistent list result. You can start a new list "
    "without the continue parameter, or use the continue token in this response to retrieve the remainder of the "
    "results. Continuing with the provided token results in an inconsistent list - objects that were created, "
    "modified, or deleted between the time the first chunk was returned and now may show up in the list."
)
LIST_TOO_OLD = "The resourceVersion for the provided list is too old."


@dataclass(frozen=True)
class Filter:
    """The label and field selectors of a list or watch."""

    labels: LabelSelector
    fields: FieldSelector
    kind: str
    selective: bool

    @classmethod
    def parse(cls, query: Mapping[str, str], resource: ResourceType) -> Filter:
        label_text = query.get("labelSelector", "")
        field_text = query.get("fieldSelector", "")
        try:
            labels = LabelSelector.parse(label_text)
            fields = parse_field_selector(
                resource.kind,
                field_text,
                namespaced=resource.namespaced,
                custom_resource=not resource.is_builtin,
            )
        except SelectorError as error:
            raise bad_request(str(error)) from error
        return cls(labels, fields, resource.kind, bool(label_text.strip() or field_text.strip()))

    def matches(self, obj: Obj | None) -> bool:
        if obj is None:
            return False
        if not self.labels.matches((obj.get("metadata") or {}).get("labels") or {}):
            return False
        # Field values are worked out only when a field selector has terms: for a list without one (a paged list
        # of a 50,000-pod namespace, read to count `remainingItemCount`) they were most of the lab's list cost.
        return not self.fields.requirements or self.fields.matches(field_values(self.kind, obj))


@dataclass(frozen=True)
class ContinueToken:
    revision: int
    start_after: Key

    def encode(self) -> str:
        raw = json.dumps({"v": "meta.k8s.io/v1", "rv": self.revision, "start": list(self.start_after)})
        return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")

    @classmethod
    def decode(cls, token: str) -> ContinueToken:
        try:
            padded = token + "=" * (-len(token) % 4)
            data = json.loads(base64.urlsafe_b64decode(padded.encode()))
            if data.get("v") != "meta.k8s.io/v1":
                raise ValueError("unknown version")
            start = data["start"]
            return cls(int(data["rv"]), (str(start[0]), str(start[1])))
        except (ValueError, KeyError, IndexError, TypeError) as error:
            raise bad_request(f"continue key is not valid: {error}") from error


def _parse_limit(query: Mapping[str, str]) -> int:
    text = query.get("limit", "")
    if not text:
        return 0
    try:
        limit = int(text)
    except ValueError as error:
        raise bad_request(f"limit must be an integer, not {text!r}") from error
    return max(limit, 0)


def list_options_causes(query: Mapping[str, str]) -> list[dict[str, str]]:
    """What `ValidateListOptions` refuses, as the causes of one 422 Invalid on `ListOptions.meta.k8s.io`
    (`apimachinery/pkg/apis/meta/internalversion/validation/validation.go`; the handler wraps them with
    `NewInvalid`, as the real API server answers)."""
    match = query.get("resourceVersionMatch", "")
    if not match:
        return []
    causes: list[dict[str, str]] = []

    def forbidden(message: str) -> None:
        causes.append(
            {"reason": "FieldValueForbidden", "message": f"Forbidden: {message}", "field": "resourceVersionMatch"}
        )

    if not query.get("resourceVersion"):
        forbidden("resourceVersionMatch is forbidden unless resourceVersion is provided")
    if query.get("continue"):
        forbidden("resourceVersionMatch is forbidden when continue is provided")
    if match not in ("Exact", "NotOlderThan"):
        causes.append(
            {
                "reason": "FieldValueNotSupported",
                "message": f'Unsupported value: "{match}": supported values: "Exact", "NotOlderThan"',
                "field": "resourceVersionMatch",
            }
        )
    if match == "Exact" and query.get("resourceVersion") == "0":
        forbidden('resourceVersionMatch "exact" is forbidden for resourceVersion "0"')
    return causes


def read_revision(store: Store, query: Mapping[str, str], stale_revision: int | None = None) -> int:
    """The revision a list reads at, from `resourceVersion` and `resourceVersionMatch`."""
    rv_text = query.get("resourceVersion", "")
    match = query.get("resourceVersionMatch", "")
    invalid = list_options_causes(query)
    if invalid:
        raise errors.invalid("ListOptions", "meta.k8s.io", "", invalid)
    if query.get("continue") and rv_text and rv_text != "0":
        raise bad_request("specifying resource version is not allowed when using continue")
    if not rv_text:
        return store.revision
    if rv_text == "0":
        return store.revision if stale_revision is None else max(stale_revision, store.compacted_revision)
    try:
        requested = int(rv_text)
    except ValueError as error:
        raise bad_request(f"resourceVersion: Invalid value: {rv_text!r}: must be a non-negative integer") from error
    if requested > store.revision:
        raise not_acceptable_resource_version(requested, store.revision)
    if match == "Exact":
        if requested < store.compacted_revision:
            raise expired(LIST_TOO_OLD)
        return requested
    return store.revision


def list_objects(
    store: Store,
    resource: ResourceType,
    namespace: str | None,
    query: Mapping[str, str],
    stale_revision: int | None = None,
) -> Obj:
    """The `<Kind>List` body for a LIST request."""
    selection = Filter.parse(query, resource)
    limit = _parse_limit(query)
    start_after: Key | None = None
    if query.get("continue"):
        token = ContinueToken.decode(query["continue"])
        if token.revision < store.compacted_revision:
            error = expired(CONTINUE_TOO_OLD)
            error.metadata = {"continue": ContinueToken(store.revision, token.start_after).encode()}
            raise error
        revision, start_after = token.revision, token.start_after
    else:
        revision = read_revision(store, query, stale_revision)

    items: list[Obj] = []
    next_key: Key | None = None
    last_key: Key | None = None
    remaining = 0
    try:
        for key, obj in store.scan(resource.qualified, namespace, revision, start_after):
            if not selection.matches(obj):
                continue
            if limit and len(items) >= limit:
                if next_key is None:
                    next_key = last_key
                remaining += 1
                if selection.selective:
                    break
                continue
            items.append(_list_item(resource, obj))
            last_key = key
    except CompactedError as error:
        raise expired(LIST_TOO_OLD) from error
    except FutureRevisionError as error:
        raise not_acceptable_resource_version(error.requested, error.current) from error

    metadata: Obj = {"resourceVersion": str(revision)}
    if next_key is not None:
        metadata["continue"] = ContinueToken(revision, next_key).encode()
        if not selection.selective:
            metadata["remainingItemCount"] = remaining
    return {
        "kind": f"{resource.kind}List",
        "apiVersion": resource.api_version,
        "metadata": metadata,
        "items": items,
    }


def _list_item(resource: ResourceType, obj: Obj) -> Obj:
    """Built-in lists carry `kind`/`apiVersion` only at the top; custom resource lists keep them per item."""
    if resource.is_builtin:
        return {k: v for k, v in obj.items() if k not in ("kind", "apiVersion")}
    return obj

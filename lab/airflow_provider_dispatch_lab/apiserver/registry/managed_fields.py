"""managedFields for writes that are not server-side apply: create, update and the other patch kinds.

kube-apiserver tracks field ownership on every write, not only on apply (kubernetes/kubernetes v1.36,
`staging/src/k8s.io/apimachinery/pkg/util/managedfields/internal`):

* `fieldmanager.go` `FieldManager.Update` (and `UpdateNoErrors`, which the create, update and patch handlers
  call): the manager is the request's `fieldManager`, or else the User-Agent up to its first `/`
  (`handlers/rest.go` `prefixFromUserAgent`); the entries start from those the request carries, unless it
  carries none or writes a subresource, and then from the live object's.
* structured-merge-diff `merge/update.go` `Updater.Update`: the fields the write added or modified are taken
  from every other manager and owned by this one (operation `Update`, its apiVersion and subresource); fields it
  removed are owned by nobody.
* `managedfieldsupdater.go`: the entry's `time` is set to now only when the write changed a field (so a write
  that changes nothing leaves every time as it was); `stripmeta.go`: the server-set metadata is never owned;
  the strategies' reset fields (`ResetFieldsStrategy`: `status` for a write of the main resource, `spec` and
  `metadata` for a status write) are never owned through that write.

dispatch reads these times: the newest time of a JobSet's or a Job's entries outside `/status` is when its spec
(its suspension, for one) last changed, on the API server's clock (evidence.py, the settle). A write whose fields
cannot be walked (a list whose items lack their keys) keeps the entries as they were, as `UpdateNoErrors` logs and
goes on.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_provider_dispatch_lab.apiserver.registry.patching import (
    _STRIPPED,
    ListSemanticsFn,
    PatchError,
    _decode_managers,
    _entry,
    _Manager,
    _store_managers,
    _Walker,
)

__all__ = ["manager_of", "track_write"]


def manager_of(field_manager: str | None, user_agent: str) -> str:
    """The manager a non-apply write is recorded under (`prefixFromUserAgent` when no `fieldManager` is given)."""
    if field_manager:
        return field_manager
    return user_agent.split("/", 1)[0]


def track_write(
    live: Mapping[str, Any] | None,
    new: dict[str, Any],
    manager: str,
    list_semantics: ListSemanticsFn,
    subresource: str | None,
    now: str,
) -> None:
    """Record, in `new`'s managedFields, that `manager` wrote `new` over `live` (None: created it)."""
    walker = _Walker(list_semantics)
    try:
        added, modified, removed = walker.compare(_without_managed(live or {}), _without_managed(new))
    except PatchError:
        return
    reset = _reset_roots(subresource)
    changed = {path for path in added | modified if _owned(path, reset)}
    removed = {path for path in removed if _owned(path, reset)}
    if not changed and not removed:
        _restore(live, new, subresource)
        return
    try:
        managers = _decode_managers(_entries_kept(live, new, subresource))
    except PatchError:
        managers = {}
    api_version = str(new.get("apiVersion", ""))
    me = (manager, "Update", subresource or "", api_version)
    for identity, state in managers.items():
        if identity != me:
            state.fields -= changed | removed
    previous = managers.get(me)
    fields = ((previous.fields if previous else set()) - removed) | changed
    managers[me] = _Manager(_entry(me, api_version, bool(changed), now, previous), fields, frozenset())
    _store_managers(new, managers, me, previous)


def _reset_roots(subresource: str | None) -> tuple[str, ...]:
    """The top-level fields the write's strategy resets, which nobody owns through it (`ResetFieldsStrategy`):
    a status write owns nothing outside `status`, a write of the main resource nothing inside it."""
    if subresource == "status":
        return ("spec", "metadata")
    return ("status",) if subresource is None else ()


def _owned(path: tuple[tuple[str, str], ...], reset: tuple[str, ...]) -> bool:
    if path in _STRIPPED:
        return False
    return not (path and path[0][0] == "f" and path[0][1] in reset)


def _without_managed(obj: Mapping[str, Any]) -> dict[str, Any]:
    metadata = obj.get("metadata")
    if not isinstance(metadata, Mapping) or "managedFields" not in metadata:
        return dict(obj)
    return {**obj, "metadata": {k: v for k, v in metadata.items() if k != "managedFields"}}


def _entries_kept(live: Mapping[str, Any] | None, new: Mapping[str, Any], subresource: str | None) -> Any:
    """The managedFields a write starts from: those it carries (a client may rewrite them), except through a
    subresource, which cannot change them, or else the live ones."""
    sent = (new.get("metadata") or {}).get("managedFields")
    return sent if sent and not subresource else (live or {}).get("metadata", {}).get("managedFields")


def _restore(live: Mapping[str, Any] | None, new: dict[str, Any], subresource: str | None) -> None:
    """A write that changed no field keeps the entries it starts from (`_entries_kept`)."""
    kept = _entries_kept(live, new, subresource)
    metadata = new.setdefault("metadata", {})
    if kept:
        metadata["managedFields"] = kept
    else:
        metadata.pop("managedFields", None)

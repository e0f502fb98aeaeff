"""Small object helpers the workload controllers share: owner references, conditions, merges.

Each mirrors an apimachinery or controller helper so that the controllers read like their upstream
counterparts: `metav1.NewControllerRef` / `metav1.GetControllerOf`, `meta.SetStatusCondition`,
`jsonmergepatch.CreateMergePatch` (what controller-runtime's `client.MergeFrom` sends), JobSet's
`collections.MergeMaps` / `MergeSlices`.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

from airflow_provider_dispatch.dispatch.vocabulary import ApiCoordinates

Obj = dict[str, Any]
Key = tuple[str, str]
"""(namespace, name); the namespace is "" for cluster-scoped objects."""


def meta(obj: Mapping[str, Any]) -> Obj:
    value = obj.get("metadata")
    return value if isinstance(value, dict) else {}


def key_of(obj: Mapping[str, Any]) -> Key:
    metadata = meta(obj)
    return (str(metadata.get("namespace") or ""), str(metadata.get("name") or ""))


def uid_of(obj: Mapping[str, Any]) -> str:
    return str(meta(obj).get("uid") or "")


def is_deleting(obj: Mapping[str, Any]) -> bool:
    return bool(meta(obj).get("deletionTimestamp"))


def controller_reference(owner: Mapping[str, Any], coords: ApiCoordinates) -> Obj:
    """`metav1.NewControllerRef`: controller and blockOwnerDeletion both true."""
    return {
        "apiVersion": coords.api_version,
        "kind": coords.kind,
        "name": meta(owner)["name"],
        "uid": meta(owner)["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def controller_of(obj: Mapping[str, Any]) -> Obj | None:
    """`metav1.GetControllerOf`: the owner reference with `controller: true`, if any."""
    for ref in meta(obj).get("ownerReferences") or ():
        if isinstance(ref, dict) and ref.get("controller") is True:
            return ref
    return None


def is_controlled_by(obj: Mapping[str, Any], owner: Mapping[str, Any]) -> bool:
    ref = controller_of(obj)
    return ref is not None and ref.get("uid") == uid_of(owner)


def find_condition(conditions: Iterable[Any] | None, kind: str) -> Obj | None:
    for condition in conditions or ():
        if isinstance(condition, dict) and condition.get("type") == kind:
            return condition
    return None


def condition_true(obj: Mapping[str, Any], kind: str) -> bool:
    condition = find_condition((obj.get("status") or {}).get("conditions"), kind)
    return condition is not None and condition.get("status") == "True"


def set_status_condition(conditions: list[Obj], new: Mapping[str, Any], now: str) -> bool:
    """`meta.SetStatusCondition` for `metav1.Condition`: the transition time moves only when the status
    changes (to the new condition's own time if it carries one, else now); reason, message and
    observedGeneration are always taken. Returns whether anything changed."""
    existing = find_condition(conditions, str(new["type"]))
    if existing is None:
        added = dict(new)
        added["lastTransitionTime"] = new.get("lastTransitionTime") or now
        conditions.append(added)
        return True
    before = dict(existing)
    if existing.get("status") != new.get("status"):
        existing["status"] = new["status"]
        existing["lastTransitionTime"] = new.get("lastTransitionTime") or now
    for field in ("reason", "message"):
        existing[field] = new.get(field, "")
    if "observedGeneration" in new:
        existing["observedGeneration"] = new["observedGeneration"]
    return existing != before


def remove_condition(conditions: list[Obj], kind: str) -> None:
    conditions[:] = [c for c in conditions if not (isinstance(c, dict) and c.get("type") == kind)]


def merge_patch_diff(old: Any, new: Any) -> Any:
    """The JSON merge patch (RFC 7386) that turns `old` into `new`, as `jsonmergepatch.CreateMergePatch`
    computes it: maps recurse, a removed key becomes null, anything else is replaced whole."""
    if not isinstance(old, dict) or not isinstance(new, dict):
        return copy.deepcopy(new)
    patch: Obj = {}
    for name in old:
        if name not in new:
            patch[name] = None
    for name, value in new.items():
        if name not in old:
            patch[name] = copy.deepcopy(value)
        elif old[name] != value:
            if isinstance(old[name], dict) and isinstance(value, dict):
                patch[name] = merge_patch_diff(old[name], value)
            else:
                patch[name] = copy.deepcopy(value)
    return patch


def merge_maps(old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> Obj | None:
    """JobSet `collections.MergeMaps(old, new)`: old keys stay, new values win (research k8s-apis.md §2.2)."""
    if old is None and new is None:
        return None
    return {**(old or {}), **(new or {})}


def merge_slices(old: list[Any] | None, new: list[Any] | None) -> list[Any] | None:
    """JobSet `collections.MergeSlices(old, new)`: the union, old order first. Upstream compares Go values
    with `==` (so tolerations carrying a `tolerationSeconds` pointer never compare equal); the lab compares
    JSON values."""
    if old is None and new is None:
        return None
    merged = list(old or [])
    for item in new or []:
        if item not in merged:
            merged.append(copy.deepcopy(item))
    return merged

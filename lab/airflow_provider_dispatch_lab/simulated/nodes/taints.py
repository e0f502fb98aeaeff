"""Taints and tolerations, as the scheduler and the taint eviction controller read them.

Pure functions over the JSON the API returns:

- `tolerates` is `Toleration.ToleratesTaint` (`kubernetes/api:core/v1/toleration.go`): an empty effect matches
  every effect, an empty key (with `Exists`) every key, operator `Exists` any value, `Equal` (or empty) the same
  value. The alpha `Lt`/`Gt` operators are not simulated (they tolerate nothing here).
- `untolerated` is `FindMatchingUntoleratedTaint` (`component-helpers/scheduling/corev1/helpers.go`): the first
  taint with one of the given effects that no toleration tolerates.
- `matching_tolerations` is `GetMatchingTolerations` (`pkg/apis/core/v1/helper/helpers.go`): whether every taint
  is tolerated, and for each taint the first toleration that tolerates it.
- `min_toleration_seconds` is the taint eviction controller's `getMinTolerationTime`
  (`pkg/controller/tainteviction/taint_eviction.go`): no toleration means "now" (0), any `tolerationSeconds <= 0`
  means now, none with `tolerationSeconds` means forever (None), else the smallest.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

Obj = Mapping[str, Any]

NO_SCHEDULE = "NoSchedule"
PREFER_NO_SCHEDULE = "PreferNoSchedule"
NO_EXECUTE = "NoExecute"

TAINT_NOT_READY = "node.kubernetes.io/not-ready"
TAINT_UNREACHABLE = "node.kubernetes.io/unreachable"
TAINT_UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
"""`kubernetes/api:core/v1/well_known_taints.go`."""


def tolerates(toleration: Obj, taint: Obj) -> bool:
    effect = toleration.get("effect") or ""
    if effect and effect != (taint.get("effect") or ""):
        return False
    key = toleration.get("key") or ""
    if key and key != (taint.get("key") or ""):
        return False
    operator = toleration.get("operator") or ""
    if operator in ("", "Equal"):
        return (toleration.get("value") or "") == (taint.get("value") or "")
    return operator == "Exists"


def _objects(items: Iterable[Any] | None) -> list[Obj]:
    return [item for item in (items or ()) if isinstance(item, Mapping)]


def untolerated(taints: Iterable[Any] | None, tolerations: Iterable[Any] | None, effects: Sequence[str]) -> Obj | None:
    known = _objects(tolerations)
    for taint in _objects(taints):
        if taint.get("effect") in effects and not any(tolerates(t, taint) for t in known):
            return taint
    return None


def no_execute(taints: Iterable[Any] | None) -> list[Obj]:
    return [t for t in _objects(taints) if t.get("effect") == NO_EXECUTE]


def matching_tolerations(taints: Iterable[Any] | None, tolerations: Iterable[Any] | None) -> tuple[bool, list[Obj]]:
    known = _objects(tolerations)
    used: list[Obj] = []
    for taint in _objects(taints):
        match = next((t for t in known if tolerates(t, taint)), None)
        if match is None:
            return False, []
        used.append(match)
    return True, used


def min_toleration_seconds(used: Sequence[Obj]) -> float | None:
    if not used:
        return 0.0
    smallest: float | None = None
    for toleration in used:
        seconds = toleration.get("tolerationSeconds")
        if seconds is None:
            continue
        if float(seconds) <= 0:
            return 0.0
        smallest = float(seconds) if smallest is None else min(smallest, float(seconds))
    return smallest

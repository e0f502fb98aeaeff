"""`metav1.Condition` lists as `apimachinery/pkg/api/meta/conditions.go` handles them, on plain JSON.

`set_condition` is `SetStatusCondition`: a new type is appended; for an existing one the status change alone
moves `lastTransitionTime`, while reason, message and observedGeneration are always overwritten. It reports
whether anything changed, which is how every Kueue helper decides whether to write.
"""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]


def conditions_of(obj: Obj) -> list[Obj]:
    status = obj.setdefault("status", {})
    conditions = status.get("conditions")
    if not isinstance(conditions, list):
        conditions = []
        status["conditions"] = conditions
    return conditions


def find(obj: Obj | None, kind: str) -> Obj | None:
    for condition in ((obj or {}).get("status") or {}).get("conditions") or ():
        if isinstance(condition, dict) and condition.get("type") == kind:
            return condition
    return None


def is_true(obj: Obj | None, kind: str) -> bool:
    condition = find(obj, kind)
    return condition is not None and condition.get("status") == "True"


def is_false(obj: Obj | None, kind: str) -> bool:
    condition = find(obj, kind)
    return condition is not None and condition.get("status") == "False"


def set_condition(
    obj: Obj, kind: str, status: bool, reason: str, message: str, now: str, *, generation: bool = True
) -> bool:
    """`meta.SetStatusCondition`; `generation` adds `observedGeneration` as most Kueue helpers do."""
    wanted: Obj = {"type": kind, "status": "True" if status else "False", "reason": reason, "message": message}
    if generation:
        wanted["observedGeneration"] = (obj.get("metadata") or {}).get("generation", 0)
    conditions = conditions_of(obj)
    existing = next((c for c in conditions if c.get("type") == kind), None)
    if existing is None:
        conditions.append({**wanted, "lastTransitionTime": now})
        return True
    before = dict(existing)
    if existing.get("status") != wanted["status"]:
        existing["lastTransitionTime"] = now
    existing.update(wanted)
    return existing != before


def remove_condition(obj: Obj, kind: str) -> bool:
    conditions = conditions_of(obj)
    kept = [c for c in conditions if c.get("type") != kind]
    if len(kept) == len(conditions):
        return False
    obj["status"]["conditions"] = kept
    return True

"""Our AdmissionChecks, and their `Active` condition. Pure.

An AdmissionCheck is ours when its `spec.controllerName` is dispatch's (`dispatch.phpboyscout.uk/drained`,
DESIGN §6) and, if the controller was started with `--check-name`, its name is one of those. Kueue reads the
check's `Active` condition and marks every ClusterQueue that requires a check which is missing or not Active as
inactive, admitting nothing there (k8s-apis.md §4.3: `pkg/cache/scheduler/clusterqueue.go`); keeping it True is
the owning controller's job. The controller applies only that one condition, through `admissionchecks/status`
with its own field manager and ForceOwnership, so a flip by someone else is undone on the next event.

It never sets the condition False, not even on shutdown: a controller that is restarted (a rolling update, a
node drain) would otherwise make every ClusterQueue that requires the check inactive for that time, while
quota-reserved Workloads simply wait for it anyway.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from airflow_provider_dispatch.dispatch import vocabulary as v

ACTIVE: Final = "Active"
ACTIVE_REASON: Final = "Active"
ADMISSION_CHECK: Final = v.ApiCoordinates("kueue.x-k8s.io", "v1beta2", "admissionchecks", "AdmissionCheck", False)


def controller_name_of(admission_check: Mapping[str, Any]) -> str:
    value = v.field(admission_check, "spec", "controllerName")
    return value if isinstance(value, str) else ""


def is_ours(admission_check: Mapping[str, Any], controller_name: str, only: frozenset[str] | None = None) -> bool:
    if controller_name_of(admission_check) != controller_name:
        return False
    return only is None or v.name_of(admission_check) in only


def our_checks(
    admission_checks: Iterable[Mapping[str, Any]], controller_name: str, only: frozenset[str] | None = None
) -> frozenset[str]:
    return frozenset(v.name_of(ac) for ac in admission_checks if is_ours(ac, controller_name, only))


def misdirected(
    admission_checks: Iterable[Mapping[str, Any]], controller_name: str, only: frozenset[str] | None
) -> dict[str, str]:
    """Checks named with `--check-name` that belong to another controller: name -> their controllerName."""
    if only is None:
        return {}
    return {
        v.name_of(ac): controller_name_of(ac)
        for ac in admission_checks
        if v.name_of(ac) in only and controller_name_of(ac) != controller_name
    }


def active_message(controller_name: str) -> str:
    return f"{controller_name}: dispatch's admission check controller is running the drain check"


def needs_activation(admission_check: Mapping[str, Any]) -> bool:
    """The `Active` condition is missing or not True."""
    return not v.condition_is_true(admission_check, ACTIVE)


def active_status_body(admission_check: Mapping[str, Any], controller_name: str, now: str) -> dict[str, Any]:
    """The server-side apply configuration of `Active=True`; the transition time is now, since it was not True."""
    condition: dict[str, Any] = {
        "type": ACTIVE,
        "status": "True",
        "reason": ACTIVE_REASON,
        "message": active_message(controller_name),
        "lastTransitionTime": now,
    }
    generation = v.field(admission_check, "metadata", "generation")
    if isinstance(generation, int) and not isinstance(generation, bool):
        condition["observedGeneration"] = generation
    return {
        "apiVersion": ADMISSION_CHECK.api_version,
        "kind": ADMISSION_CHECK.kind,
        "metadata": {"name": v.name_of(admission_check)},
        "status": {"conditions": [condition]},
    }


__all__ = [
    "ACTIVE",
    "ADMISSION_CHECK",
    "active_message",
    "active_status_body",
    "controller_name_of",
    "is_ours",
    "misdirected",
    "needs_activation",
    "our_checks",
]

"""Quota: what a Workload requests, what a ClusterQueue offers, and whether one fits the other.

A simplified `pkg/scheduler/flavorassigner/flavorassigner.go` for a single ClusterQueue without cohorts: for
each PodSet, its requests (`pkg/workload/workload.go` `totalRequestsFromPodSets`: the pod's requests, as
`component-helpers` `PodRequests` computes them, times `count`) go to the resource group that covers each
resource, trying the group's flavors in order; a flavor fits when the ClusterQueue's usage plus the request
stays within `nominalQuota`. No borrowing, lending, fungibility policies or TAS. Usage is what the workloads
with an active quota reservation hold (`HasActiveQuotaReservation`: reserved, not finished, active), read from
their `status.admission.podSetAssignments[].resourceUsage` (`totalRequestsFromAdmission`), so a workload that
was evicted but whose quota is not yet released still counts.

Messages are upstream's: `couldn't assign flavors to pod set <ps>: insufficient unused quota for <res> in
flavor <f>, <n> more needed`, or `insufficient quota for <res> in flavor <f>, request > maximum capacity
(<req> > <max>)`, or `resource <res> unavailable in ClusterQueue`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from airflow_provider_dispatch_lab.simulated.kueue import constants as k
from airflow_provider_dispatch_lab.simulated.quantities import parse_quantity, pod_requests

Obj = dict[str, Any]
FlavorResource = tuple[str, str]
Usage = dict[FlavorResource, Decimal]


def format_quantity(resource: str, amount: Decimal) -> str:
    """A canonical quantity string (`resource.Quantity.String()` for the shapes the lab produces)."""
    if amount == amount.to_integral_value():
        whole = int(amount)
        if resource != "cpu" and whole:
            for suffix, power in (("Ei", 60), ("Pi", 50), ("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10)):
                if whole % (1 << power) == 0:
                    return f"{whole >> power}{suffix}"
        return str(whole)
    milli = amount * 1000
    if milli == milli.to_integral_value():
        return f"{int(milli)}m"
    return str(amount.normalize())


def podset_requests(podset: Obj) -> dict[str, Decimal]:
    """The PodSet's total requests: one pod's requests times the count."""
    per_pod = pod_requests(podset.get("template") or {})
    count = int(podset.get("count", 1))
    return {name: amount * count for name, amount in per_pod.items() if amount}


@dataclass(frozen=True)
class ResourceGroup:
    covered: tuple[str, ...]
    flavors: tuple[tuple[str, Mapping[str, Decimal]], ...]


def resource_groups(cluster_queue: Obj) -> list[ResourceGroup]:
    groups = []
    for group in (cluster_queue.get("spec") or {}).get("resourceGroups") or ():
        flavors = []
        for flavor in group.get("flavors") or ():
            quotas = {
                str(res.get("name")): parse_quantity(res.get("nominalQuota", 0))
                for res in flavor.get("resources") or ()
            }
            flavors.append((str(flavor.get("name")), quotas))
        groups.append(ResourceGroup(tuple(str(c) for c in group.get("coveredResources") or ()), tuple(flavors)))
    return groups


def all_flavors(cluster_queue: Obj) -> set[str]:
    return {name for group in resource_groups(cluster_queue) for name, _ in group.flavors}


def workload_usage(wl: Obj) -> Usage:
    usage: Usage = {}
    admission = (wl.get("status") or {}).get("admission") or {}
    for assignment in admission.get("podSetAssignments") or ():
        flavors = assignment.get("flavors") or {}
        for resource, amount in (assignment.get("resourceUsage") or {}).items():
            key = (str(flavors.get(resource, "")), str(resource))
            usage[key] = usage.get(key, Decimal(0)) + parse_quantity(amount)
    return usage


def add_usage(total: Usage, extra: Mapping[FlavorResource, Decimal], sign: int = 1) -> None:
    for key, amount in extra.items():
        total[key] = total.get(key, Decimal(0)) + sign * amount


def sum_usage(workloads: Iterable[Obj]) -> Usage:
    total: Usage = {}
    for wl in workloads:
        add_usage(total, workload_usage(wl))
    return total


@dataclass
class Assignment:
    """A flavor per requested resource for every PodSet, or the reason none fits."""

    podset_assignments: list[Obj] = field(default_factory=list)
    usage: Usage = field(default_factory=dict)
    message: str = ""
    #: why it does not fit: `WaitingForQuota` (preemption could help), `ExceedsMaxQuota` or `Inadmissible`
    no_fit_reason: str = ""

    @property
    def fits(self) -> bool:
        return not self.message


def assign_flavors(wl: Obj, cluster_queue: Obj, usage: Mapping[FlavorResource, Decimal]) -> Assignment:
    groups = resource_groups(cluster_queue)
    result = Assignment()
    pending: Usage = {}
    for podset in (wl.get("spec") or {}).get("podSets") or ():
        name = str(podset.get("name"))
        requests = podset_requests(podset)
        flavors: dict[str, str] = {}
        reasons: list[str] = []
        for group in groups:
            wanted = {res: amount for res, amount in requests.items() if res in group.covered}
            if not wanted:
                continue
            chosen, group_reasons, exceeds = _choose_flavor(group, wanted, usage, pending)
            if chosen is None:
                reasons.extend(group_reasons)
                result.no_fit_reason = k.REASON_EXCEEDS_MAX_QUOTA if exceeds else k.REASON_WAITING_FOR_QUOTA
                continue
            for res in wanted:
                flavors[res] = chosen
        uncovered = sorted(res for res in requests if not any(res in group.covered for group in groups))
        for res in uncovered:
            reasons.append(f"resource {res} unavailable in ClusterQueue")
            result.no_fit_reason = k.REASON_INADMISSIBLE
        if reasons:
            result.message = f"couldn't assign flavors to pod set {name}: {', '.join(reasons)}"
            return result
        resource_usage = {res: format_quantity(res, amount) for res, amount in sorted(requests.items())}
        result.podset_assignments.append(
            {"name": name, "flavors": flavors, "resourceUsage": resource_usage, "count": int(podset.get("count", 1))}
        )
        for res, amount in requests.items():
            add_usage(pending, {(flavors[res], res): amount})
    result.usage = pending
    return result


def _choose_flavor(
    group: ResourceGroup,
    wanted: Mapping[str, Decimal],
    usage: Mapping[FlavorResource, Decimal],
    pending: Mapping[FlavorResource, Decimal],
) -> tuple[str | None, list[str], bool]:
    reasons: list[str] = []
    exceeds_everywhere = True
    for flavor, quotas in group.flavors:
        flavor_reasons = []
        exceeds = False
        for res, amount in wanted.items():
            nominal = quotas.get(res, Decimal(0))
            needed = amount + pending.get((flavor, res), Decimal(0))
            used = usage.get((flavor, res), Decimal(0))
            if needed > nominal:
                exceeds = True
                flavor_reasons.append(
                    f"insufficient quota for {res} in flavor {flavor}, request > maximum capacity "
                    f"({format_quantity(res, needed)} > {format_quantity(res, nominal)})"
                )
            elif used + needed > nominal:
                flavor_reasons.append(
                    f"insufficient unused quota for {res} in flavor {flavor}, "
                    f"{format_quantity(res, used + needed - nominal)} more needed"
                )
        if not flavor_reasons:
            return flavor, [], False
        exceeds_everywhere &= exceeds
        reasons.extend(flavor_reasons)
    return None, reasons, exceeds_everywhere


def fits_after_removing(
    wl: Obj, cluster_queue: Obj, usage: Mapping[FlavorResource, Decimal], removed: Iterable[Obj]
) -> bool:
    remaining: Usage = dict(usage)
    for victim in removed:
        add_usage(remaining, workload_usage(victim), -1)
    return assign_flavors(wl, cluster_queue, remaining).fits

"""Which Workloads the controller acts on, who owns them, and the key of one Workload admission. Pure.

A Workload is a candidate when all of these hold (DESIGN §6; k8s-apis.md §4.4: Kueue's own provisioning check
controller acts only on quota-reserved Workloads that are neither evicted nor finished):

* it carries at least one of our check entries (an AdmissionCheck whose `spec.controllerName` is ours) in
  state `Pending`: Kueue adds that entry itself for every check its ClusterQueue's `admissionChecksStrategy`
  selects, and resets it to Pending on eviction;
* `QuotaReserved` is True: before the reservation there is nothing to admit, and the check's verdict would be
  stale by the time quota comes;
* `Evicted` is not True: an evicted Workload is being stopped; Kueue releases its quota and reserves again,
  and only that new reservation is an admission to check;
* `Finished` is not True, `spec.active` is not false (held or rejected), and it is not being deleted.

The owner is the controller ownerReference of kind TrainJob in `trainer.kubeflow.org` that Kueue's job framework
sets (`SetControllerReference`, k8s-apis.md §4.2); its uid tells a TrainJob from a namesake created later.

The admission key (`admission_key`) names one Workload admission, so that raising A is idempotent per admission
(a crash between raising A and setting the check Ready must not raise A twice) and happens again for the next
one. It is `<workload uid>/<evictions>/<QuotaReserved lastTransitionTime>`:

* the uid: another Workload (a TrainJob deleted and recreated) is another admission;
* the sum of `status.schedulingStats.evictions[].count`: Kueue's `evict.Evict` increments it in the very write
  that evicts (`pkg/workload/evict/evict.go` `workloadEvictionStateInc`, as the lab reproduces in
  `workload_status.count_eviction`), and every path that releases a Workload's quota while it holds one goes
  through an eviction first (preemption, a Retry or Rejected check, deactivation, a stopped queue, node
  failures; the job reconciler clears the reservation only for an Evicted Workload, `reconciler.go` step 6).
  It does not change while one reservation lasts, and it never goes down;
* the `QuotaReserved` transition time: it changes on every new reservation (a condition's time moves only when
  its status flips), at one-second precision. On its own it could repeat if quota were released and reserved
  again within a second, and the eviction count alone would not move on a Kueue that predates
  `schedulingStats` (or if a release ever bypassed an eviction); together they change on every new reservation.

A key that changes when it need not is harmless: the drain check runs again and A goes up by one more. A key
that failed to change would skip the drain check, which is why both parts are in it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from airflow_provider_dispatch.dispatch import vocabulary as v

#: Workload condition types (kueue `apis/kueue/v1beta2/workload_types.go`, k8s-apis.md §4.2)
QUOTA_RESERVED: Final = "QuotaReserved"
EVICTED: Final = "Evicted"
FINISHED: Final = "Finished"
#: check states (`workload_types.go` `CheckState`)
PENDING: Final = "Pending"
READY: Final = "Ready"


@dataclass(frozen=True)
class Owner:
    """The Workload's controller ownerReference."""

    api_version: str
    kind: str
    name: str
    uid: str

    @property
    def is_trainjob(self) -> bool:
        group = self.api_version.split("/", 1)[0] if "/" in self.api_version else ""
        return self.kind == v.TRAINJOB.kind and group == v.TRAINJOB.group


@dataclass(frozen=True)
class Candidate:
    """A Workload to run the drain check for: its identity, our check entries, its owner and admission key."""

    namespace: str
    name: str
    uid: str
    entries: Mapping[str, Mapping[str, Any]]
    owner: Owner | None
    admission_key: str

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class Skip:
    """Why a Workload is not acted on now (for the debug log)."""

    reason: str


def check_entries(workload: Mapping[str, Any], ours: Iterable[str]) -> dict[str, Mapping[str, Any]]:
    """Our entries of `status.admissionChecks`, by check name."""
    names = set(ours)
    return {
        str(entry.get("name")): entry
        for entry in v.object_list(workload, "status", "admissionChecks")
        if entry.get("name") in names
    }


def has_pending_check(workload: Mapping[str, Any], ours: Iterable[str]) -> bool:
    return any(entry.get("state") == PENDING for entry in check_entries(workload, ours).values())


def controller_owner(workload: Mapping[str, Any]) -> Owner | None:
    for ref in v.object_list(workload, "metadata", "ownerReferences"):
        if ref.get("controller") is True:
            fields = (str(ref.get(key, "")) for key in ("apiVersion", "kind", "name", "uid"))
            return Owner(*fields)
    return None


def evictions(workload: Mapping[str, Any]) -> int:
    total = 0
    for entry in v.object_list(workload, "status", "schedulingStats", "evictions"):
        count = entry.get("count")
        if isinstance(count, int) and not isinstance(count, bool) and count > 0:
            total += count
    return total


def admission_key(workload: Mapping[str, Any]) -> str:
    """`<uid>/<evictions>/<QuotaReserved lastTransitionTime>`: one value per Workload admission (module doc)."""
    uid = v.field(workload, "metadata", "uid")
    reserved_at = v.field(v.condition(workload, QUOTA_RESERVED), "lastTransitionTime")
    uid_text = uid if isinstance(uid, str) else ""
    reserved_text = reserved_at if isinstance(reserved_at, str) else ""
    return f"{uid_text}/{evictions(workload)}/{reserved_text}"


def candidate(workload: Mapping[str, Any], ours: Iterable[str]) -> Candidate | Skip:
    """The Workload as a candidate for the drain check, or why it is not one now (module docstring)."""
    entries = check_entries(workload, ours)
    if not entries:
        return Skip("none of our admission checks is on it")
    if not any(entry.get("state") == PENDING for entry in entries.values()):
        return Skip("our admission check is not Pending")
    if v.field(workload, "metadata", "deletionTimestamp") is not None:
        return Skip("it is being deleted")
    if v.field(workload, "spec", "active") is False:
        return Skip("it is deactivated (spec.active false)")
    if v.condition_is_true(workload, FINISHED):
        return Skip("it has finished")
    if not v.condition_is_true(workload, QUOTA_RESERVED):
        return Skip("it has no quota reserved")
    if v.condition_is_true(workload, EVICTED):
        return Skip("it is evicted (Kueue releases its quota and reserves it again)")
    uid = v.field(workload, "metadata", "uid")
    return Candidate(
        namespace=v.namespace_of(workload),
        name=v.name_of(workload),
        uid=uid if isinstance(uid, str) else "",
        entries=entries,
        owner=controller_owner(workload),
        admission_key=admission_key(workload),
    )


__all__ = [
    "EVICTED",
    "FINISHED",
    "PENDING",
    "QUOTA_RESERVED",
    "READY",
    "Candidate",
    "Owner",
    "Skip",
    "admission_key",
    "candidate",
    "check_entries",
    "controller_owner",
    "evictions",
    "has_pending_check",
]

"""DELETE as the apiserver carries it out: graceful deletion, finalizers, propagation and preconditions.

Graceful deletion follows research k8s-apis.md section 5.2 and section 6 rule 7, from
`apiserver/pkg/registry/rest/delete.go` `BeforeDelete` and `pkg/registry/core/pod/strategy.go`
`CheckGracefulDelete`:

- only pods delete gracefully. The grace period is `DeleteOptions.gracePeriodSeconds`, else the pod's
  `spec.terminationGracePeriodSeconds`, else 0; a negative one counts as 1;
- it is forced to 0 for a pod that is not scheduled (`spec.nodeName` empty) or already terminal (Succeeded or
  Failed);
- the first graceful DELETE sets `deletionTimestamp = now + grace` and `deletionGracePeriodSeconds = grace` and
  bumps `generation`; the phase does not change. The pod stays until its kubelet deletes it with grace 0;
- a later DELETE may only shorten the grace period: the new deadline is the original request time plus the new
  grace; an equal or longer one leaves the object as it is ("graceful deletion pending"). A deadline that would
  fall in the past is moved to now, with grace 1 s unless 0 was asked ("Prevent shortening the grace period
  moving deletionTimestamp into the past", `BeforeDelete` in `k8s.io/apiserver` v0.36.3, the library of
  Kubernetes v1.36.3); a negative grace counts as 1. That later DELETE does not go through
  `CheckGracefulDelete` again, so it is not forced to 0 for a pod that meanwhile finished;
- with grace 0 and no finalizers the object leaves the store at once; with finalizers it stays, carrying a
  deletionTimestamp, until the last finalizer goes (`store.go` `updateForGracefulDeletionAndFinalizers`).

Propagation (`apiserver/pkg/registry/generic/registry/store.go` `deletionFinalizersForGarbageCollection`):
`Foreground` adds the `foregroundDeletion` finalizer, `Orphan` the `orphan` finalizer; the garbage collector then
deletes or releases the dependents and removes the finalizer. batch/v1 Jobs default to `Orphan` when no policy is
given (`pkg/registry/batch/job/strategy.go` `DefaultGarbageCollectionPolicy`), so a Job deleted without a policy
leaves its pods: a real and surprising behaviour worth keeping.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Literal

from airflow_provider_dispatch_lab.apiserver.errors import bad_request, conflict
from airflow_provider_dispatch_lab.apiserver.registry.resources import ResourceType
from airflow_provider_dispatch_lab.clock import LabClock, format_timestamp, parse_timestamp

Obj = dict[str, Any]
FOREGROUND_FINALIZER = "foregroundDeletion"
ORPHAN_FINALIZER = "orphan"
_POLICY_FINALIZERS = {"Foreground": FOREGROUND_FINALIZER, "Orphan": ORPHAN_FINALIZER}


@dataclass(frozen=True)
class DeleteOptions:
    grace_period_seconds: int | None = None
    propagation_policy: str | None = None
    precondition_uid: str | None = None
    precondition_resource_version: str | None = None
    dry_run: bool = False
    orphan_dependents: bool | None = None
    """The deprecated `orphanDependents` as given (None when not given): only an explicit false makes a deletion
    that did not remove the object at once answer 202 (`apiserver/pkg/endpoints/handlers/delete.go`)."""

    def as_object(self) -> Obj:
        """The options as a `DeleteOptions` object, only the fields given (what admission sees as options)."""
        body: Obj = {"kind": "DeleteOptions", "apiVersion": "meta.k8s.io/v1"}
        if self.grace_period_seconds is not None:
            body["gracePeriodSeconds"] = self.grace_period_seconds
        if self.propagation_policy is not None:
            body["propagationPolicy"] = self.propagation_policy
        preconditions = {
            key: value
            for key, value in (("uid", self.precondition_uid), ("resourceVersion", self.precondition_resource_version))
            if value
        }
        if preconditions:
            body["preconditions"] = preconditions
        if self.dry_run:
            body["dryRun"] = ["All"]
        return body

    @classmethod
    def parse(cls, body: Obj | None, query: dict[str, str]) -> DeleteOptions:
        """From the DELETE body (a DeleteOptions object) and the query parameters, the body winning."""
        body = body or {}
        grace = body.get("gracePeriodSeconds", query.get("gracePeriodSeconds"))
        policy = body.get("propagationPolicy", query.get("propagationPolicy"))
        orphan_dependents: bool | None = None
        if body.get("orphanDependents") is not None or query.get("orphanDependents") is not None:
            orphan = body.get("orphanDependents", query.get("orphanDependents"))
            orphan_dependents = str(orphan).lower() == "true"
            if policy is not None:
                raise bad_request("orphanDependents and propagationPolicy cannot both be set")
            policy = "Orphan" if str(orphan).lower() == "true" else "Background"
        if policy is not None and policy not in ("Foreground", "Background", "Orphan"):
            raise bad_request(
                f'propagationPolicy: Unsupported value: "{policy}": supported values: "Foreground", "Background", '
                '"Orphan"'
            )
        preconditions = body.get("preconditions") or {}
        dry_run = body.get("dryRun") or ([query["dryRun"]] if "dryRun" in query else [])
        try:
            grace_value = None if grace is None else int(grace)
        except (TypeError, ValueError) as error:
            raise bad_request(f"gracePeriodSeconds must be an integer, not {grace!r}") from error
        return cls(
            grace_period_seconds=grace_value,
            propagation_policy=policy,
            precondition_uid=preconditions.get("uid"),
            precondition_resource_version=preconditions.get("resourceVersion"),
            dry_run="All" in dry_run,
            orphan_dependents=orphan_dependents,
        )


@dataclass(frozen=True)
class DeleteOutcome:
    """`remove`: take it out of the store now; `update`: store the changed object; `pending`: nothing to write;
    `mark-then-remove`: store the changed object (its deletionTimestamp, grace 0), then remove it: a pod deleted
    with a grace period of 0 is written once as being deleted before it goes, so watchers see a MODIFIED event
    with the deletionTimestamp before the DELETED one (the registry's graceful path, `apiserver/pkg/registry/
    generic/registry/store.go` `updateForGracefulDeletionAndFinalizers`, then the deletion; seen on the real API
    server, docs/fidelity.md)."""

    action: Literal["remove", "update", "pending", "mark-then-remove"]
    obj: Obj


def check_preconditions(resource: ResourceType, obj: Obj, options: DeleteOptions) -> None:
    meta = obj["metadata"]
    name = meta["name"]
    if options.precondition_uid and options.precondition_uid != meta.get("uid"):
        raise conflict(
            resource.plural,
            resource.group,
            name,
            f"Precondition failed: UID in precondition: {options.precondition_uid}, UID in object meta: "
            f"{meta.get('uid')}",
        )
    if options.precondition_resource_version and options.precondition_resource_version != meta.get("resourceVersion"):
        raise conflict(
            resource.plural,
            resource.group,
            name,
            "Precondition failed: ResourceVersion in precondition: "
            f"{options.precondition_resource_version}, ResourceVersion in object meta: {meta.get('resourceVersion')}",
        )


def _pod_grace_period(obj: Obj, options: DeleteOptions) -> int:
    spec = obj.get("spec") or {}
    grace = options.grace_period_seconds
    if grace is None:
        grace = spec.get("terminationGracePeriodSeconds")
    grace = 0 if grace is None else int(grace)
    if grace < 0:
        grace = 1
    phase = (obj.get("status") or {}).get("phase")
    if not spec.get("nodeName") or phase in ("Succeeded", "Failed"):
        grace = 0
    return grace


def _policy(resource: ResourceType, options: DeleteOptions) -> str:
    if options.propagation_policy:
        return options.propagation_policy
    if resource.group == "batch" and resource.kind == "Job":
        return "Orphan"
    return "Background"


def decide(resource: ResourceType, obj: Obj, options: DeleteOptions, clock: LabClock) -> DeleteOutcome:
    """What a DELETE does to `obj` (a copy is returned; the input is not changed)."""
    obj = copy.deepcopy(obj)
    meta = obj["metadata"]
    finalizers: list[str] = list(meta.get("finalizers") or [])
    policy_finalizer = _POLICY_FINALIZERS.get(_policy(resource, options))
    if policy_finalizer and policy_finalizer not in finalizers and not meta.get("deletionTimestamp"):
        finalizers.append(policy_finalizer)
        for other in _POLICY_FINALIZERS.values():
            if other != policy_finalizer and other in finalizers:
                finalizers.remove(other)

    graceful = resource.kind == "Pod" and resource.group == ""
    if meta.get("deletionTimestamp"):
        return _delete_again(obj, options, graceful, finalizers, clock.now())

    grace = _pod_grace_period(obj, options) if graceful else 0
    if grace == 0 and not finalizers and not graceful:
        return DeleteOutcome("remove", obj)
    meta["deletionTimestamp"] = clock.timestamp(grace)
    meta["deletionGracePeriodSeconds"] = grace
    if finalizers:
        meta["finalizers"] = finalizers
    if meta.get("generation"):
        meta["generation"] = int(meta["generation"]) + 1
    return DeleteOutcome("mark-then-remove" if grace == 0 and not finalizers else "update", obj)


def _delete_again(obj: Obj, options: DeleteOptions, graceful: bool, finalizers: list[str], now: float) -> DeleteOutcome:
    """A DELETE of an object already being deleted: only a shorter grace period changes anything
    (`BeforeDelete`'s branch for an object with a deletionTimestamp)."""
    meta = obj["metadata"]
    current = meta.get("deletionGracePeriodSeconds")
    requested = options.grace_period_seconds
    if graceful and requested is not None and current:
        requested = 1 if requested < 0 else requested
        if requested < int(current):
            requested_at = parse_timestamp(meta["deletionTimestamp"]) - int(current)
            deadline = requested_at + requested
            if deadline < now:
                deadline = now
                if requested != 0:
                    requested = 1
            meta["deletionTimestamp"] = format_timestamp(deadline)
            meta["deletionGracePeriodSeconds"] = requested
            return DeleteOutcome("mark-then-remove" if requested == 0 and not finalizers else "update", obj)
    if not finalizers and int(current or 0) == 0:
        return DeleteOutcome("remove", obj)
    return DeleteOutcome("pending", obj)

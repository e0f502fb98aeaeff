"""Kueue's writes of Workload status, the way `pkg/workload/patching/patching.go` makes them.

`PatchAdmissionStatus` is a server-side apply on `/status` with field manager `kueue-admission` and
ForceOwnership. The applied configuration (`prepareWorkloadPatch`) carries the identity and resourceVersion
(strict mode, the default, so a stale read conflicts), `admission` when set, `requeueState` when it has content,
the admission-managed conditions present, the accumulated execution time, the scheduling stats, and **every**
admission-check entry as Kueue currently holds it. Fields Kueue applied before and leaves out are removed by the
apply (that is how `admission: nil` clears the reservation), unless another manager owns them.

The `PodsReady` condition is written by `SetConditionAndUpdate` (`pkg/workload/workload.go`): `PatchStatus`, a
server-side apply of the Workload's identity and that one condition, as manager `kueue-job-controller-PodsReady`
with ForceOwnership. The applied condition is built on an empty status, so its `lastTransitionTime` is the time of
the write even when only the reason changes. `PatchAdmissionStatus` applies the condition again as
`kueue-admission` whenever it is present (`admissionManagedConditions`), so both managers own it.

Two upstream paths are not SSA: `reconcileSyncAdmissionChecks` is a `Status().Update` (a conditional PUT of the
whole status), and `spec.active=false` after a DeactivationTarget is an `Update` of the object.

Known gap of the lab's server: it ignores the resourceVersion of an apply patch sent to a status subresource
(it drops the configuration's metadata there), so a stale apply is not refused with 409 as upstream relies on.
Since every Kueue controller applies the whole admission state as the same manager, a stale apply from one
would prune what another just wrote (seen in the lab: a reservation undone by the workload controller's
Admitted sync). `update_admission_status` therefore reads and applies under a per-Workload lock shared by the
lab's Kueue controllers, which serializes them as the 409-and-retry does upstream. A write by another
component (an admission check controller) between that read and the apply can still be overwritten with the
state read; the server honouring the precondition would close that window.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable
from typing import Any

from airflow_provider_dispatch_lab.client import LabClient, is_conflict, is_not_found
from airflow_provider_dispatch_lab.kinds import WORKLOAD
from airflow_provider_dispatch_lab.simulated.kueue import constants as k

Obj = dict[str, Any]
Mutation = Callable[[Obj], bool]

_CONFLICT_RETRIES = 5
_LOCKS: dict[tuple[int, str, str], asyncio.Lock] = {}
_STATUS_FIELDS = (
    "accumulatedPastExecutionTimeSeconds",
    "schedulingStats",
    "clusterName",
    "nominatedClusterNames",
    "unhealthyNodes",
    "preemptionGates",
)


def admission_status_patch(wl: Obj) -> Obj:
    """`prepareWorkloadPatch`: the SSA configuration Kueue applies for this Workload state."""
    meta = wl["metadata"]
    status = wl.get("status") or {}
    applied: Obj = {
        "apiVersion": WORKLOAD.api_version,
        "kind": WORKLOAD.kind,
        "metadata": {
            "name": meta["name"],
            "namespace": meta.get("namespace"),
            "uid": meta.get("uid"),
            "resourceVersion": meta.get("resourceVersion"),
        },
        "status": {},
    }
    out = applied["status"]
    if status.get("admission") is not None:
        out["admission"] = copy.deepcopy(status["admission"])
    requeue = status.get("requeueState") or {}
    if requeue.get("count") is not None or requeue.get("requeueAt") is not None:
        out["requeueState"] = {key: value for key, value in requeue.items() if value is not None}
    conditions = [
        copy.deepcopy(c)
        for kind in k.ADMISSION_MANAGED_CONDITIONS
        for c in status.get("conditions") or ()
        if c.get("type") == kind
    ]
    if conditions:
        out["conditions"] = conditions
    for key in _STATUS_FIELDS:
        if status.get(key) is not None:
            out[key] = copy.deepcopy(status[key])
    checks = [copy.deepcopy(c) for c in status.get("admissionChecks") or () if c.get("name")]
    if checks:
        out["admissionChecks"] = checks
    return applied


async def apply_admission_status(client: LabClient, wl: Obj) -> Obj:
    namespace = wl["metadata"].get("namespace")
    return await client.patch(
        WORKLOAD,
        namespace,
        wl["metadata"]["name"],
        admission_status_patch(wl),
        patch_type="apply",
        subresource="status",
        field_manager=k.ADMISSION_MANAGER,
        force=True,
    )


def _lock(namespace: str, name: str) -> asyncio.Lock:
    """One lock per Workload and event loop (each lab runs on its own loop)."""
    key = (id(asyncio.get_running_loop()), namespace, name)
    lock = _LOCKS.get(key)
    if lock is None:
        lock = _LOCKS[key] = asyncio.Lock()
    return lock


async def update_admission_status(client: LabClient, namespace: str, name: str, mutate: Mutation) -> Obj | None:
    """Read, mutate, apply; again from a fresh read on a conflict. None when the Workload is gone or unchanged."""
    async with _lock(namespace, name):
        return await _read_mutate_apply(client, namespace, name, mutate)


async def _get(client: LabClient, namespace: str, name: str) -> Obj | None:
    """The Workload as the API server has it now; None when it is gone."""
    try:
        found: Obj = await client.get(WORKLOAD, namespace, name)
    except Exception as error:
        if is_not_found(error):
            return None
        raise
    return found


async def _read_mutate_apply(client: LabClient, namespace: str, name: str, mutate: Mutation) -> Obj | None:
    for _ in range(_CONFLICT_RETRIES):
        fresh = await _get(client, namespace, name)
        if fresh is None or not mutate(fresh):
            return None
        try:
            return await apply_admission_status(client, fresh)
        except Exception as error:
            if is_not_found(error):
                return None
            if not is_conflict(error):
                raise
    raise RuntimeError(f"workload {namespace}/{name}: conflicting writes, gave up after {_CONFLICT_RETRIES}")


async def set_condition_and_update(
    client: LabClient,
    namespace: str,
    name: str,
    condition: Obj,
    manager: str,
    wanted: Callable[[Obj], bool],
) -> Obj | None:
    """`SetConditionAndUpdate`: apply `condition` (type, status, reason, message, lastTransitionTime) alone as
    `manager`, if `wanted(fresh)` still holds for the Workload read under the lock. None when gone or not wanted."""
    async with _lock(namespace, name):
        fresh = await _get(client, namespace, name)
        if fresh is None or not wanted(fresh):
            return None
        meta = fresh["metadata"]
        applied = {
            "apiVersion": WORKLOAD.api_version,
            "kind": WORKLOAD.kind,
            "metadata": {
                "name": name,
                "namespace": namespace,
                "uid": meta.get("uid"),
                "resourceVersion": meta.get("resourceVersion"),
            },
            "status": {"conditions": [{**condition, "observedGeneration": meta.get("generation", 0)}]},
        }
        try:
            result: Obj = await client.patch(
                WORKLOAD,
                namespace,
                name,
                applied,
                patch_type="apply",
                subresource="status",
                field_manager=manager,
                force=True,
            )
        except Exception as error:
            if is_not_found(error):
                return None
            raise
        return result


async def replace_status(client: LabClient, wl: Obj) -> Obj:
    """`Status().Update`: a PUT of the status subresource, conditional on the resourceVersion read."""
    return await client.replace(WORKLOAD, wl["metadata"].get("namespace"), wl["metadata"]["name"], wl, "status")


async def replace(client: LabClient, wl: Obj) -> Obj:
    """`client.Update` of the Workload object (spec, metadata), conditional on the resourceVersion read."""
    return await client.replace(WORKLOAD, wl["metadata"].get("namespace"), wl["metadata"]["name"], wl)

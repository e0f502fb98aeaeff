"""Pure transitions of a Workload's status, one function per upstream helper, on plain JSON.

Every function changes the Workload dict in place and returns whether it changed anything, as the Go helpers do;
the controllers then write the result with `status_writer`. Sources, all kubernetes-sigs/kueue v0.19.2:
`pkg/workload/workload.go` (SetQuotaReservation, UnsetQuotaReservationWithCondition, SetRequeuedCondition,
SetPreemptedCondition, SetDeactivationTarget, SetRequeueState, UpdateRequeueState, IsActive, HasQuotaReservation,
IsAdmitted), `pkg/controller/jobframework/reconciler.go` (generatePodsReadyCondition),
`pkg/workload/admissionchecks.go` (SyncAdmittedCondition, HasAllChecksReady, GetMaxRetryTime,
NeedsRequeueAtUpdate), `pkg/workload/evict/evict.go` (SetEvictedCondition, prepareForEviction,
resetChecksOnEviction, workloadEvictionStateInc), `pkg/workload/finish/finish.go` (SetFinishedCondition) and
`pkg/controller/core/workload_controller.go` (buildAdmissionChecksMessage, syncAdmissionCheckConditions).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from airflow_provider_dispatch_lab.clock import format_timestamp, parse_timestamp
from airflow_provider_dispatch_lab.simulated.kueue import constants as k
from airflow_provider_dispatch_lab.simulated.kueue.conditions import find, is_true, set_condition
from airflow_provider_dispatch_lab.simulated.kueue.config import KueueConfig, RequeuingStrategy, WaitForPodsReady

Obj = dict[str, Any]


def status_of(wl: Obj) -> Obj:
    status = wl.get("status")
    if not isinstance(status, dict):
        status = {}
        wl["status"] = status
    return status


# --- predicates ------------------------------------------------------------------------------------------------


def is_active(wl: Obj) -> bool:
    """`IsActive`: `spec.active` defaults to true."""
    return (wl.get("spec") or {}).get("active", True) is not False


def has_quota_reservation(wl: Obj) -> bool:
    return is_true(wl, k.QUOTA_RESERVED)


def is_admitted(wl: Obj) -> bool:
    return is_true(wl, k.ADMITTED)


def is_finished(wl: Obj) -> bool:
    return is_true(wl, k.FINISHED)


def is_evicted(wl: Obj) -> bool:
    return is_true(wl, k.EVICTED)


def admission_checks(wl: Obj) -> list[Obj]:
    checks = status_of(wl).get("admissionChecks")
    return [c for c in checks if isinstance(c, dict)] if isinstance(checks, list) else []


def has_all_checks_ready(wl: Obj) -> bool:
    return all(check.get("state") == k.CHECK_READY for check in admission_checks(wl))


def checks_in_state(wl: Obj, state: str) -> list[Obj]:
    return [check for check in admission_checks(wl) if check.get("state") == state]


def has_active_quota_reservation(wl: Obj) -> bool:
    """`HasActiveQuotaReservation`: what a ClusterQueue's usage counts (finished or inactive ones do not)."""
    return has_quota_reservation(wl) and not is_finished(wl) and is_active(wl)


# --- QuotaReserved and Admitted ----------------------------------------------------------------------------


def set_quota_reservation(wl: Obj, admission: Obj, now: str) -> bool:
    """`SetQuotaReservation`: admission, QuotaReserved=True, and active Evicted/Preempted reset to False."""
    status = status_of(wl)
    changed = status.get("admission") != admission
    status["admission"] = admission
    message = f"Quota reserved in ClusterQueue {admission['clusterQueue']}"
    changed |= set_condition(wl, k.QUOTA_RESERVED, True, k.REASON_QUOTA_RESERVED, message, now)
    for kind in (k.EVICTED, k.PREEMPTED, "BlockedOnPreemptionGates"):
        changed |= _reset_active_condition(wl, kind, k.REASON_QUOTA_RESERVED, now)
    return changed


def _reset_active_condition(wl: Obj, kind: str, reason: str, now: str) -> bool:
    previous = find(wl, kind)
    if previous is None or previous.get("status") != "True":
        return False
    return set_condition(wl, kind, False, reason, "Previously: " + str(previous.get("message", "")), now)


def unset_quota_reservation(wl: Obj, reason: str, message: str, now: str, config: KueueConfig) -> bool:
    """`UnsetQuotaReservationWithCondition`: QuotaReserved=False, admission cleared, Admitted re-synced."""
    changed = set_condition(wl, k.QUOTA_RESERVED, False, reason, message, now)
    status = status_of(wl)
    if status.get("admission") is not None:
        status["admission"] = None
        changed = True
    return sync_admitted_condition(wl, now, config) or changed


def sync_admitted_condition(wl: Obj, now: str, config: KueueConfig) -> bool:
    """`SyncAdmittedCondition`: Admitted is True exactly when quota is reserved and every check is Ready.

    With the observability gate off (v0.19.2's default) nothing is written unless Admitted must flip, so a
    workload that never was admitted has no `Admitted` condition; the reasons are v0.19.2's fallbacks. With the
    gate on (the default of Kueue's main branch after v0.19.2) the False condition is kept current as well:
    written where missing and its reason moved from `NoReservation` to `UnsatisfiedAdmissionChecks` once quota is
    reserved, as upstream's workload-controller tests at that snapshot expect
    (`pkg/controller/core/workload_controller_test.go`). v0.19.2's gate-on code also keeps both conditions absent
    until `QuotaReserved` is first written unless `UnadmittedWorkloadsExplicitStatus` is on; the lab does not
    reproduce that distinction.
    """
    reserved, ready, finished = has_quota_reservation(wl), has_all_checks_ready(wl), is_finished(wl)
    admitted = is_admitted(wl)
    wanted = reserved and ready
    if admitted == wanted and not config.unadmitted_workloads_observability:
        return False
    status_value, reason, message = True, k.REASON_ADMITTED, "The workload is admitted"
    if finished:
        status_value, reason, message = False, k.FINISHED, "Workload has finished"
    elif not reserved and not ready and not config.unadmitted_workloads_observability:
        status_value, reason = False, k.REASON_NO_RESERVATION_UNSATISFIED_CHECKS
        message = "The workload has no reservation and not all checks ready"
    elif not reserved:
        status_value, reason, message = False, k.REASON_NO_RESERVATION, "The workload has no reservation"
    elif not ready:
        status_value = False
        reason = config.reason(k.REASON_UNSATISFIED_CHECKS, k.REASON_UNSATISFIED_CHECKS_LEGACY)
        message = "The workload has not all checks ready"
    existing = find(wl, k.ADMITTED)
    same_status = existing is not None and (existing.get("status") == "True") == status_value
    if same_status and existing is not None and (existing.get("reason"), existing.get("message")) == (reason, message):
        return False
    if admitted and not status_value and existing is not None:
        elapsed = int(parse_timestamp(now) - parse_timestamp(str(existing.get("lastTransitionTime", now))))
        status = status_of(wl)
        past = int(status.get("accumulatedPastExecutionTimeSeconds") or 0)
        status["accumulatedPastExecutionTimeSeconds"] = past + max(elapsed, 0)
    return set_condition(wl, k.ADMITTED, status_value, reason, message, now)


# --- Requeued, Evicted, Preempted, DeactivationTarget, Finished ----------------------------------------------


def set_requeued(wl: Obj, reason: str, message: str, status: bool, now: str) -> bool:
    return set_condition(wl, k.REQUEUED, status, reason, message, now)


def set_evicted(wl: Obj, reason: str, message: str, now: str) -> bool:
    return set_condition(wl, k.EVICTED, True, reason, message, now)


def set_preempted(wl: Obj, reason: str, message: str, now: str) -> bool:
    """`SetPreemptedCondition` writes no observedGeneration."""
    return set_condition(wl, k.PREEMPTED, True, reason, message, now, generation=False)


def set_deactivation_target(wl: Obj, reason: str, message: str, now: str) -> bool:
    return set_condition(wl, k.DEACTIVATION_TARGET, True, reason, message, now)


def set_finished(wl: Obj, reason: str, message: str, now: str) -> bool:
    return set_condition(wl, k.FINISHED, True, reason, message, now)


def reset_checks_on_eviction(wl: Obj, now: str) -> bool:
    """`resetChecksOnEviction`: every non-Pending check back to Pending; a Retry one counts one more retry."""
    changed = False
    checks = admission_checks(wl)
    for index, check in enumerate(checks):
        state = check.get("state")
        if state == k.CHECK_PENDING:
            continue
        reset: Obj = {
            "name": check.get("name"),
            "state": k.CHECK_PENDING,
            "message": f"Reset to Pending after eviction. Previously: {state}",
            "lastTransitionTime": now,
        }
        if check.get("requeueAfterSeconds") is not None:
            reset["requeueAfterSeconds"] = check["requeueAfterSeconds"]
        if state == k.CHECK_RETRY:
            reset["retryCount"] = int(check.get("retryCount") or 0) + 1
        checks[index] = reset
        changed = True
    if changed:
        status_of(wl)["admissionChecks"] = checks
    return changed


def count_eviction(wl: Obj, reason: str, cause: str = "") -> None:
    """`workloadEvictionStateInc`: `status.schedulingStats.evictions[{reason, underlyingCause}].count += 1`."""
    stats = status_of(wl).setdefault("schedulingStats", {})
    evictions = stats.setdefault("evictions", [])
    for entry in evictions:
        if entry.get("reason") == reason and entry.get("underlyingCause", "") == cause:
            entry["count"] = int(entry.get("count", 0)) + 1
            return
    evictions.append({"reason": reason, "underlyingCause": cause, "count": 1})


def prepare_for_eviction(wl: Obj, reason: str, message: str, now: str, *, cause: str = "") -> None:
    """`evict.Evict` minus the write: Evicted=True, cluster nomination and unhealthy nodes cleared, checks reset.

    A deactivation carries its cause in the reason (`Deactivated` + `DueTo<cause>`, `patching.ReasonWithCause`).
    """
    eviction_reason = reason
    if reason == k.EVICTED_BY_DEACTIVATION and cause:
        eviction_reason = f"{reason}DueTo{cause}"
    set_evicted(wl, eviction_reason, message, now)
    status = status_of(wl)
    for key in ("clusterName", "nominatedClusterNames", "unhealthyNodes"):
        status.pop(key, None)
    reset_checks_on_eviction(wl, now)
    count_eviction(wl, reason, cause)


def checks_message(checks: Iterable[Obj], state: str) -> str:
    """`buildAdmissionChecksMessage`: `AdmissionCheck(s) in <state> state: "a" (msg); "b"`, sorted by name."""
    ordered = sorted(checks, key=lambda check: str(check.get("name", "")))
    parts = [
        f'"{check.get("name")}" ({check["message"]})' if check.get("message") else f'"{check.get("name")}"'
        for check in ordered
    ]
    noun = "AdmissionChecks" if len(ordered) > 1 else "AdmissionCheck"
    return f"{noun} in {state} state: {'; '.join(parts)}"


# --- admission check entries -----------------------------------------------------------------------------


def sync_admission_check_entries(wl: Obj, wanted: Iterable[str], now: str) -> bool:
    """`syncAdmissionCheckConditions`: a Pending entry per selected check, unselected ones dropped, sorted."""
    names = set(wanted)
    current = admission_checks(wl)
    if not names:
        return status_of(wl).pop("admissionChecks", None) is not None
    present = {str(check.get("name")) for check in current}
    changed = False
    for name in sorted(names - present):
        current.append({"name": name, "state": k.CHECK_PENDING, "message": "", "lastTransitionTime": now})
        changed = True
    kept = [check for check in current if check.get("name") in names]
    changed |= len(kept) != len(current)
    kept.sort(key=lambda check: str(check.get("name", "")))
    if changed:
        status_of(wl)["admissionChecks"] = kept
    return changed


# --- requeue state (Retry backoff) ---------------------------------------------------------------------------


def max_retry_time(wl: Obj) -> float | None:
    """`GetMaxRetryTime`: the latest `lastTransitionTime + requeueAfterSeconds` over checks in Retry."""
    latest: float | None = None
    for check in checks_in_state(wl, k.CHECK_RETRY):
        after, since = check.get("requeueAfterSeconds"), check.get("lastTransitionTime")
        if after is None or not since:
            continue
        at = parse_timestamp(str(since)) + int(after)
        latest = at if latest is None or at > latest else latest
    return latest


def requeue_at(wl: Obj) -> float | None:
    value = (status_of(wl).get("requeueState") or {}).get("requeueAt")
    return parse_timestamp(str(value)) if value else None


def needs_requeue_at_update(wl: Obj, now: float) -> str | None:
    """`NeedsRequeueAtUpdate`: the retry time to record when it is in the future and later than the current one."""
    latest = max_retry_time(wl)
    if latest is None or latest <= now:
        return None
    current = requeue_at(wl)
    if current is not None and current >= latest:
        return None
    return format_timestamp(latest)


def update_requeue_state(wl: Obj, strategy: RequeuingStrategy, now: float) -> None:
    """`UpdateRequeueState`: one more re-queue, and `requeueAt` its backoff from now (`SetRequeueState` with the
    count incremented; a later `requeueAt` already there is kept)."""
    state = status_of(wl).setdefault("requeueState", {})
    count = int(state.get("count") or 0) + 1
    wanted = format_timestamp(now + strategy.backoff(count))
    current = state.get("requeueAt")
    if current is None or parse_timestamp(str(current)) < parse_timestamp(wanted):
        state["requeueAt"] = wanted
    state["count"] = count


# --- PodsReady (waitForPodsReady) --------------------------------------------------------------------------


def pods_ready_condition(wl: Obj, pods_ready: bool) -> tuple[bool, str, str]:
    """`generatePodsReadyCondition`: (status, reason, message) of the `PodsReady` condition Kueue wants now."""
    if not is_admitted(wl):
        return False, k.PODS_READY_WAIT_FOR_START, k.PODS_READY_NOT_READY_MESSAGE
    current = find(wl, k.PODS_READY)
    if pods_ready:
        reason = k.PODS_READY_STARTED
        if current is not None and current.get("reason") in (k.PODS_READY_WAIT_FOR_RECOVERY, k.PODS_READY_RECOVERED):
            reason = k.PODS_READY_RECOVERED
        return True, reason, k.PODS_READY_READY_MESSAGE
    if current is not None and (
        current.get("status") == "True" or current.get("reason") == k.PODS_READY_WAIT_FOR_RECOVERY
    ):
        return False, k.PODS_READY_WAIT_FOR_RECOVERY, k.PODS_READY_RECOVERY_MESSAGE
    return False, k.PODS_READY_WAIT_FOR_START, k.PODS_READY_NOT_READY_MESSAGE


def pods_ready_wait(wl: Obj, config: WaitForPodsReady, now: float) -> tuple[str | None, float]:
    """`admittedNotReadyWorkload`: the cause an admitted Workload waits on (`WaitForStart`, counted from the
    admission, or `WaitForRecovery`, counted from `PodsReady=False`) and the seconds left; (None, 0) when it
    waits on nothing (not admitted, pods ready, or no recovery timeout)."""
    if not is_admitted(wl):
        return None, 0.0
    current = find(wl, k.PODS_READY)
    if current is not None and current.get("status") == "True":
        return None, 0.0
    if current is None or current.get("reason") in (k.PODS_READY_WAIT_FOR_START, "PodsReady"):
        admitted = find(wl, k.ADMITTED) or {}
        since = parse_timestamp(str(admitted.get("lastTransitionTime")))
        return k.PODS_READY_WAIT_FOR_START, max(config.timeout - (now - since), 0.0)
    recovery = config.effective_recovery_timeout
    if current.get("reason") == k.PODS_READY_WAIT_FOR_RECOVERY and recovery is not None:
        since = parse_timestamp(str(current.get("lastTransitionTime")))
        return k.PODS_READY_WAIT_FOR_RECOVERY, max(recovery - (now - since), 0.0)
    return None, 0.0


def has_condition_with_reason(wl: Obj, kind: str, status: bool, reason: str) -> bool:
    """`HasConditionWithTypeAndReason`: the type, status and reason match (the message is not compared)."""
    current = find(wl, kind)
    wanted = "True" if status else "False"
    return current is not None and current.get("status") == wanted and current.get("reason") == reason


def set_requeue_at(wl: Obj, when: str | None) -> bool:
    """`SetRequeueState` without a count increment (the admission-check path), or clearing `requeueAt`."""
    state = status_of(wl).setdefault("requeueState", {})
    if state.get("requeueAt") == when:
        return False
    if when is None:
        state.pop("requeueAt", None)
    else:
        state["requeueAt"] = when
    return True

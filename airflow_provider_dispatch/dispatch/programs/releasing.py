"""The programs that admit the next execution: `release` (plain mode) and `kueue_admit` (the admission check).

Both run the same checks before admitting (`_check_before_admission`): the hold observed and settled, the pod
fence in force, the record kept, and no pod of the previous execution remaining (`pods.drain`); then `release`
admits in one write conditioned on the resourceVersion it checked, raising the admission number by one.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from airflow_provider_dispatch.dispatch import vocabulary as v
from airflow_provider_dispatch.dispatch.admission import (
    admission_body,
    check_runtime_safe,
    kueue_admission_body,
    record_body,
)
from airflow_provider_dispatch.dispatch.assessment import (
    Execution,
    ManagedObject,
    Mode,
    Released,
    finished,
    is_held,
    managed,
)
from airflow_provider_dispatch.dispatch.errors import (
    ConflictError,
    FinishedError,
    HoldSettlingError,
    NotFoundError,
    PodFenceError,
    PodsRemainError,
    RefusedError,
    SpecRejectedError,
    SuspensionNotObservedError,
)
from airflow_provider_dispatch.dispatch.evidence import DEFAULT_SETTLE_SECONDS, judge_hold
from airflow_provider_dispatch.dispatch.fence import Fence, in_force_throughout, recorded_fence
from airflow_provider_dispatch.dispatch.fencing import ExecutionPods, grown
from airflow_provider_dispatch.dispatch.nodes import DEFAULT_CLOCK_SKEW_SECONDS
from airflow_provider_dispatch.dispatch.programs.holding import _set_workloads_active
from airflow_provider_dispatch.dispatch.programs.pods import _replace, drain
from airflow_provider_dispatch.dispatch.programs.protocol import (
    DEFAULT_PAGE_SIZE,
    DEFAULT_POD_READ,
    PodReadStrategy,
    Program,
)
from airflow_provider_dispatch.dispatch.programs.reads import read_runtime, read_trainjob, server_time
from airflow_provider_dispatch.dispatch.programs.record import ensure_record, hold_evidence, read_fence
from airflow_provider_dispatch.dispatch.validation import Ref, parse_ref

# --- release ------------------------------------------------------------------------------------------------


def _written_execution(response: Mapping[str, Any], expected: Execution) -> Execution:
    try:
        return managed(response).execution
    except RefusedError:
        return expected


def _refuse_unadmittable(trainjob: Mapping[str, Any], ref: str) -> None:
    if v.field(trainjob, "metadata", "deletionTimestamp") is not None:
        raise NotFoundError(
            f"TrainJob {ref} is being deleted, so it is not admitted. Open a new TrainJob once it is gone.",
            ref=ref,
        )
    done = finished(trainjob)
    if done is not None:
        raise FinishedError(
            f"TrainJob {ref} has finished ({done[1].get('type')}: {done[1].get('reason', '')}); unsuspending "
            "it would admit nothing. Open a new TrainJob (a new submission) instead.",
            ref=ref,
        )


@dataclass(frozen=True)
class Checked:
    """What a passed check hands the admitting write: the TrainJob as last written (a grown record changes its
    resourceVersion, and the admitting write is conditional on it), its runtime, the pod fence as read, and why
    the admission is not backed by the fence for the whole execution it ends ("" when it is: fence.py)."""

    trainjob: Mapping[str, Any]
    runtime: Mapping[str, Any]
    fence: Fence
    fence_note: str = ""


def _write_grown(
    trainjob: Mapping[str, Any], before: ExecutionPods, after: ExecutionPods, ref: str
) -> Program[Mapping[str, Any]]:
    """Write the grown record (`fencing.grown`) when it differs from the one read, conditionally; the TrainJob as
    written (or as read, when nothing is new)."""
    if after == before:
        return trainjob
    return (yield from _replace(v.TRAINJOB, record_body(trainjob, after.to_annotation()), ref))


def _check_before_admission(
    trainjob: Mapping[str, Any],
    obj: ManagedObject,
    execution_pods: ExecutionPods,
    *,
    now: datetime | None,
    pod_read: PodReadStrategy,
    page_size: int,
    settle_seconds: float,
    clock_skew_seconds: float,
    accepted_risks: Collection[str],
    require_pod_fence: bool,
) -> Program[Checked]:
    """DESIGN §3 on a held, recorded object. Raises unless the object may be admitted: the runtime policy; the hold
    observed for this execution (evidence.py; the pods are not read before, since the Jobs may still create
    some); the drain check; the settle; then the pod fence, with `require_pod_fence` (fence.py). Remaining pods
    are reported before the settle because they say more (which pod, on which node, what would unblock it) and
    usually outlast it. The fence is read last, after the pods: it vouches for the listing only if it was in force
    from the execution's admission until after the listing (read before it, it could be removed and a pod
    force-deleted between that read and the listing). Before it raises, the check adds to the record what it saw
    that the record does not keep (`fencing.grown`: pods not named under their node, Nodes found deleted, a
    namesake's predecessor), in one conditional write: what no later check could see again."""
    ref = str(obj.ref)
    runtime = yield from read_runtime(trainjob)
    check_runtime_safe(trainjob, runtime, accepted_risks)
    evidence = yield from hold_evidence(
        obj, execution_pods, settle_seconds=settle_seconds, clock_skew_seconds=clock_skew_seconds
    )
    record = grown(execution_pods, predecessors=bool(evidence.predecessors), now=evidence.server_now)
    evidence = replace(evidence, record=record)
    verdict = judge_hold(trainjob, evidence, obj.admission)
    if verdict is not None and verdict.seconds_left is None:
        yield from _write_grown(trainjob, execution_pods, record, ref)
        raise SuspensionNotObservedError(f"{verdict.reason}. Nothing was admitted.", ref=ref)
    drained = yield from drain(
        obj.selection,
        ref=ref,
        execution_pods=record,
        strategy=pod_read,
        page_size=page_size,
        clock_skew_seconds=clock_skew_seconds,
    )
    record = grown(record, pods=drained.pods, nodes=drained.nodes, now=drained.server_now)
    written = yield from _write_grown(trainjob, execution_pods, record, ref)
    if drained.remaining:
        raise PodsRemainError(ref, drained.remaining, now=now)
    if verdict is not None and verdict.seconds_left is not None:
        message = f"{verdict.reason}. Nothing was admitted."
        raise HoldSettlingError(message, ref=ref, seconds_left=verdict.seconds_left)
    if written is not trainjob:
        # what grows the record also refuses (a pod that may run, a deleted Node not yet proof, a namesake's
        # predecessor); should a change ever grow it without, the admission still follows a check of its own
        raise ConflictError(f"TrainJob {ref}: dispatch recorded what its check saw; checking again.", ref=ref)
    fence = yield from read_fence()
    note = in_force_throughout(fence, recorded_fence(trainjob, obj.admission)) or ""
    if note and require_pod_fence:
        raise PodFenceError(
            f"TrainJob {ref}: {note}. Nothing was admitted. Once no pod of execution {obj.admission} can run (its "
            "nodes are Ready or proven stopped), release it once without require_pod_fence: the record of its pods "
            "is what protects this one admission.",
            ref=ref,
        )
    return Checked(trainjob, runtime, fence, note)


def release(
    ref: str | Ref,
    *,
    now: datetime | None = None,
    pod_read: PodReadStrategy = DEFAULT_POD_READ,
    page_size: int = DEFAULT_PAGE_SIZE,
    settle_seconds: float = DEFAULT_SETTLE_SECONDS,
    accepted_risks: Collection[str] = frozenset(),
    clock_skew_seconds: float = DEFAULT_CLOCK_SKEW_SECONDS,
    require_pod_fence: bool = False,
) -> Program[Execution]:
    """Lift the hold and admit a new execution after the drain check passes (DESIGN §3); return its identity.

    An object already running returns its current execution and nothing is written (a retry after a lost
    response). A held object without dispatch's record of its execution's pods (suspended by someone else) gets
    the record first (`ensure_record`). Kueue mode: reactivate the Workload (Kueue re-admits; the admission
    check raises A), and return the current execution; waiting for Admitted is the caller's.
    """
    target = parse_ref(ref)
    trainjob = yield from read_trainjob(target)
    obj = managed(trainjob)
    text = str(obj.ref)
    if obj.mode is Mode.KUEUE:
        yield from _set_workloads_active(obj, active=True)
        return replace(obj.execution, released=Released.WORKLOAD_ACTIVE)
    if not is_held(trainjob):
        return replace(obj.execution, released=Released.ALREADY_RUNNING)
    _refuse_unadmittable(trainjob, text)
    trainjob, execution_pods = yield from ensure_record(trainjob, obj, page_size=page_size)
    checked = yield from _check_before_admission(
        trainjob,
        obj,
        execution_pods,
        now=now,
        pod_read=pod_read,
        page_size=page_size,
        settle_seconds=settle_seconds,
        clock_skew_seconds=clock_skew_seconds,
        accepted_risks=accepted_risks,
        require_pod_fence=require_pod_fence,
    )
    admitted_at = yield from server_time(text)
    body, execution = admission_body(
        checked.trainjob,
        checked.runtime,
        admitted_at=admitted_at,
        accepted_risks=accepted_risks,
        fence=checked.fence.identity,
    )
    try:
        written = yield from _replace(v.TRAINJOB, body, text)
    except ConflictError:
        # The object changed after the read that was checked. If it now runs, an admission happened: another
        # caller's, or this very write re-sent after its answer was lost (a client retrying an idempotent PUT).
        # Either way the object has one execution and releasing a running object returns it (DESIGN §3).
        # Otherwise the conflict stays retryable and the check runs again on the new state.
        current = yield from read_trainjob(target)
        if not is_held(current):
            return replace(managed(current).execution, released=Released.RUNNING_AFTER_CONFLICT)
        raise
    return replace(_written_execution(written, execution), released=Released.ADMITTED, fence_note=checked.fence_note)


def kueue_admit(
    ref: str | Ref,
    *,
    admission_key: str,
    now: datetime | None = None,
    pod_read: PodReadStrategy = DEFAULT_POD_READ,
    page_size: int = DEFAULT_PAGE_SIZE,
    settle_seconds: float = DEFAULT_SETTLE_SECONDS,
    accepted_risks: Collection[str] = frozenset(),
    clock_skew_seconds: float = DEFAULT_CLOCK_SKEW_SECONDS,
    require_pod_fence: bool = False,
) -> Program[Execution]:
    """Kueue mode, for the admission check controller: the drain check, then A+1 (suspend left to Kueue).

    `admission_key` identifies one Workload admission (the controller chooses it, e.g. Workload uid and the
    QuotaReserved transition time). When the TrainJob already carries that key, A was raised for this
    admission and the current execution is returned with nothing written: idempotent per Workload admission.
    Kueue suspends the TrainJob without a dispatch hold, so the first check after a suspension writes the
    record of the execution's pods (`ensure_record`), and the hold then settles (evidence.py).
    """
    target = parse_ref(ref)
    trainjob = yield from read_trainjob(target)
    obj = managed(trainjob)
    text = str(obj.ref)
    if obj.mode is not Mode.KUEUE:
        raise SpecRejectedError(
            f"TrainJob {text} has no {v.LABEL_KUEUE_QUEUE_NAME} label, so it is not in Kueue mode; use release.",
            ref=text,
        )
    if v.annotations_of(trainjob).get(v.ANNOTATION_ADMISSION_KEY) == admission_key:
        return obj.execution
    if not is_held(trainjob):
        raise SuspensionNotObservedError(
            f"TrainJob {text} is not suspended, so the admission check cannot admit it; Kueue suspends an "
            "unadmitted TrainJob again. Nothing was raised.",
            ref=text,
        )
    _refuse_unadmittable(trainjob, text)
    trainjob, execution_pods = yield from ensure_record(trainjob, obj, page_size=page_size)
    checked = yield from _check_before_admission(
        trainjob,
        obj,
        execution_pods,
        now=now,
        pod_read=pod_read,
        page_size=page_size,
        settle_seconds=settle_seconds,
        clock_skew_seconds=clock_skew_seconds,
        accepted_risks=accepted_risks,
        require_pod_fence=require_pod_fence,
    )
    body, execution = kueue_admission_body(
        checked.trainjob,
        checked.runtime,
        admission_key=admission_key,
        accepted_risks=accepted_risks,
        fence=checked.fence.identity,
    )
    written = yield from _replace(v.TRAINJOB, body, text)
    return replace(_written_execution(written, execution), fence_note=checked.fence_note)

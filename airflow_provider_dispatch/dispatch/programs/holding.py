"""The program that holds a TrainJob: suspended, in one write that also records the execution's pods.

In Kueue mode it also sets the TrainJob's Workloads inactive, so that Kueue does not re-admit it while held.
"""

from __future__ import annotations

from collections.abc import Mapping

from airflow_provider_dispatch.dispatch import vocabulary as v
from airflow_provider_dispatch.dispatch.admission import hold_body
from airflow_provider_dispatch.dispatch.assessment import Execution, ManagedObject, Mode, is_held, managed
from airflow_provider_dispatch.dispatch.errors import UnreachableError
from airflow_provider_dispatch.dispatch.fencing import record, recorded
from airflow_provider_dispatch.dispatch.nodes import DEFAULT_CLOCK_SKEW_SECONDS
from airflow_provider_dispatch.dispatch.programs.pods import _replace
from airflow_provider_dispatch.dispatch.programs.protocol import (
    DEFAULT_PAGE_SIZE,
    DEFAULT_POD_READ,
    PodReadStrategy,
    Program,
)
from airflow_provider_dispatch.dispatch.programs.reads import _workloads, read_trainjob, server_time
from airflow_provider_dispatch.dispatch.programs.record import _same_execution_after_read, ensure_record, read_lineage
from airflow_provider_dispatch.dispatch.validation import Ref, parse_ref

# --- hold ---------------------------------------------------------------------------------------------------


def _set_workloads_active(obj: ManagedObject, *, active: bool) -> Program[int]:
    """Kueue mode hold/release: `spec.active` on the TrainJob's Workloads; returns how many were written."""
    written = 0
    for workload in (yield from _workloads(obj)):
        if (v.field(workload, "spec", "active") is not False) == active:
            continue
        spec = v.field(workload, "spec")
        body = {key: value for key, value in workload.items() if key != "status"}
        body["spec"] = {**(dict(spec) if isinstance(spec, Mapping) else {}), "active": active}
        yield from _replace(v.WORKLOAD, body, str(obj.ref))
        written += 1
    return written


def hold(
    ref: str | Ref,
    *,
    pod_read: PodReadStrategy = DEFAULT_POD_READ,
    page_size: int = DEFAULT_PAGE_SIZE,
    clock_skew_seconds: float = DEFAULT_CLOCK_SKEW_SECONDS,
) -> Program[Execution]:
    """Keep the object from running (plain: `spec.suspend: true`; Kueue: Workload `spec.active: false`).

    Plain mode reads the execution's pods first, by lineage (one full read of the namespace, so that a pod
    whose labels were edited is recorded too), and records, in the same conditional write that suspends,
    which of them were not finished, their uids and nodes, the API server's time, and when dispatch started
    the execution (fencing.py, evidence.py). A failed read writes nothing (retryable): a hold without its
    record would be a hold that a force deletion or a label edit can defeat. An object already held without
    a record of its current execution (suspended by someone else) gets the record; one already held with it
    is left as it is. `pod_read` is accepted for symmetry with the other programs: the hold always reads the
    whole namespace (`clock_skew_seconds` likewise: the hold compares no times). Returns the current execution
    identity.
    """
    del pod_read, clock_skew_seconds
    target = parse_ref(ref)
    trainjob = yield from read_trainjob(target)
    obj = managed(trainjob)
    text = str(obj.ref)
    if obj.mode is Mode.KUEUE:
        workloads = yield from _workloads(obj)
        if not workloads and not is_held(trainjob):
            raise UnreachableError(
                f"TrainJob {obj.ref} runs under Kueue but has no Workload yet, so there is nothing to "
                "deactivate; retry once Kueue has created it.",
                ref=text,
            )
        yield from _set_workloads_active(obj, active=False)
        return obj.execution
    if is_held(trainjob):
        yield from ensure_record(trainjob, obj, page_size=page_size)
        return obj.execution
    since = yield from server_time(text)
    pods, nodes = yield from read_lineage(obj, trainjob, page_size=page_size)
    trainjob = yield from _same_execution_after_read(trainjob, obj)
    # a record of this execution on a running object means it was held and resumed outside dispatch since
    # dispatch started it: its start is then unknown (evidence.py)
    resumed_outside = recorded(trainjob, obj.admission, text) is not None
    started = None if resumed_outside else v.parse_time(v.annotations_of(trainjob).get(v.ANNOTATION_ADMITTED_AT))
    made = record(obj.admission, pods, since=since, started=started, nodes=nodes)
    yield from _replace(v.TRAINJOB, hold_body(trainjob, made.to_annotation()), text)
    return obj.execution

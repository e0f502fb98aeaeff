"""The read-only programs: `inspect`, `find`, `list_managed`, `remaining_pods` and `ceased`.

They read and assess, never write: `dispatch status`, `find` and `list`, the sensors and the triggers run them,
on an adapter that refuses any write (`sync_adapter.py`'s read-only guard).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from airflow_provider_dispatch.dispatch import vocabulary as v
from airflow_provider_dispatch.dispatch.assessment import DrainReport, Mode, Status, assess, managed
from airflow_provider_dispatch.dispatch.errors import NotFoundError, RefusedError
from airflow_provider_dispatch.dispatch.evidence import DEFAULT_SETTLE_SECONDS
from airflow_provider_dispatch.dispatch.fencing import ExecutionPods, recorded
from airflow_provider_dispatch.dispatch.nodes import DEFAULT_CLOCK_SKEW_SECONDS
from airflow_provider_dispatch.dispatch.programs.pods import drain
from airflow_provider_dispatch.dispatch.programs.protocol import (
    DEFAULT_PAGE_SIZE,
    DEFAULT_POD_READ,
    ApiFailure,
    GetObject,
    PodReadStrategy,
    Program,
)
from airflow_provider_dispatch.dispatch.programs.reads import _list_all, _object, _workloads, read_trainjob
from airflow_provider_dispatch.dispatch.programs.record import hold_evidence
from airflow_provider_dispatch.dispatch.selection import Selection
from airflow_provider_dispatch.dispatch.unfinished import with_unfinished
from airflow_provider_dispatch.dispatch.validation import Ref, parse_ref, validate_job_id, validate_namespace

# --- read-only programs -------------------------------------------------------------------------------------


def _inspect_object(
    trainjob: Mapping[str, Any],
    *,
    now: datetime | None,
    pod_read: PodReadStrategy,
    page_size: int,
    settle_seconds: float,
    clock_skew_seconds: float,
) -> Program[Status]:
    obj = managed(trainjob)
    workload: Mapping[str, Any] | None = None
    if obj.mode is Mode.KUEUE:
        workloads = yield from _workloads(obj)
        workload = workloads[0] if workloads else None
    execution_pods = recorded(trainjob, obj.admission, str(obj.ref))
    evidence = yield from hold_evidence(
        obj, execution_pods, settle_seconds=settle_seconds, clock_skew_seconds=clock_skew_seconds
    )
    drained = yield from drain(
        obj.selection,
        ref=str(obj.ref),
        execution_pods=execution_pods,
        strategy=pod_read,
        page_size=page_size,
        clock_skew_seconds=clock_skew_seconds,
    )
    status = assess(
        trainjob, evidence, drained.read.pods, drained.judged, lookups=drained.lookups, workload=workload, now=now
    )
    return with_unfinished(status, trainjob, drained.read.pods, drained.judged, workload=workload, now=now)


def inspect(
    ref: str | Ref,
    *,
    now: datetime | None = None,
    pod_read: PodReadStrategy = DEFAULT_POD_READ,
    page_size: int = DEFAULT_PAGE_SIZE,
    settle_seconds: float = DEFAULT_SETTLE_SECONDS,
    clock_skew_seconds: float = DEFAULT_CLOCK_SKEW_SECONDS,
) -> Program[Status]:
    """The status of one object (DESIGN §7). Writes nothing."""
    trainjob = yield from read_trainjob(parse_ref(ref))
    return (
        yield from _inspect_object(
            trainjob,
            now=now,
            pod_read=pod_read,
            page_size=page_size,
            settle_seconds=settle_seconds,
            clock_skew_seconds=clock_skew_seconds,
        )
    )


def find(
    namespace: str,
    job_id: str,
    *,
    now: datetime | None = None,
    pod_read: PodReadStrategy = DEFAULT_POD_READ,
    page_size: int = DEFAULT_PAGE_SIZE,
    settle_seconds: float = DEFAULT_SETTLE_SECONDS,
    clock_skew_seconds: float = DEFAULT_CLOCK_SKEW_SECONDS,
) -> Program[Status]:
    """The status of the newest TrainJob in the namespace with that job id (by creationTimestamp, then name).

    Several TrainJobs can share a job id (one per submission); the newest is the job's current submission.
    Writes nothing.
    """
    validate_namespace(namespace)
    validate_job_id(job_id)
    where = f"{namespace}/*"
    items = yield from _list_all(v.TRAINJOB, namespace, f"{v.LABEL_JOB_ID}={job_id}", where)
    matching = [t for t in items if v.labels_of(t).get(v.LABEL_JOB_ID) == job_id]
    if not matching:
        raise NotFoundError(
            f"no TrainJob in namespace {namespace} carries {v.LABEL_JOB_ID}={job_id}. Open one, or check the "
            "namespace and job id.",
            ref=where,
        )

    def newest(t: Mapping[str, Any]) -> tuple[str, str]:
        stamp = v.field(t, "metadata", "creationTimestamp")
        return (stamp if isinstance(stamp, str) else "", v.name_of(t))

    return (
        yield from _inspect_object(
            max(matching, key=newest),
            now=now,
            pod_read=pod_read,
            page_size=page_size,
            settle_seconds=settle_seconds,
            clock_skew_seconds=clock_skew_seconds,
        )
    )


@dataclass(frozen=True)
class Listed:
    """One TrainJob of `list_managed`: its status, or the refusal that kept it from being assessed."""

    ref: str
    created: str | None
    status: Status | None = None
    refused: RefusedError | None = None


def list_managed(
    namespace: str | None,
    *,
    now: datetime | None = None,
    pod_read: PodReadStrategy = DEFAULT_POD_READ,
    page_size: int = DEFAULT_PAGE_SIZE,
    settle_seconds: float = DEFAULT_SETTLE_SECONDS,
    clock_skew_seconds: float = DEFAULT_CLOCK_SKEW_SECONDS,
) -> Program[tuple[Listed, ...]]:
    """Every TrainJob carrying dispatch's job-id label in the namespace (None: all), each assessed as `inspect`
    assesses it, ordered by namespace and name. Writes nothing.

    One TrainJob that cannot be assessed (its labels are not dispatch's, say) is a refusal in its entry, so one
    bad object does not hide the others; a failure worth retrying (unreachable, 5xx) ends the whole list.
    """
    if namespace is not None:
        validate_namespace(namespace)
    where = f"{namespace or '*'}/*"
    items = yield from _list_all(v.TRAINJOB, namespace, v.LABEL_JOB_ID, where)
    listed: list[Listed] = []
    for trainjob in sorted(items, key=lambda t: (v.namespace_of(t), v.name_of(t))):
        ref = f"{v.namespace_of(trainjob)}/{v.name_of(trainjob)}"
        stamp = v.field(trainjob, "metadata", "creationTimestamp")
        created = stamp if isinstance(stamp, str) else None
        try:
            status = yield from _inspect_object(
                trainjob,
                now=now,
                pod_read=pod_read,
                page_size=page_size,
                settle_seconds=settle_seconds,
                clock_skew_seconds=clock_skew_seconds,
            )
        except RefusedError as error:
            listed.append(Listed(ref, created, refused=error))
            continue
        listed.append(Listed(ref, created, status=status))
    return tuple(listed)


def remaining_pods(
    ref: str | Ref,
    *,
    job_id: str | None = None,
    submission: str | None = None,
    now: datetime | None = None,
    pod_read: PodReadStrategy = DEFAULT_POD_READ,
    page_size: int = DEFAULT_PAGE_SIZE,
    clock_skew_seconds: float = DEFAULT_CLOCK_SKEW_SECONDS,
) -> Program[DrainReport]:
    """The object's remaining pods with their node states. Writes nothing; works read-only.

    When the TrainJob no longer exists (deleted; its pods may linger), pods are selected by jobset-name, and
    by `job_id`/`submission` when given.
    """
    target = parse_ref(ref)
    text = str(target)
    request = GetObject(v.TRAINJOB, target.namespace, target.name)
    response = yield request
    execution_pods: ExecutionPods | None = None
    if isinstance(response, ApiFailure) and response.status == 404:
        selection = Selection(target.namespace, target.name, job_id, submission)
    else:
        trainjob = _object(response, request, text)
        obj = managed(trainjob)
        selection = obj.selection
        execution_pods = recorded(trainjob, obj.admission, text)
    drained = yield from drain(
        selection,
        ref=text,
        execution_pods=execution_pods,
        strategy=pod_read,
        page_size=page_size,
        clock_skew_seconds=clock_skew_seconds,
    )
    return drained.report(text, now=now)


def ceased(
    ref: str | Ref,
    *,
    job_id: str | None = None,
    submission: str | None = None,
    pod_read: PodReadStrategy = DEFAULT_POD_READ,
    page_size: int = DEFAULT_PAGE_SIZE,
    clock_skew_seconds: float = DEFAULT_CLOCK_SKEW_SECONDS,
) -> Program[bool]:
    """Every remaining pod's processes are proven gone (True also when none remains). Writes nothing."""
    report = yield from remaining_pods(
        ref,
        job_id=job_id,
        submission=submission,
        pod_read=pod_read,
        page_size=page_size,
        clock_skew_seconds=clock_skew_seconds,
    )
    return report.ceased

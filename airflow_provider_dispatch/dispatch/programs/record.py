"""The hold's evidence and record: what a writer reads to judge the hold, and the record it keeps of the pods.

`hold_evidence` reads what `evidence.judge_hold` needs (the Jobs the JobSet implies, their deleted namesakes'
successors, the API server's time); `read_fence` what `fence.judge_fence` needs; `read_lineage` the execution's
pods by the selection no label edit defeats; `ensure_record` writes the record (`fencing.py`) once, or grows it
with what a check saw, in a write conditioned on the object the check read.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_provider_dispatch.dispatch import vocabulary as v
from airflow_provider_dispatch.dispatch.admission import record_body
from airflow_provider_dispatch.dispatch.assessment import ManagedObject, is_held, managed
from airflow_provider_dispatch.dispatch.blocking import nodes_to_read
from airflow_provider_dispatch.dispatch.errors import ConflictError, InvalidNameError, NotFoundError
from airflow_provider_dispatch.dispatch.evidence import HoldEvidence, expected_job_names, predecessor_jobs
from airflow_provider_dispatch.dispatch.fence import POLICY_NAME, Fence, FenceLookup, judge_fence
from airflow_provider_dispatch.dispatch.fencing import ExecutionPods, record, recorded
from airflow_provider_dispatch.dispatch.nodes import DEFAULT_CLOCK_SKEW_SECONDS, NodeLookup, NodeRead
from airflow_provider_dispatch.dispatch.programs.pods import _read_full, _replace, read_nodes
from airflow_provider_dispatch.dispatch.programs.protocol import ApiFailure, GetObject, Program
from airflow_provider_dispatch.dispatch.programs.reads import (
    _list_all,
    _object,
    read_jobset,
    read_runtime,
    read_trainjob,
    server_time,
)
from airflow_provider_dispatch.dispatch.selection import Lineage, jobset_job_names
from airflow_provider_dispatch.dispatch.validation import Ref, validate_label_value, validate_node_name

# --- the hold's evidence and record ---------------------------------------------------------------------------


def read_jobs(ref: Ref, jobset: Mapping[str, Any] | None) -> Program[dict[str, Mapping[str, Any] | None]]:
    """The Jobs the JobSet's spec implies, each read itself (a quorum GET); None where one does not exist."""
    result: dict[str, Mapping[str, Any] | None] = {}
    for name in expected_job_names(jobset):
        try:
            validate_node_name(name)  # a Job name is an RFC 1123 subdomain too
        except InvalidNameError:
            result[name] = None
            continue
        request = GetObject(v.JOB, ref.namespace, name)
        response = yield request
        result[name] = (
            None
            if isinstance(response, ApiFailure) and response.status == 404
            else _object(response, request, str(ref))
        )
    return result


def read_predecessors(ref: Ref, jobset: Mapping[str, Any] | None) -> Program[tuple[str, ...]]:
    """The Jobs a deleted TrainJob of the same name left that may still create pods (`evidence.predecessor_jobs`):
    every Job labelled with the JobSet name, in one quorum list, whatever its owner."""
    selector = f"{v.LABEL_JOBSET_NAME}={validate_label_value(ref.name, 'TrainJob name', ref=str(ref))}"
    items = yield from _list_all(v.JOB, ref.namespace, selector, str(ref))
    labelled = [job for job in items if v.labels_of(job).get(v.LABEL_JOBSET_NAME) == ref.name]
    return predecessor_jobs(jobset, labelled)


def hold_evidence(
    obj: ManagedObject,
    execution_pods: ExecutionPods | None,
    *,
    settle_seconds: float,
    clock_skew_seconds: float = DEFAULT_CLOCK_SKEW_SECONDS,
) -> Program[HoldEvidence]:
    """What judging the hold needs (evidence.py): the JobSet, its Jobs, the Jobs a deleted namesake left, and
    the API server's time."""
    jobset = yield from read_jobset(obj.ref)
    jobs = yield from read_jobs(obj.ref, jobset)
    predecessors = yield from read_predecessors(obj.ref, jobset)
    now = yield from server_time(str(obj.ref))
    return HoldEvidence(jobset, jobs, execution_pods, now, settle_seconds, predecessors, clock_skew_seconds)


def read_fence() -> Program[Fence]:
    """The pod fence's policy and binding (fence.py), each one GET: 404 reads as not installed, 403 as not
    readable; other failures are raised."""
    found: list[FenceLookup] = []
    for coords in (v.VALIDATING_ADMISSION_POLICY, v.VALIDATING_ADMISSION_POLICY_BINDING):
        request = GetObject(coords, None, POLICY_NAME)
        response = yield request
        if isinstance(response, ApiFailure) and response.status == 404:
            found.append(NodeRead.GONE)
        elif isinstance(response, ApiFailure) and response.status == 403:
            found.append(NodeRead.NOT_READABLE)
        else:
            found.append(_object(response, request, POLICY_NAME))
    return judge_fence(found[0], found[1])


def _replicated_jobs_of_runtime(trainjob: Mapping[str, Any]) -> Program[list[Mapping[str, Any]]]:
    try:
        runtime = yield from read_runtime(trainjob)
    except NotFoundError:
        return []
    return v.object_list(runtime, "spec", "template", "spec", "replicatedJobs")


def read_lineage(
    obj: ManagedObject, trainjob: Mapping[str, Any], *, page_size: int
) -> Program[tuple[tuple[Mapping[str, Any], ...], dict[str, NodeLookup]]]:
    """What a record is made of: the object's pods by a selection no label edit defeats (`selection.Lineage`), one
    full read of the namespace paid once per hold, the Job names from the JobSet, or from the runtime when there
    is none; then the Nodes of those that may run, whose Ready transition the record keeps (fencing.py)."""
    jobset = yield from read_jobset(obj.ref)
    if jobset is not None:
        replicated = v.object_list(jobset, "spec", "replicatedJobs")
    else:
        replicated = yield from _replicated_jobs_of_runtime(trainjob)
    lineage = Lineage(obj.selection, frozenset(jobset_job_names(obj.ref.name, replicated)))
    read = yield from _read_full(lineage, obj.ref.namespace, page_size, str(obj.ref))
    nodes = yield from read_nodes(nodes_to_read(read.pods), ref=str(obj.ref))
    return read.pods, nodes


def ensure_record(
    trainjob: Mapping[str, Any], obj: ManagedObject, *, page_size: int
) -> Program[tuple[Mapping[str, Any], ExecutionPods]]:
    """The record of the current execution's pods on a held object, written first when there is none (the
    object was suspended by someone else, or by Kueue): its pods by lineage, stamped with the API server's time.
    Returns the object as written (the next write is conditional on it) and the record.

    A never-admitted object (A = 0) needs no settle (evidence.py), so its record is written only when the
    lineage read finds pods a namesake left that may still run; otherwise the (empty) record is not written
    and the next check reads the namespace again."""
    text = str(obj.ref)
    existing = recorded(trainjob, obj.admission, text)
    if existing is not None:
        return trainjob, existing
    since = yield from server_time(text)
    pods, nodes = yield from read_lineage(obj, trainjob, page_size=page_size)
    made = record(obj.admission, pods, since=since, nodes=nodes)
    if obj.admission == 0 and not made.names and not made.nodes:
        return trainjob, made
    current = yield from _same_execution_after_read(trainjob, obj)
    written = yield from _replace(v.TRAINJOB, record_body(current, made.to_annotation()), text)
    return written, made


def _same_execution_after_read(trainjob: Mapping[str, Any], obj: ManagedObject) -> Program[Mapping[str, Any]]:
    """The TrainJob read again after the namespace's pods were (a full read takes seconds in a large namespace,
    and Trainer writes the TrainJob's status meanwhile): the record's write is conditional on this read, and still
    about the execution the pods were read for, held or not as it was. Otherwise a retryable ConflictError."""
    current = yield from read_trainjob(obj.ref)
    same = managed(current)
    if (same.uid, same.admission, is_held(current)) != (obj.uid, obj.admission, is_held(trainjob)):
        raise ConflictError(
            f"TrainJob {obj.ref} changed while dispatch read its pods (execution {obj.admission} -> "
            f"{same.admission}, held {is_held(trainjob)} -> {is_held(current)}); nothing was written. Retry.",
            ref=str(obj.ref),
        )
    return current

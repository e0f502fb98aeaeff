"""The program that opens a TrainJob: create it held from a manifest (`prepare_manifest`), then release it.

A TrainJob that already exists is accepted only when it is the same object the manifest describes; the first
execution is admitted by `releasing.release`, as every later one is.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from datetime import datetime
from typing import Any, Final

from airflow_provider_dispatch.dispatch import vocabulary as v
from airflow_provider_dispatch.dispatch.admission import check_runtime_safe, dispatch_runtime_patch, runtime_reference
from airflow_provider_dispatch.dispatch.assessment import Execution, managed
from airflow_provider_dispatch.dispatch.errors import AlreadyExistsError, SpecRejectedError, UnreachableError
from airflow_provider_dispatch.dispatch.evidence import DEFAULT_SETTLE_SECONDS
from airflow_provider_dispatch.dispatch.fencing import record
from airflow_provider_dispatch.dispatch.nodes import DEFAULT_CLOCK_SKEW_SECONDS
from airflow_provider_dispatch.dispatch.programs.protocol import (
    DEFAULT_PAGE_SIZE,
    DEFAULT_POD_READ,
    ApiFailure,
    CreateObject,
    GetObject,
    PodReadStrategy,
    Program,
)
from airflow_provider_dispatch.dispatch.programs.reads import _failure, _object, read_runtime, server_time
from airflow_provider_dispatch.dispatch.programs.record import read_fence, read_lineage, read_predecessors
from airflow_provider_dispatch.dispatch.programs.releasing import release
from airflow_provider_dispatch.dispatch.validation import (
    Ref,
    parse_ref,
    validate_job_id,
    validate_namespace,
    validate_submission,
    validate_trainjob_name,
)

# --- open ---------------------------------------------------------------------------------------------------

#: metadata the API server sets; dropped from a manifest before it is created
_SERVER_METADATA: Final = (
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "generation",
    "managedFields",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "selfLink",
)


def prepare_manifest(manifest: Mapping[str, Any], ref: str | Ref | None = None) -> tuple[Ref, dict[str, Any]]:
    """The create body for `open`: the manifest, held, without server-set fields; refused when unusable."""
    if not isinstance(manifest, Mapping):
        raise SpecRejectedError("the TrainJob manifest must be an object (a dict)")
    metadata = manifest.get("metadata")
    if not isinstance(metadata, Mapping):
        raise SpecRejectedError("the TrainJob manifest has no metadata: give metadata.name and the dispatch labels")
    given = parse_ref(ref) if ref is not None else None
    if "generateName" in metadata and "name" not in metadata:
        raise SpecRejectedError("the TrainJob manifest uses metadata.generateName; open needs a fixed metadata.name")
    name = validate_trainjob_name(metadata.get("name"))
    namespace = metadata.get("namespace") or (given.namespace if given else None)
    if namespace is None:
        raise SpecRejectedError(f"the TrainJob manifest {name} has no metadata.namespace, and no ref was given")
    target = Ref(validate_namespace(namespace), name)
    text = str(target)
    if given is not None and given != target:
        raise SpecRejectedError(f"the manifest names TrainJob {text} but open was asked for {given}", ref=text)
    for key, expected in (("apiVersion", v.TRAINJOB.api_version), ("kind", v.TRAINJOB.kind)):
        if manifest.get(key, expected) != expected:
            raise SpecRejectedError(
                f"the manifest for {text} has {key} {manifest.get(key)!r}; open creates a {expected} only",
                ref=text,
            )
    found = v.labels_of(manifest)
    for key, check in ((v.LABEL_JOB_ID, validate_job_id), (v.LABEL_SUBMISSION, validate_submission)):
        if key not in found:
            raise SpecRejectedError(
                f"the manifest for TrainJob {text} lacks the label {key}; open needs {v.LABEL_JOB_ID} and "
                f"{v.LABEL_SUBMISSION} to identify its executions",
                ref=text,
            )
        check(found[key], ref=text)
    if v.ANNOTATION_ADMISSION in v.annotations_of(manifest):
        raise SpecRejectedError(
            f"the manifest for TrainJob {text} sets the annotation {v.ANNOTATION_ADMISSION}; dispatch owns "
            "the admission number, remove it",
            ref=text,
        )
    patches = v.object_list(manifest, "spec", "runtimePatches")
    if any(p.get("manager") == v.RUNTIME_PATCH_MANAGER for p in patches):
        raise SpecRejectedError(
            f"the manifest for TrainJob {text} carries a runtime patch of manager {v.RUNTIME_PATCH_MANAGER}; "
            "dispatch owns that patch, remove it",
            ref=text,
        )
    spec = manifest.get("spec")
    if not isinstance(spec, Mapping):
        raise SpecRejectedError(f"the manifest for TrainJob {text} has no spec", ref=text)
    body_metadata = {k: val for k, val in metadata.items() if k not in _SERVER_METADATA}
    body_metadata["namespace"] = target.namespace
    body = {
        "apiVersion": v.TRAINJOB.api_version,
        "kind": v.TRAINJOB.kind,
        "metadata": body_metadata,
        "spec": {**dict(spec), "suspend": True},
    }
    runtime_reference(body)
    return target, body


def open(
    manifest: Mapping[str, Any],
    *,
    ref: str | Ref | None = None,
    now: datetime | None = None,
    pod_read: PodReadStrategy = DEFAULT_POD_READ,
    page_size: int = DEFAULT_PAGE_SIZE,
    settle_seconds: float = DEFAULT_SETTLE_SECONDS,
    accepted_risks: Collection[str] = frozenset(),
    clock_skew_seconds: float = DEFAULT_CLOCK_SKEW_SECONDS,
    require_pod_fence: bool = False,
) -> Program[Execution]:
    """Create the object held, then release it: the same check applies (a namesake may have left pods).

    The create body carries the record of execution 0 (fencing.py): the pods a namesake left, read by lineage,
    and whether it left Jobs that may still create pods (evidence.py), so that release needs no write of its own
    before it checks; and the pod fence's identity when it is in force (fence.py). On AlreadyExists the existing
    TrainJob is taken as this object when it carries the same job id and submission (a retried open after a lost
    response); anything else is refused (AlreadyExistsError). Right after creation Trainer has usually not
    observed the hold yet, so the release raises SuspensionNotObservedError; retrying open then continues with
    the existing object.
    """
    target, body = prepare_manifest(manifest, ref)
    text = str(target)
    runtime = yield from read_runtime(body)
    check_runtime_safe(body, runtime, accepted_risks)
    obj = managed(body)
    dispatch_runtime_patch(runtime, obj.execution)
    since = yield from server_time(text)
    leftovers, nodes = yield from read_lineage(obj, body, page_size=page_size)
    predecessors = yield from read_predecessors(target, None)
    fence = yield from read_fence()
    annotations = body["metadata"].setdefault("annotations", {})
    made = record(0, leftovers, since=since, nodes=nodes, leftovers=bool(predecessors))
    annotations[v.ANNOTATION_EXECUTION_PODS] = made.to_annotation()
    if fence.identity is not None:
        annotations[v.ANNOTATION_POD_FENCE] = fence.identity.to_annotation(0)
    request = CreateObject(v.TRAINJOB, target.namespace, body)
    response = yield request
    if isinstance(response, ApiFailure):
        if response.status != 409:
            raise _failure(request, response, text)
        lookup = GetObject(v.TRAINJOB, target.namespace, target.name)
        existing = yield lookup
        if isinstance(existing, ApiFailure) and existing.status == 404:
            raise UnreachableError(
                f"TrainJob {text} existed when open tried to create it and is gone now (it was being "
                "deleted); retry open.",
                ref=text,
            )
        _same_object_or_refuse(_object(existing, lookup, text), body, text)
    else:
        _object(response, request, text)
    return (
        yield from release(
            target,
            now=now,
            pod_read=pod_read,
            page_size=page_size,
            settle_seconds=settle_seconds,
            accepted_risks=accepted_risks,
            clock_skew_seconds=clock_skew_seconds,
            require_pod_fence=require_pod_fence,
        )
    )


def _same_object_or_refuse(existing: Mapping[str, Any], body: Mapping[str, Any], text: str) -> None:
    mine = v.labels_of(body)
    theirs = v.labels_of(existing)
    same = all(theirs.get(key) == mine.get(key) for key in (v.LABEL_JOB_ID, v.LABEL_SUBMISSION))
    if not same:
        raise AlreadyExistsError(
            f"TrainJob {text} already exists as another object (job id {theirs.get(v.LABEL_JOB_ID)!r}, "
            f"submission {theirs.get(v.LABEL_SUBMISSION)!r}; open was asked for job id "
            f"{mine.get(v.LABEL_JOB_ID)!r}, "
            f"submission {mine.get(v.LABEL_SUBMISSION)!r}). Delete it, or open under another name.",
            ref=text,
        )
    if v.field(existing, "metadata", "deletionTimestamp") is not None:
        raise UnreachableError(f"TrainJob {text} exists but is being deleted; retry open once it is gone.", ref=text)

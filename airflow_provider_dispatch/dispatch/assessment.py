"""One pure function from (TrainJob, JobSet, pods, nodes) to a status (DESIGN §3.1, §7).

States, precisely (first match wins):

* `succeeded` / `failed`: the TrainJob has the condition `Complete` / `Failed` True (k8s-apis §1.3; Kueue's
  `Finished()` reads the same two). Remaining pods are still listed in the detail.
* `running`: `spec.suspend` is not true: the object is admitted and unsuspended (plain mode: by dispatch;
  Kueue mode: by Kueue after every admission check was Ready).
* `held`: `spec.suspend` is true, the hold is observed (below) and no pod of the object remains.
* `waiting`: `spec.suspend` is true, but pods remain or the hold is not observed yet.

"Hold observed" (DESIGN §3.1): every controller that could still create the execution's pods shows it acted
on this execution's hold, and no write from before the hold can still land (evidence.py). Until then Jobs may
still create pods after a check.

`drained` means no pod remains. `ceased` means every remaining pod's processes are proven gone; it is True
when none remains (nothing can run), so "drained or ceased" reads simply as `ceased`.

The managed-by-dispatch check lives here too: a managed object carries valid `job-id` and `submission` labels,
and its admission annotation, when present, is a valid admission number (absent means 0: never admitted).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from functools import cached_property
from typing import Any

from airflow_provider_dispatch.dispatch.blocking import RemainingPod
from airflow_provider_dispatch.dispatch.errors import InvalidNameError, NotManagedError
from airflow_provider_dispatch.dispatch.evidence import HoldEvidence, hold_not_observed
from airflow_provider_dispatch.dispatch.explain import (
    accepted_risks_line,
    admission_check_line,
    remaining_detail,
    urgent,
)
from airflow_provider_dispatch.dispatch.fencing import ExecutionPods, blocking_pods
from airflow_provider_dispatch.dispatch.nodes import NodeLookup
from airflow_provider_dispatch.dispatch.payloads import (
    DETAIL_LIMIT,
    REPORT_LIMIT,
    bounded_report_dict,
    remaining_fingerprint,
)
from airflow_provider_dispatch.dispatch.selection import Selection
from airflow_provider_dispatch.dispatch.validation import (
    Ref,
    parse_admission_number,
    validate_job_id,
    validate_submission,
)
from airflow_provider_dispatch.dispatch.vocabulary import (
    ANNOTATION_ACCEPTED_RISKS,
    ANNOTATION_ADMISSION,
    CONDITION_COMPLETE,
    CONDITION_FAILED,
    LABEL_JOB_ID,
    LABEL_KUEUE_QUEUE_NAME,
    LABEL_SUBMISSION,
    annotations_of,
    condition,
    labels_of,
    name_of,
    namespace_of,
    object_list,
)
from airflow_provider_dispatch.dispatch.vocabulary import field as field_of


class Mode(StrEnum):
    PLAIN = "plain"
    KUEUE = "kueue"


class State(StrEnum):
    HELD = "held"
    WAITING = "waiting"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


class Released(StrEnum):
    """What a release (or an open) did, as its program found it: what the operator's log says (issue 25)."""

    #: this call's conditional write admitted the execution
    ADMITTED = "admitted"
    #: the TrainJob was not held: it runs the execution returned, and nothing was written
    ALREADY_RUNNING = "already running"
    #: the admitting write met a conflict and the TrainJob runs now: an admission happened, this very write's
    #: (re-sent after its answer was lost) or another caller's; nothing more was written
    RUNNING_AFTER_CONFLICT = "running after a conflict"
    #: Kueue mode: the Workload was made active; Kueue admits the next execution
    WORKLOAD_ACTIVE = "workload active"
    #: not said (a hold, the admission check's write, an execution read off the TrainJob)
    UNSAID = ""


@dataclass(frozen=True)
class Execution:
    """The execution identity (job id, submission, A) (DESIGN §2). A 0 means never admitted by dispatch.

    `accepted_risks` are the runtime risks (policy.py) a platform team accepted for this execution, and `released`
    what the release that returned it did: neither is part of the identity (nor of `as_dict`), carried so that
    every caller can log them."""

    job_id: str
    submission: str
    admission: int
    accepted_risks: tuple[str, ...] = field(default=(), compare=False)
    released: Released = field(default=Released.UNSAID, compare=False)

    def as_dict(self) -> dict[str, Any]:
        body: dict[str, Any] = {"job_id": self.job_id, "submission": self.submission, "admission": self.admission}
        if self.accepted_risks:
            body["accepted_risks"] = list(self.accepted_risks)
        return body


@dataclass(frozen=True)
class ManagedObject:
    """What dispatch reads off a TrainJob it manages."""

    ref: Ref
    job_id: str
    submission: str
    admission: int
    mode: Mode
    uid: str | None
    resource_version: str | None
    accepted_risks: tuple[str, ...] = ()

    @property
    def execution(self) -> Execution:
        return Execution(self.job_id, self.submission, self.admission, self.accepted_risks)

    @property
    def selection(self) -> Selection:
        return Selection(self.ref.namespace, self.ref.name, self.job_id, self.submission)


def managed(trainjob: Mapping[str, Any]) -> ManagedObject:
    """The object as dispatch manages it, or NotManagedError saying which label or annotation is wrong."""
    ref = Ref(namespace_of(trainjob), name_of(trainjob))
    text = str(ref)
    found = labels_of(trainjob)
    for key in (LABEL_JOB_ID, LABEL_SUBMISSION):
        if key not in found:
            raise NotManagedError(
                f"TrainJob {text} is not managed by dispatch: it lacks the label {key}. Open it through "
                f"dispatch, or add the labels {LABEL_JOB_ID} and {LABEL_SUBMISSION}.",
                ref=text,
            )
    try:
        job_id = validate_job_id(found[LABEL_JOB_ID], ref=text)
        submission = validate_submission(found[LABEL_SUBMISSION], ref=text)
        raw = annotations_of(trainjob).get(ANNOTATION_ADMISSION)
        admission = 0 if raw is None else parse_admission_number(raw, ref=text)
    except InvalidNameError as error:
        raise NotManagedError(
            f"TrainJob {text} is not managed by dispatch: {error.message}. Fix the label or annotation.",
            ref=text,
        ) from error
    uid = field_of(trainjob, "metadata", "uid")
    rv = field_of(trainjob, "metadata", "resourceVersion")
    risks = annotations_of(trainjob).get(ANNOTATION_ACCEPTED_RISKS, "")
    return ManagedObject(
        ref=ref,
        job_id=job_id,
        submission=submission,
        admission=admission,
        mode=Mode.KUEUE if LABEL_KUEUE_QUEUE_NAME in found else Mode.PLAIN,
        uid=uid if isinstance(uid, str) else None,
        resource_version=rv if isinstance(rv, str) else None,
        accepted_risks=tuple(risk for risk in risks.split(",") if risk),
    )


def is_held(trainjob: Mapping[str, Any]) -> bool:
    """`spec.suspend` is true (plain mode: dispatch's hold; Kueue mode: Kueue's)."""
    return field_of(trainjob, "spec", "suspend") is True


def hold_observed(trainjob: Mapping[str, Any], evidence: HoldEvidence) -> bool:
    """The hold of the current execution is observed and settled (evidence.py)."""
    return hold_not_observed(trainjob, evidence, managed(trainjob).admission) is None


def finished(trainjob: Mapping[str, Any]) -> tuple[State, Mapping[str, Any]] | None:
    """`succeeded`/`failed` with the condition that says so, or None while the TrainJob has not finished."""
    for condition_type, state in ((CONDITION_COMPLETE, State.SUCCEEDED), (CONDITION_FAILED, State.FAILED)):
        entry = condition(trainjob, condition_type)
        if entry is not None and entry.get("status") == "True":
            return state, entry
    return None


@dataclass(frozen=True)
class AdmissionCheckState:
    """One entry of a Workload's `status.admissionChecks` (k8s-apis §4.2)."""

    name: str
    state: str
    message: str

    @property
    def line(self) -> str:
        return admission_check_line(self.name, self.state, self.message)

    def as_dict(self) -> dict[str, str]:
        return {"name": self.name, "state": self.state, "message": self.message}


def admission_checks(workload: Mapping[str, Any] | None) -> tuple[AdmissionCheckState, ...]:
    return tuple(
        AdmissionCheckState(str(c.get("name", "")), str(c.get("state", "")), str(c.get("message", "")))
        for c in object_list(workload, "status", "admissionChecks")
    )


@dataclass(frozen=True)
class Status:
    """What inspect and find return (DESIGN §7)."""

    ref: str
    state: State
    mode: Mode
    execution: Execution
    cause: str
    detail: str
    remaining: tuple[RemainingPod, ...]
    drained: bool
    ceased: bool
    hold_observed: bool
    admission_checks: tuple[AdmissionCheckState, ...] = ()
    resource_version: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "ref": self.ref,
            "state": self.state.value,
            "mode": self.mode.value,
            "execution": self.execution.as_dict(),
            "cause": self.cause,
            "detail": self.detail,
            "remaining": [pod.as_dict() for pod in self.remaining],
            "drained": self.drained,
            "ceased": self.ceased,
            "hold_observed": self.hold_observed,
            "admission_checks": [check.as_dict() for check in self.admission_checks],
            "resource_version": self.resource_version,
        }


def _kueue_cause(workload: Mapping[str, Any] | None, checks: tuple[AdmissionCheckState, ...]) -> str:
    if workload is None:
        return "waiting for Kueue: no Workload yet"
    if field_of(workload, "spec", "active") is False:
        return "held: Workload deactivated"
    pending = [c for c in checks if c.state != "Ready"]
    if pending:
        return f"waiting for admission check {pending[0].name} ({pending[0].state})"
    return "waiting for Kueue admission"


def assess(
    trainjob: Mapping[str, Any],
    evidence: HoldEvidence,
    pods: Iterable[Mapping[str, Any]],
    nodes: Mapping[str, NodeLookup],
    *,
    lookups: Mapping[str, Mapping[str, Any] | None] | None = None,
    workload: Mapping[str, Any] | None = None,
    now: datetime | None = None,
) -> Status:
    """The status of one managed TrainJob, from one consistent read of its pods and the blocking pods' nodes.

    `evidence` is what judging the hold needs (evidence.py), the hold's record of the execution's pods
    (fencing.py) among it; `pods` may be the namespace's pods or already selected ones (selection is applied
    again); `nodes` maps node names to Node objects or `NodeRead.GONE` / `NodeRead.NOT_READABLE` (a node not in
    it is unknown: not ceased); `lookups` are the recorded pods the labels missed, looked up by name
    (`programs.drain`).
    """
    obj = managed(trainjob)
    remaining = blocking_pods(obj.selection.select(pods), nodes, evidence.record, obj.ref.namespace, lookups)
    drained = not remaining
    ceased = all(pod.ceased for pod in remaining)
    not_observed = hold_not_observed(trainjob, evidence, obj.admission)
    checks = admission_checks(workload) if obj.mode is Mode.KUEUE else ()
    lines: list[str] = []

    done = finished(trainjob)
    if done is not None:
        state, entry = done
        reason = str(entry.get("reason", "")) or "no reason given"
        cause = f"{entry.get('type')}: {reason}"
        if entry.get("message"):
            lines.append(str(entry.get("message")))
    elif not is_held(trainjob):
        state = State.RUNNING
        cause = f"execution {obj.admission} admitted" + (" by Kueue" if obj.mode is Mode.KUEUE else "")
        lines.append(
            f"TrainJob {obj.ref} runs execution {obj.admission} of job id {obj.job_id}, submission "
            f"{obj.submission}; {len(remaining)} of its pods are not finished"
        )
    elif not_observed is None and drained:
        state = State.HELD
        cause = _kueue_cause(workload, checks) if obj.mode is Mode.KUEUE else "held"
        lines.append(f"no pod of TrainJob {obj.ref} remains")
    else:
        state = State.WAITING
        cause = "pods remain" if remaining else "suspension not yet observed"
        if not_observed is not None:
            lines.append(not_observed)

    if state is not State.RUNNING:
        if remaining:
            first, how = urgent(remaining)  # first what to do, as every wait reason (dispatch.reasons)
            lines += [first, *how, remaining_detail(remaining, now=now)]
        lines.extend(check.line for check in checks)
    if obj.accepted_risks:
        lines.append(accepted_risks_line(obj.accepted_risks))

    return Status(
        ref=str(obj.ref),
        state=state,
        mode=obj.mode,
        execution=obj.execution,
        cause=cause,
        detail="\n".join(lines),
        remaining=remaining,
        drained=drained,
        ceased=ceased,
        hold_observed=not_observed is None,
        admission_checks=checks,
        resource_version=obj.resource_version,
    )


@dataclass(frozen=True)
class DrainReport:
    """The remaining pods of an object and whether they ceased: what the sensor, trigger and `ceased` need.

    `remaining` holds every remaining pod (the decisions need them all); `detail` is the explanation as payloads
    carry it, at most `payloads.DETAIL_LIMIT` characters. `resource_version` is the pod list's: a dedupe key for
    events built from this report (anchors §8.8).
    """

    ref: str
    remaining: tuple[RemainingPod, ...]
    resource_version: str
    detail: str
    #: the wait reason's first line, what to do about the most urgent node (or what is awaited) and its subject,
    #: and the lines below it: the command, the permission it needs, the runbook section (`explain.urgent`)
    headline: str = ""
    how: tuple[str, ...] = ()

    @property
    def drained(self) -> bool:
        return not self.remaining

    @property
    def ceased(self) -> bool:
        return all(pod.ceased for pod in self.remaining)

    @cached_property
    def fingerprint(self) -> str:
        """The remaining set in 64 characters (`payloads.fingerprint`): what a change of counts as progress."""
        return remaining_fingerprint(self.remaining)

    def as_dict(self, limit: int = REPORT_LIMIT) -> dict[str, Any]:
        """The report as JSON, within `limit` characters: `remaining` holds the first pods by name that fit,
        `remaining_count`, `node_count` and `node_states` (every distinct node state) describe them all, and
        `fingerprint` tells two sets apart (`payloads.bounded_report_dict`)."""
        base = {
            "ref": self.ref,
            "drained": self.drained,
            "ceased": self.ceased,
            "resource_version": self.resource_version,
            "detail": self.detail,
            "headline": self.headline,
            "how": list(self.how),
        }
        return bounded_report_dict(base, self.remaining, limit)


def drain_report(
    ref: str,
    selection: Selection,
    pods: Iterable[Mapping[str, Any]],
    nodes: Mapping[str, NodeLookup],
    resource_version: str,
    *,
    now: datetime | None = None,
    execution_pods: ExecutionPods | None = None,
) -> DrainReport:
    """The drain report; `execution_pods` is the hold's record of the execution (fencing.recorded)."""
    remaining = blocking_pods(selection.select(pods), nodes, execution_pods, selection.namespace)
    return remaining_report(ref, remaining, resource_version, now=now)


def remaining_report(
    ref: str, remaining: tuple[RemainingPod, ...], resource_version: str, *, now: datetime | None = None
) -> DrainReport:
    """The drain report of pods already judged (`fencing.blocking_pods`): `programs.Drain.report` has them."""
    detail = (
        remaining_detail(remaining, now=now, limit=DETAIL_LIMIT) if remaining else f"no pod of TrainJob {ref} remains"
    )
    first, how = urgent(remaining)
    return DrainReport(
        ref=ref, remaining=remaining, resource_version=resource_version, detail=detail, headline=first, how=how
    )

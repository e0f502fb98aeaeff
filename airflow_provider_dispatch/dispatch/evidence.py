"""Whether the hold of the current execution is observed by every controller that could still create its pods.

The drain check's pod list proves that no pod exists. It proves that none will appear only once every controller
between the TrainJob and its pods acts on the hold, and once no write a controller started from an older view
can still land (DESIGN §3.1, §3.5). Evidence counts only when it is about the *current* execution A: a
`Suspended` condition or a suspended JobSet left over from an earlier hold proves nothing (the ABA of the promise
issue). So the hold of execution A is observed when all of this holds:

1. **TrainJob**: `spec.suspend: true` and its `Suspended` condition True (Trainer saw a hold).
2. **Trainer applied this execution's hold to the JobSet.** The JobSet named after the TrainJob exists, has
   `spec.suspend: true`, and its pod templates carry the admission label the TrainJob's runtime patches put now
   (A for dispatch's patch). Its owner is not compared: a JobSet a deleted namesake left passes only in a
   state the checks here already make safe (docs/reliability.md, "Checks that looked redundant"); the
   explanation names it. Trainer applies the JobSet from one TrainJob state at a time, and applies it while the
   TrainJob is suspended (`kubeflow/trainer` `trainjob_controller.go` `reconcileObjects`, v2.3.0), so a suspended JobSet
   carrying A's labels was applied from a state after A's hold: a JobSet still carrying A-1's labels was
   suspended by an earlier hold, and Trainer may still be about to act on A's release. While A = 0 (never
   admitted) there is nothing to compare, and a JobSet that does not exist yet is awaited only when A > 0.
3. **Every Job, read itself**, exists (a Job a restart has not recreated yet may be created unsuspended by a
   write in flight), is controlled by this JobSet, and is `spec.suspend: true` or finished: `spec.suspend` on
   the JobSet is what Trainer wrote, not what the Jobs did. The Jobs are every one the JobSet's spec implies
   (`expected_job_names`), read with a quorum read. (The JobSet's own count of them, `status.replicatedJobsStatus[]`
   `suspended + succeeded + failed`, is JobSet's cached view of these same Job fields, so it can only lag what
   this reads: it is not consulted; docs/reliability.md, the mutation gate.)
4. **No write from before the hold can still land** (a pod creation the Job controller started before it saw
   the suspension, JobSet resuming or creating a Job, Trainer applying the JobSet). The API server abandons a
   request after its request timeout (`kube-apiserver --request-timeout`, 60 s by default; admission webhooks
   run inside it), so a write a controller started before it saw the hold lands within that time of the hold
   reaching it, or never. dispatch records the hold (fencing.py) with the API server's time, and waits until
   the hold is `settle_seconds` old (90 s by default: the 60 s timeout plus 30 s for the controllers to see the
   hold), plus `clock_skew_seconds` (nodes.py `DEFAULT_CLOCK_SKEW_SECONDS`, 5 s): the record's time and the
   check's now are two answers of the API server, which behind a load balancer may come from two replicas whose
   clocks differ, and the wait assumes they differ by at most that bound (`HoldEvidence.wait_seconds`; the
   shortcut below compares two such times too). The hold reaches the controllers in a chain (Trainer suspends the
   JobSet, JobSet suspends the Jobs),
   and a link can be late (Trainer's apply answered 504 and retried): JobSet sees the hold only once its JobSet
   is suspended, and may resume a Job from its older view until then. So the wait counts from the latest change
   of the JobSet's or a Job's spec, when that is later than the record: the newest `time` of their managedFields
   entries outside `/status`, which the API server writes (`spec_changed_at`). A change there for another reason
   only makes the wait longer.
   One exception needs no wait: when dispatch itself started the execution (its admitting write) at least
   `settle_seconds` before the hold, and every Job shows that each controller's writes for this execution
   landed before the controller acted on the hold. That is, every Job is finished, or:
   - JobSet resumed it for this execution (its pod template carries this execution's admission label, which
     JobSet's `resumeJob` merges in with `spec.suspend: false` in one write) and has suspended it since. JobSet
     reconciles one JobSet at a time (`workqueue`: a key being processed is not handed out again), so a resume
     still in flight would have kept it from writing the suspension;
   - and the Job controller acted on the hold after it recorded the start: its `status.startTime` is set (JobSet
     clears it when it resumes a Job, the Job controller sets it when it acts on the resume), and its `Suspended`
     condition is True, which the Job controller writes only in a later sync (`job_controller.go` `syncJob`; a
     sync starts only after the previous one returned, so a creation of an earlier sync has landed or failed).
   The time since the start alone proves nothing: a controller whose writes keep failing (API Priority and
   Fairness queueing them to 504, a webhook down) retries them from its view for as long as that view shows the
   execution running, so a JobSet resume built before the hold may land after it however old the start is. A
   Job still suspended from before this execution, with an earlier execution's label, is such a case: the settle
   applies. A never-admitted object (A = 0) has no writes of its own in flight; its predecessor's are 5.
5. **A namesake waits for what its predecessor left.** A TrainJob deleted while its pods ran leaves its JobSet
   and Jobs to the garbage collector, which may be slow; a Job still there may replace a pod of its rank beside
   the namesake's, whatever the namesake's JobSet shows, and a namesake may have no JobSet yet while Trainer
   already reports it `Suspended` (its apply failed). So every check lists the Jobs labelled with the JobSet name
   (`predecessor_jobs`): one that the JobSet named after the TrainJob does not control, and that has not finished,
   keeps the hold unobserved, at any A. The JobSet itself is judged by 2 and 3 whoever owns it (a JobSet a
   namesake left passes only in a state they make safe: its Jobs are then its own, and read there). Then its
   controllers may still have a write in flight: a never-admitted object whose record says a predecessor left pods
   or Jobs (`ExecutionPods.leftovers`, set by the open's read and by any check that finds such a Job) settles from
   the first writer's check that found none of those Jobs left (`cleared`; the open's time when its read found
   pods but no Job). A namesake whose open found nothing of its predecessor cannot tell it from a name never used,
   and does not settle (docs/reliability.md, what stays outside the promise).

What stays outside: a controller whose view lags the hold by more than 30 s and then starts a write (the bound
assumes controllers see an update within that time), API server replicas whose clocks differ by more than
`clock_skew_seconds`, and a write the API server finishes after it answered
504 (its handler context is cancelled, so the storage write is abandoned unless it was already sent to etcd).
Trainer is the exception to the first: an apply it built from an older TrainJob state, however late it is sent
(its process paused), lands before Trainer applies the hold of this execution, since Trainer reconciles one
TrainJob at a time, and 2 waits for that.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Final

from airflow_provider_dispatch.dispatch.fencing import ExecutionPods
from airflow_provider_dispatch.dispatch.nodes import DEFAULT_CLOCK_SKEW_SECONDS
from airflow_provider_dispatch.dispatch.selection import jobset_job_names
from airflow_provider_dispatch.dispatch.vocabulary import (
    CONDITION_SUSPENDED,
    POD_LABEL_ADMISSION,
    condition_is_true,
    controller_uid,
    name_of,
    namespace_of,
    object_list,
    parse_time,
    string_map,
    uid_of,
)
from airflow_provider_dispatch.dispatch.vocabulary import (
    field as field_of,
)

#: the API server's default request timeout (60 s) plus 30 s for controllers to see the hold (module docstring)
DEFAULT_SETTLE_SECONDS: Final = 90.0


@dataclass(frozen=True)
class HoldEvidence:
    """What a check read to judge the hold: the JobSet and its Jobs, the record, and the API server's time.

    `jobs` maps each Job name the JobSet's spec implies (`expected_job_names`) to the Job, or None when it does
    not exist. `server_now` is the API server's clock (the `Date` of an answer), None when unknown.
    """

    @property
    def wait_seconds(self) -> float:
        """What the settle waits: `settle_seconds` plus the clock skew bound (module docstring, 4)."""
        return self.settle_seconds + self.clock_skew_seconds

    jobset: Mapping[str, Any] | None
    jobs: Mapping[str, Mapping[str, Any] | None] = field(default_factory=dict)
    record: ExecutionPods | None = None
    server_now: datetime | None = None
    settle_seconds: float = DEFAULT_SETTLE_SECONDS
    #: the Jobs a deleted TrainJob of the same name left that may still create pods (`predecessor_jobs`)
    predecessors: tuple[str, ...] = ()
    #: the bound on the skew between API server replicas' clocks (nodes.py `DEFAULT_CLOCK_SKEW_SECONDS`)
    clock_skew_seconds: float = DEFAULT_CLOCK_SKEW_SECONDS


def expected_job_names(jobset: Mapping[str, Any] | None) -> tuple[str, ...]:
    """The child Job names the JobSet's spec implies (`selection.jobset_job_names`)."""
    if jobset is None:
        return ()
    return jobset_job_names(name_of(jobset), object_list(jobset, "spec", "replicatedJobs"))


def _admission_label_patched(trainjob: Mapping[str, Any], replicated_job: str) -> str | None:
    """The admission pod label the TrainJob's runtime patches put on a replicated job (later patches win)."""
    value: str | None = None
    for patch in object_list(trainjob, "spec", "runtimePatches"):
        for job in object_list(patch, "trainingRuntimeSpec", "template", "spec", "replicatedJobs"):
            if job.get("name") != replicated_job:
                continue
            labels = string_map(job, "template", "spec", "template", "metadata", "labels")
            if POD_LABEL_ADMISSION in labels:
                value = labels[POD_LABEL_ADMISSION]
    return value


def _stale_templates(trainjob: Mapping[str, Any], jobset: Mapping[str, Any]) -> list[str]:
    """Replicated jobs whose JobSet pod template carries another admission label than the TrainJob asks for."""
    stale: list[str] = []
    for job in object_list(jobset, "spec", "replicatedJobs"):
        name = str(job.get("name", ""))
        shown = string_map(job, "template", "spec", "template", "metadata", "labels").get(POD_LABEL_ADMISSION)
        wanted = _admission_label_patched(trainjob, name)
        if shown != wanted:
            stale.append(f"{name}: {shown or 'none'} instead of {wanted or 'none'}")
    return stale


def _earlier_owner(trainjob: Mapping[str, Any], jobset: Mapping[str, Any]) -> str:
    """For the explanation only: a JobSet an earlier TrainJob of this name left (its controller is another uid).

    Not a check of its own. Such a JobSet passes 2 only while it is suspended and carries the label this
    TrainJob's patches put now; then the earlier TrainJob was never admitted under that label, and its writes
    still in flight are bounded like any other: Trainer and JobSet key their work by `namespace/name`, which the
    namesake shares (docs/reliability.md, "Checks that looked redundant")."""
    owner = controller_uid(jobset)
    if owner is None or owner == uid_of(trainjob):
        return ""
    return f" (left by an earlier TrainJob of this name, owner uid {owner}, which the garbage collector deletes)"


def job_finished(job: Mapping[str, Any]) -> bool:
    return condition_is_true(job, "Complete") or condition_is_true(job, "Failed")


def _job_problem(name: str, job: Mapping[str, Any] | None, jobset_uid: str | None) -> str | None:
    if job is None:
        return f"Job {name} does not exist (yet): JobSet may still be creating it, so it may still create pods"
    owner = controller_uid(job)
    if jobset_uid is not None and owner != jobset_uid:
        return f"Job {name} belongs to an earlier JobSet (it is being deleted): wait until it is gone"
    if job_finished(job):
        return None
    if field_of(job, "spec", "suspend") is not True:
        return f"Job {name} is not suspended yet: it may still create pods"
    return None


def resumed_for(job: Mapping[str, Any], admission: int) -> bool:
    """JobSet merged this execution's pod labels into the Job: it resumed the Job for execution `admission`
    (JobSet's `resumeJob` merges the JobSet's pod template labels into the Job's only when it resumes it)."""
    labels = string_map(job, "spec", "template", "metadata", "labels")
    return labels.get(POD_LABEL_ADMISSION) == str(admission)


def job_controller_acted(job: Mapping[str, Any]) -> bool:
    """The Job controller recorded the Job's last start (`startTime`) and then its suspension (module doc)."""
    return field_of(job, "status", "startTime") is not None and condition_is_true(job, CONDITION_SUSPENDED)


def spec_changed_at(obj: Mapping[str, Any] | None) -> datetime | None:
    """When the object's spec or metadata last changed, on the API server's clock: the newest `time` of its
    managedFields entries outside `/status` (the API server sets an entry's time at each write of its manager
    that changed a field: `managedfieldsupdater.go`). None when no entry has a time."""
    if obj is None:
        return None
    newest: datetime | None = None
    for entry in object_list(obj, "metadata", "managedFields"):
        if entry.get("subresource") == "status":
            continue
        at = parse_time(entry.get("time"))
        if at is None:
            continue
        if newest is None or at > newest:
            newest = at
    return newest


def hold_reached(evidence: HoldEvidence) -> datetime | None:
    """The latest time the JobSet's or a Job's spec changed (`spec_changed_at`): no sooner than when the hold
    reached the last of them, so the controllers that act on them saw it no sooner either (module docstring, 4)."""
    times = [spec_changed_at(evidence.jobset), *(spec_changed_at(job) for job in evidence.jobs.values())]
    known = [at for at in times if at is not None]
    return max(known) if known else None


def settles_at(record: ExecutionPods | None, wait_seconds: float, reached: datetime | None = None) -> datetime | None:
    """When the recorded hold is old enough that no write from before it can land (module docstring, 4):
    `wait_seconds` (the settle plus the clock skew bound) after the record, or after the hold `reached` the JobSet
    and the Jobs when that was later; for a namesake (A = 0), after its predecessor's last Job was found gone."""
    if record is None:
        return None
    if record.admission == 0:
        return None if record.cleared is None else record.cleared + timedelta(seconds=wait_seconds)
    if record.since is None:
        return None
    start = record.since if reached is None or reached <= record.since else reached
    return start + timedelta(seconds=wait_seconds)


def _shortcut(record: ExecutionPods, evidence: HoldEvidence, admission: int) -> bool:
    """dispatch started this execution long before the hold, and every Job is finished or shows that JobSet
    resumed it for this execution and the Job controller acted on the hold (module docstring, 4)."""
    if record.started is None or record.since is None:
        return False
    if (record.since - record.started).total_seconds() < evidence.wait_seconds:
        return False
    return all(_acted_on_the_hold(job, admission) for job in evidence.jobs.values())


def _acted_on_the_hold(job: Mapping[str, Any] | None, admission: int) -> bool:
    if job is None:
        return False
    if job_finished(job):
        return True
    return resumed_for(job, admission) and job_controller_acted(job)


@dataclass(frozen=True)
class NotObserved:
    """Why the hold is not observed yet; `seconds_left` is set when only the settle is missing (module
    docstring, 4): how long, on the API server's clock, until it has settled."""

    reason: str
    seconds_left: float | None = None


def hold_not_observed(trainjob: Mapping[str, Any], evidence: HoldEvidence, admission: int) -> str | None:
    """Why the hold of execution `admission` is not observed yet, or None when it is (module docstring)."""
    verdict = judge_hold(trainjob, evidence, admission)
    return None if verdict is None else verdict.reason


def judge_hold(trainjob: Mapping[str, Any], evidence: HoldEvidence, admission: int) -> NotObserved | None:
    """`hold_not_observed`, with how long the settle has left when that is all that is missing."""
    reason = _not_observed(trainjob, evidence, admission)
    if reason is not None:
        return NotObserved(reason)
    return _settling(trainjob, evidence, admission)


def _settling(trainjob: Mapping[str, Any], evidence: HoldEvidence, admission: int) -> NotObserved | None:
    ref = f"{namespace_of(trainjob)}/{name_of(trainjob)}"
    record = evidence.record
    if admission == 0:
        return _namesake_settling(ref, evidence)
    if record is None or _shortcut(record, evidence, admission):
        return None
    reached = hold_reached(evidence)
    until = settles_at(record, evidence.wait_seconds, reached)
    now = evidence.server_now
    if until is None or (now is not None and now >= until):
        return None
    left = evidence.wait_seconds if now is None else (until - now).total_seconds()
    late = ""
    if reached is not None and record.since is not None and reached > record.since:
        late = (
            f", counted from {reached.strftime('%Y-%m-%dT%H:%M:%SZ')}, when its JobSet or a Job last changed, "
            "later than the hold was recorded: a controller acting on them may have seen the hold only then"
        )
    return NotObserved(
        f"the hold of TrainJob {ref} settles until {until.strftime('%Y-%m-%dT%H:%M:%SZ')} ({left:.0f} s more{late}): "
        "a pod creation or another write a controller started before it saw the hold may still land until then "
        "(the API server's request timeout plus the time controllers take to see the hold, "
        f"{evidence.settle_seconds:g} s, plus {evidence.clock_skew_seconds:g} s for the API servers' clocks)",
        seconds_left=left,
    )


def _namesake_settling(ref: str, evidence: HoldEvidence) -> NotObserved | None:
    """A never-admitted object whose record found something a deleted TrainJob of its name left: its
    predecessor's controllers may still have a write in flight until the settle has passed since its last Job was
    found gone (module docstring, 5)."""
    record = evidence.record
    if record is None or not record.leftovers:
        return None
    until = settles_at(record, evidence.wait_seconds)
    now = evidence.server_now
    if until is not None and now is not None and now >= until:
        return None
    if until is None:
        return NotObserved(
            f"TrainJob {ref} was opened after a TrainJob of the same name that left pods or Jobs, and none of its "
            "Jobs is left now: a writer's check (release, or the admission check) starts the settle of "
            f"{evidence.wait_seconds:g} s from now, since that TrainJob's controllers may still have a write in flight",
            seconds_left=evidence.wait_seconds,
        )
    left = evidence.wait_seconds if now is None else (until - now).total_seconds()
    return NotObserved(
        f"TrainJob {ref} was opened after a TrainJob of the same name that left pods or Jobs: it settles until "
        f"{until.strftime('%Y-%m-%dT%H:%M:%SZ')} ({left:.0f} s more), {evidence.wait_seconds:g} s after its last Job "
        "was found gone, since a pod creation or another write of that TrainJob's controllers may still land until "
        "then",
        seconds_left=left,
    )


def predecessor_jobs(jobset: Mapping[str, Any] | None, labelled: Iterable[Mapping[str, Any]]) -> tuple[str, ...]:
    """The Jobs labelled with the TrainJob's JobSet name that the JobSet named after it (if any) does not control
    and that have not finished: a deleted TrainJob of the same name left them, and they may still create pods
    (module docstring, 5). Described for the explanation, in name order."""
    owner = uid_of(jobset) if jobset is not None else None
    found = []
    for job in labelled:
        if owner is not None and controller_uid(job) == owner:
            continue
        if job_finished(job):
            continue
        parent = controller_uid(job)
        suffix = "" if field_of(job, "metadata", "deletionTimestamp") is None else ", being deleted"
        found.append(f"Job {name_of(job)} (controller {parent or 'none'}{suffix})")
    return tuple(sorted(found))


def _not_observed(trainjob: Mapping[str, Any], evidence: HoldEvidence, admission: int) -> str | None:
    ref = f"{namespace_of(trainjob)}/{name_of(trainjob)}"
    if field_of(trainjob, "spec", "suspend") is not True:
        return f"TrainJob {ref} is not held (spec.suspend is not true)"
    if not condition_is_true(trainjob, CONDITION_SUSPENDED):
        return (
            f"TrainJob {ref} is held but its Suspended condition is not True yet: Trainer has not observed "
            "the hold, so Jobs may still create pods; retry shortly"
        )
    if evidence.predecessors:
        return (
            f"Wait until the garbage collector deletes {', '.join(evidence.predecessors)}, or delete it "
            "(docs/runbook.md#predecessor-jobs): it was left by a deleted TrainJob of the same name, has not "
            f"finished, and may still create pods beside TrainJob {ref}'s; retry shortly"
        )
    jobset = evidence.jobset
    if jobset is None:
        if admission > 0:
            return (
                f"JobSet {ref} does not exist: Trainer has not created the JobSet of the held TrainJob yet, and "
                "until it has, it may still act on an older state of it; retry shortly"
            )
        return None
    earlier = _earlier_owner(trainjob, jobset)
    if field_of(jobset, "spec", "suspend") is not True:
        return (
            f"JobSet {ref}{earlier} does not have spec.suspend true yet: the hold has not reached it, so its Jobs "
            "may still create pods; retry shortly"
        )
    stale = _stale_templates(trainjob, jobset)
    if stale:
        return (
            f"JobSet {ref}{earlier} is suspended but its pod templates still carry another execution's admission "
            f"label ({'; '.join(stale)}): the suspension is left over from an earlier hold and Trainer has not "
            f"applied this execution's yet (it may still act on the release before it); retry shortly"
        )
    jobset_uid = uid_of(jobset)
    for name, job in evidence.jobs.items():
        problem = _job_problem(name, job, jobset_uid)
        if problem is not None:
            return f"TrainJob {ref}: {problem}; retry shortly"
    if admission > 0 and evidence.record is None:
        return (
            f"TrainJob {ref} is held without dispatch's record of execution {admission}'s pods: a writer "
            "(release, hold, or the admission check) records them first"
        )
    return None


__all__ = [
    "DEFAULT_SETTLE_SECONDS",
    "HoldEvidence",
    "NotObserved",
    "expected_job_names",
    "hold_not_observed",
    "hold_reached",
    "job_controller_acted",
    "job_finished",
    "judge_hold",
    "predecessor_jobs",
    "resumed_for",
    "settles_at",
    "spec_changed_at",
]

"""What one run of the drain check means for our check entry, and when to look again. Pure.

The rule itself is not here: `programs.kueue_admit` runs it (DESIGN §3, §6) and either raises A or raises one of
dispatch's errors. This module only turns that result into the entry Kueue reads:

* A raised, or already raised for this admission: **Ready**, saying which execution was admitted; done.
* `PodsRemainError`: **Pending**, with a message that reads as every wait reason (`dispatch.reasons`: what to do
  about the most urgent node first, its command, permission and runbook section, then `pods of the previous
  execution remain: <pod> on <node> (<node state>), ...`), at most `payloads.KUEUE_MESSAGE_LIMIT` characters (the
  first pods by name, then the census of every node state); looked at again after a backoff, and at once when a
  pod or node of the object changes.
* `HoldSettlingError` (the hold is observed, but a write a controller started before Kueue suspended the
  TrainJob may still land, evidence.py): **Pending**, saying until when; looked at again once it has settled.
* any other `UnreachableError` (API unreachable, 5xx, 429, 409, suspension not yet observed): nothing is
  written; retried after a backoff.
* `RefusedError` (forbidden, not found, invalid name, spec rejected, not managed): **Pending**, `dispatch cannot
  admit TrainJob <ns/name>: <why>`; looked at again after a longer backoff, and at every resync.
* the owner is not a TrainJob, or a TrainJob without any dispatch key: **Ready**, saying why dispatch does not
  hold it; done.

Decisions, with the reasons:

* A refusal leaves the check **Pending**, never Rejected. Rejected makes Kueue deactivate the Workload
  (`spec.active: false` through `DeactivationTarget`) and release its quota; it does not come back until a
  person reactivates it (k8s-apis.md §4.5). Most refusals are a person's to fix and then pass: a 403 while RBAC
  is rolled out, a runtime not yet created, a label typo. Deactivating would turn each into a hold of its own that
  nobody asked for, and would make the controller write beyond its own check entry's consequences. Pending keeps
  the Workload queued, says why in the place `dispatch status` and `kubectl describe workload` show, and admits
  it as soon as the cause is fixed. The cost is the quota it holds meanwhile, which is the same cost DESIGN §6
  accepts for remaining pods.
* A transient failure writes nothing: the entry keeps what the last completed check found, which is still the
  best statement of why the Workload waits, and a write to an API that is failing would mostly fail too.
* A Workload whose owner is **not a dispatch object** gets **Ready**, with a message that says so. dispatch's
  promise is about executions, and an execution is identified by (job id, submission, A): a TrainJob without
  the dispatch labels has no execution identity, carries no dispatch runtime patch to put A on its pods, and
  cannot be released or held by dispatch. Leaving it Pending would hold its quota for ever and keep it from
  running in any ClusterQueue that requires the check for every Workload (an empty `onFlavors`); Rejected would
  deactivate it. Ready leaves it exactly as Kueue would without the check. The same holds for a Workload owned
  by something other than a TrainJob (a batch Job in the same ClusterQueue). A TrainJob that carries *any*
  dispatch key (job-id, submission, the admission annotations) but fails `managed()` is a dispatch object with
  a broken label: that is a refusal, it stays Pending.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from airflow_provider_dispatch.dispatch import vocabulary as v
from airflow_provider_dispatch.dispatch.assessment import Execution
from airflow_provider_dispatch.dispatch.blocking import RemainingPod
from airflow_provider_dispatch.dispatch.errors import (
    HoldSettlingError,
    PodsRemainError,
    RefusedError,
    UnreachableError,
)
from airflow_provider_dispatch.dispatch.explain import kueue_waiting_message
from airflow_provider_dispatch.kueue.workloads import PENDING, READY, Owner

#: what marks a TrainJob as a dispatch object at all (DESIGN §2)
DISPATCH_KEYS = (v.LABEL_JOB_ID, v.LABEL_SUBMISSION)
DISPATCH_ANNOTATIONS = (v.ANNOTATION_ADMISSION, v.ANNOTATION_ADMISSION_KEY)


class Retry(StrEnum):
    """When to reconcile the Workload again."""

    NONE = "none"
    WAITING = "waiting"
    SETTLING = "settling"
    TRANSIENT = "transient"
    REFUSED = "refused"


@dataclass(frozen=True)
class Verdict:
    """The entry to write (`state` None: write nothing) and when to look again."""

    state: str | None
    message: str
    retry: Retry
    execution: Execution | None = None
    remaining: tuple[RemainingPod, ...] = ()
    #: look again after exactly this many seconds (the settle's remaining time), instead of a backoff
    after: float | None = None


def claims_dispatch(labels: Iterable[str], annotations: Iterable[str]) -> bool:
    """Any dispatch key on the TrainJob: it is meant to be a dispatch object, valid or not."""
    return any(k in DISPATCH_KEYS for k in labels) or any(k in DISPATCH_ANNOTATIONS for k in annotations)


def admitted(ref: str, execution: Execution) -> Verdict:
    return Verdict(
        READY,
        f"no pod of the previous execution remains: TrainJob {ref} is admitted as execution {execution.admission} "
        f"(job id {execution.job_id}, submission {execution.submission})",
        Retry.NONE,
        execution=execution,
    )


def pods_remain(error: PodsRemainError) -> Verdict:
    return Verdict(PENDING, kueue_waiting_message(error.remaining), Retry.WAITING, remaining=error.remaining)


def settling(error: HoldSettlingError) -> Verdict:
    return Verdict(PENDING, error.message, Retry.SETTLING, after=error.seconds_left)


def refused(ref: str, error: RefusedError) -> Verdict:
    return Verdict(
        PENDING,
        f"dispatch cannot admit TrainJob {ref}: {error.message} The check stays Pending until this is fixed.",
        Retry.REFUSED,
    )


def transient(error: UnreachableError) -> Verdict:
    return Verdict(None, error.message, Retry.TRANSIENT)


def not_a_trainjob(owner: Owner | None) -> Verdict:
    whose = f"{owner.kind} {owner.name}" if owner is not None else "nothing (it has no controller ownerReference)"
    return Verdict(
        READY,
        f"the Workload is owned by {whose}, not by a TrainJob: dispatch's drain check applies to TrainJobs only, "
        "so this check does not hold it",
        Retry.NONE,
    )


def not_dispatch(ref: str) -> Verdict:
    return Verdict(
        READY,
        f"TrainJob {ref} is not a dispatch object (it has neither {v.LABEL_JOB_ID} nor {v.LABEL_SUBMISSION}): it "
        "has no execution identity, so dispatch's drain check does not apply and this check does not hold it",
        Retry.NONE,
    )


def owner_replaced(ref: str, expected_uid: str, found_uid: str) -> Verdict:
    return Verdict(
        PENDING,
        f"TrainJob {ref} is not the one this Workload belongs to (uid {found_uid}, the Workload's owner was "
        f"{expected_uid}): the owner was deleted and a namesake created; Kueue deletes this Workload, nothing is "
        "admitted",
        Retry.REFUSED,
    )


__all__ = [
    "DISPATCH_ANNOTATIONS",
    "DISPATCH_KEYS",
    "Retry",
    "Verdict",
    "admitted",
    "claims_dispatch",
    "not_a_trainjob",
    "not_dispatch",
    "owner_replaced",
    "pods_remain",
    "refused",
    "settling",
    "transient",
]

"""The restart chain in the cluster: which TrainJobs are one chain's, and what they say about where it stands (pure).

A new try of the chain's task (a retry, a Clear, a try Airflow failed while it ran) knows nothing of what an earlier
try did: the cluster is the chain's memory. `Chain` names the chain's TrainJobs (`<base>-<k>`, the job id label);
`chain_submission` refuses a TrainJob of its job id that is not one of them (`NotInChainError`); `from_cluster`
turns the TrainJobs `dispatch.resume.read_chain` found into the state machine's state (`dispatch.restarts`); the
`ANNOTATION_FOLLOWS` each submission after the first records (`restarts.follows_of`) keeps how the one
before it ended; `describe` says in one log line what a try found and does next. Apart from `restarts`, whose
state machine it reads into, so that each module holds one concern: the decisions there, the reading here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from airflow_provider_dispatch.dispatch import vocabulary as v
from airflow_provider_dispatch.dispatch.assessment import Mode, finished, is_held, managed
from airflow_provider_dispatch.dispatch.errors import NotInChainError, UnreachableError
from airflow_provider_dispatch.dispatch.restarts import (
    COMPLETE,
    FAILED,
    MAX_RESTARTS_LIMIT,
    RestartState,
    Stage,
    Submission,
    bounded,
    follows_of,
    start,
    submission_manifest,
    trainjob_name,
    validate_max_restarts,
)
from airflow_provider_dispatch.dispatch.validation import validate_job_id, validate_namespace


@dataclass(frozen=True)
class Chain:
    """Which TrainJobs are one chain's: those of its job id in its namespace, named `<base>-<k>`."""

    namespace: str
    base: str
    job_id: str

    def ref(self, submission: int) -> str:
        return f"{self.namespace}/{trainjob_name(self.base, submission)}"


def chain_of(manifest: Mapping[str, Any]) -> Chain:
    """The chain of a manifest (as `submission_manifest` takes it): its namespace, name and job id."""
    labels = submission_manifest(manifest, 1)["metadata"]["labels"]
    namespace = v.field(manifest, "metadata", "namespace")
    job_id = validate_job_id(labels[v.LABEL_JOB_ID])
    return Chain(validate_namespace(namespace), str(manifest["metadata"]["name"]), job_id)


#: a submission label the chain writes: 1, 2, ... without a leading zero
_SUBMISSION_NUMBER: Final = re.compile(r"[1-9][0-9]{0,2}")


def chain_submission(chain: Chain, trainjob: Mapping[str, Any]) -> int:
    """The submission number k of one of the chain's TrainJobs; `NotInChainError` for a TrainJob of its job id
    that is not a submission of this chain (another name or number, run by another manager than Trainer)."""
    name = v.name_of(trainjob)
    ref = f"{chain.namespace}/{name}"
    labels = v.labels_of(trainjob)
    raw = labels.get(v.LABEL_SUBMISSION)
    number = int(raw) if isinstance(raw, str) and _SUBMISSION_NUMBER.fullmatch(raw) else None
    ours = labels.get(v.LABEL_JOB_ID) == chain.job_id and v.namespace_of(trainjob) in ("", chain.namespace)
    if not ours or number is None or number > MAX_RESTARTS_LIMIT + 1 or name != trainjob_name(chain.base, number):
        raise NotInChainError(
            f"TrainJob {ref} carries the job id {chain.job_id} of the restart chain {chain.ref(1)}, "
            f"{chain.ref(2)}, ... but is not one of its submissions (submission label {raw!r}). The chain cannot "
            "tell its executions apart from this TrainJob's: give the chain a job id of its own (per_run=True, "
            "another metadata.name, or another job id label).",
            ref=ref,
        )
    managed_by = v.field(trainjob, "spec", "managedBy")
    if managed_by not in (None, v.TRAINER_MANAGED_BY):
        raise NotInChainError(
            f"TrainJob {ref} is run by {managed_by} (spec.managedBy), not by Trainer's own controller: its pods are "
            "not on this cluster, so dispatch cannot tell when they stopped and the chain does not go on with it.",
            ref=ref,
        )
    return number


def from_cluster(max_restarts: int, chain: Chain, trainjobs: Iterable[Mapping[str, Any]], now: float) -> RestartState:
    """The chain as the cluster shows it, for a new try that knows nothing else (pure).

    `trainjobs` are those carrying the chain's job id in its namespace (`dispatch.resume.read_chain`). None: the
    first state. Otherwise the last submission n decides the stage: `Complete` ends the chain (`succeeded`);
    `Failed` is held, drained and followed by n+1 while restarts remain (`hold`: the hold is idempotent and
    records the execution's pods if nobody did), else the chain is `exhausted`; unfinished and running (plain
    mode) is waited for (`outcome`, pinned to its current execution); unfinished and held, or under Kueue, is
    opened (`open`: the open takes the existing TrainJob and releases it, or returns it running). The restarts
    used are n - 1, whatever `max_restarts` was when they were opened. The history is read off the TrainJobs:
    their admission, outcome, when they were created and finished (the API server's times), and how each one's
    pods went as the next one recorded it (`ANNOTATION_FOLLOWS`; `drained_at` is the next one's creation). A
    submission deleted since is an entry with no outcome. A last submission being deleted is retryable."""
    limit = validate_max_restarts(max_restarts)
    found: dict[int, Mapping[str, Any]] = {}
    for trainjob in trainjobs:
        found[chain_submission(chain, trainjob)] = trainjob
    if not found:
        return start(limit, now)
    last = max(found)
    history = [_observed(k, found.get(k), found.get(k + 1)) for k in range(1, last + 1)]
    trainjob = found[last]
    if v.field(trainjob, "metadata", "deletionTimestamp") is not None:
        raise UnreachableError(
            f"TrainJob {chain.ref(last)}, the last submission of the chain, is being deleted: the chain goes on "
            "from the submission before it once it is gone; retry.",
            ref=chain.ref(last),
        )
    current = history[-1]
    if current.outcome == COMPLETE:
        stage = Stage.SUCCEEDED
    elif current.outcome == FAILED:
        stage = Stage.HOLD if last - 1 < limit else Stage.EXHAUSTED
    elif is_held(trainjob) or managed(trainjob).mode is Mode.KUEUE:
        stage = Stage.OPEN
    else:
        stage = Stage.OUTCOME
    return RestartState(limit, stage, now, tuple(history))


#: what a submission deleted from the cluster says in the history read back
DELETED_REASON: Final = "NotFound"


def _observed(submission: int, trainjob: Mapping[str, Any] | None, following: Mapping[str, Any] | None) -> Submission:
    """History entry k, read off its TrainJob (None: deleted) and the next one (how k's pods went)."""
    drained: str | None = None
    drained_at: float | None = None
    follows = follows_of(following)
    if follows is not None and follows[0] == submission:
        drained, drained_at = follows[1], _epoch(v.field(following, "metadata", "creationTimestamp"))
    if trainjob is None:
        message = "the TrainJob no longer exists: it was deleted after the chain went on"
        return Submission(submission, reason=DELETED_REASON, message=message, drained=drained, drained_at=drained_at)
    done = finished(trainjob)
    outcome, reason, message, finished_at = None, "", "", None
    if done is not None:
        outcome = COMPLETE if done[1].get("type") == v.CONDITION_COMPLETE else FAILED
        reason, message = str(done[1].get("reason") or ""), str(done[1].get("message") or "")
        finished_at = _epoch(done[1].get("lastTransitionTime"))
    return Submission(
        submission=submission,
        admission=managed(trainjob).admission,
        opened_at=_epoch(v.field(trainjob, "metadata", "creationTimestamp")),
        outcome=outcome,
        reason=bounded(reason),
        message=bounded(message),
        finished_at=finished_at,
        drained=drained,
        drained_at=drained_at,
    )


def _epoch(text: object) -> float | None:
    moment = v.parse_time(text)
    return None if moment is None else moment.timestamp()


def describe(state: RestartState, chain: Chain) -> str:
    """What a try found in the cluster and does next, in one line of the task's log."""
    current = state.current
    if current.submission == 1 and state.stage is Stage.OPEN and current.opened_at is None:
        return f"no TrainJob of job id {chain.job_id} in namespace {chain.namespace} yet: opening submission 1"
    ref = chain.ref(current.submission)
    execution = f"execution {current.admission}"
    if state.stage is Stage.SUCCEEDED:
        step = f"{ref} completed ({execution}): the chain has succeeded"
    elif state.stage is Stage.EXHAUSTED:
        step = f"{ref} failed ({execution}) and no restart is left: the chain has failed"
    elif state.stage is Stage.HOLD:
        step = f"{ref} failed ({execution}): holding it; its pods go before submission {current.submission + 1}"
    elif state.stage is Stage.OUTCOME:
        step = f"{ref} runs {execution}: waiting for its outcome"
    else:
        step = f"{ref} has not finished and is held or queued: opening it as it is"
    used = f"{state.restarts} restart{'' if state.restarts == 1 else 's'} used"
    return f"the cluster shows submissions 1 to {current.submission} ({used}); {step}"


__all__ = [
    "DELETED_REASON",
    "Chain",
    "chain_of",
    "chain_submission",
    "describe",
    "from_cluster",
]

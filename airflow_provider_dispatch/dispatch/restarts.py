"""The restart chain's decisions: what to do next given an outcome, the restart count and the stage (pure).

A chained restart (`operators.restarts.TrainJobRestartOperator`) runs submission k of a job, waits for its
outcome, and on `Failed` holds it, waits until its pods are gone or proven ceased, and opens submission k+1, up
to `max_restarts` restarts. Why a new submission and not a release of the failed TrainJob: a finished TrainJob
is finished for Trainer (its JobSet ended; unsuspending it admits nothing), so dispatch refuses to release it
(`FinishedError`). Each submission is its own TrainJob, `<name>-<k>`, labelled with the job id and submission k.

This module holds only the decisions, as a state machine with no I/O, no clock and no Airflow:

* `start(max_restarts, now)` is the first state (stage `open`, submission 1);
* `advance(state, event)` takes what the operator observed (`Opened`, `Finished`, `Held`, `Drained`) and gives
  the next state; an event the stage does not expect is a `TransitionError` (a bug or a corrupted state, never
  a guess);
* the stage says what the operator does next: `open` (open submission k), `outcome` (wait for its outcome),
  `hold` (hold it), `drain` (wait for its pods), or stop: `succeeded` (Complete) or `exhausted` (Failed with no
  restart left).

The state crosses deferrals (the task's `next_kwargs`, and its XCom `restarts`), so it is JSON (`as_json`,
`from_json`, which refuses anything malformed) and bounded: at most `MAX_RESTARTS_LIMIT` restarts, every text
cut to `TEXT_LIMIT`, so the whole state stays below `STATE_LIMIT` characters however the chain went.

The cluster is the chain's memory: a new try of the task (a retry, a Clear, a try Airflow failed while it ran) knows
nothing of what an earlier try did, so it reads the chain's TrainJobs (`dispatch.resume`, by the job id label) and
`dispatch.chain.from_cluster` says what they mean: the last submission running is waited for, failed with restarts
left is held, drained and followed by the next, complete ends the chain; the restarts used are the submissions that
exist. A TrainJob of the chain's job id that is not one of its submissions is refused (`NotInChainError`). Each
submission after the first records in its create which submission it follows and how that one's pods went
(`ANNOTATION_FOLLOWS`), so the history read back is the one the chain kept.

`per_run` and `run_key` give each DAG run a chain of its own: the same key for every try of a run, another for
every other run (`<name>-<YYYYMMDD>-<6 hex>`), whatever kind of run it is.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Final

from airflow_provider_dispatch.dispatch import vocabulary as v
from airflow_provider_dispatch.dispatch.errors import SpecRejectedError
from airflow_provider_dispatch.dispatch.payloads import cut
from airflow_provider_dispatch.dispatch.validation import rendered_nothing

#: the most restarts one chain may make: the history of executions travels in every deferral's `next_kwargs`
#: and in the XCom, so it must stay small; a training failing more often than this needs a person, not a loop
MAX_RESTARTS_LIMIT: Final = 25
#: the longest reason or message of an outcome the history keeps, in characters and in characters of its JSON
#: (the TrainJob's condition keeps the full one)
TEXT_LIMIT: Final = 300
#: the bound on the state's compact JSON, whatever the chain did (tests/dispatch/test_restarts.py proves it)
STATE_LIMIT: Final = 24 * 1024
#: the outcomes a TrainJob finishes with (its `Complete` or `Failed` condition)
COMPLETE: Final = "Complete"
FAILED: Final = "Failed"


class Stage(StrEnum):
    """What the chain does next."""

    OPEN = "open"
    OUTCOME = "outcome"
    HOLD = "hold"
    DRAIN = "drain"
    SUCCEEDED = "succeeded"
    EXHAUSTED = "exhausted"

    @property
    def final(self) -> bool:
        return self in (Stage.SUCCEEDED, Stage.EXHAUSTED)


class TransitionError(ValueError):
    """An event the current stage does not expect, or a state that is not one (malformed JSON)."""


@dataclass(frozen=True)
class Submission:
    """One submission of the chain and what became of it (epoch seconds for the times; None: not yet)."""

    submission: int
    admission: int | None = None
    opened_at: float | None = None
    outcome: str | None = None
    reason: str = ""
    message: str = ""
    finished_at: float | None = None
    drained: str | None = None
    drained_at: float | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "submission": self.submission,
            "admission": self.admission,
            "opened_at": self.opened_at,
            "outcome": self.outcome,
            "reason": self.reason,
            "message": self.message,
            "finished_at": self.finished_at,
            "drained": self.drained,
            "drained_at": self.drained_at,
        }


@dataclass(frozen=True)
class RestartState:
    """The chain: its limit, its stage (since `stage_started`, epoch seconds), and every submission so far."""

    max_restarts: int
    stage: Stage
    stage_started: float
    history: tuple[Submission, ...]

    @property
    def current(self) -> Submission:
        return self.history[-1]

    @property
    def submission(self) -> int:
        """The current submission number k (1 for the first)."""
        return self.current.submission

    @property
    def restarts(self) -> int:
        """How many restarts were opened so far (submissions after the first)."""
        return len(self.history) - 1

    def as_json(self) -> dict[str, Any]:
        return {
            "max_restarts": self.max_restarts,
            "stage": self.stage.value,
            "stage_started": self.stage_started,
            "history": [entry.as_json() for entry in self.history],
        }


@dataclass(frozen=True)
class Opened:
    """Submission k was opened and runs execution `admission` (0 in Kueue mode until Kueue admits it)."""

    admission: int
    at: float


@dataclass(frozen=True)
class Finished:
    """The awaited execution finished: `outcome` is `Complete` or `Failed`, with its condition's reason, and
    `admission` the execution that finished (None: not known). A submission opened as execution A > 0 takes
    only A's outcome; one opened as 0 (Kueue mode: Kueue admits later) records the execution Kueue ran."""

    outcome: str
    reason: str
    message: str
    at: float
    admission: int | None = None


@dataclass(frozen=True)
class Held:
    """The failed submission is held (nothing of it may be admitted again)."""

    at: float


@dataclass(frozen=True)
class Drained:
    """No pod of the failed submission remains (`drained`), or every remaining one is proven gone (`ceased`)."""

    outcome: str
    at: float


Event = Opened | Finished | Held | Drained
_EXPECTED: Final = {Stage.OPEN: Opened, Stage.OUTCOME: Finished, Stage.HOLD: Held, Stage.DRAIN: Drained}


def validate_max_restarts(value: object) -> int:
    """`max_restarts` as an integer from 0 to `MAX_RESTARTS_LIMIT` (its text too, as a template renders it)."""
    number: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str) and value.strip().isdigit():
        number = int(value.strip())
    if number is None or not 0 <= number <= MAX_RESTARTS_LIMIT:
        raise ValueError(
            f"max_restarts must be an integer from 0 to {MAX_RESTARTS_LIMIT} (0: no restart, only the first "
            f"submission), not {value!r}{rendered_nothing(value)}"
        )
    return number


def start(max_restarts: int, now: float) -> RestartState:
    """The first state: open submission 1."""
    return RestartState(validate_max_restarts(max_restarts), Stage.OPEN, now, (Submission(1),))


def advance(state: RestartState, event: Event) -> RestartState:
    """The next state after `event`; `TransitionError` when the stage does not expect it."""
    expected = _EXPECTED.get(state.stage)
    if expected is None or not isinstance(event, expected):
        wanted = expected.__name__ if expected is not None else "nothing (the chain has ended)"
        raise TransitionError(f"stage {state.stage.value} expects {wanted}, not {type(event).__name__}")
    current = state.current
    if isinstance(event, Opened):
        if event.admission < 0:
            raise TransitionError(f"an admission number is never negative: {event.admission}")
        return _moved(state, Stage.OUTCOME, event.at, replace(current, admission=event.admission, opened_at=event.at))
    if isinstance(event, Finished):
        if event.outcome not in (COMPLETE, FAILED):
            raise TransitionError(f"a TrainJob finishes Complete or Failed, not {event.outcome!r}")
        finished = replace(
            current,
            admission=_finished_admission(current, event.admission),
            outcome=event.outcome,
            reason=bounded(event.reason),
            message=bounded(event.message),
            finished_at=event.at,
        )
        if event.outcome == COMPLETE:
            stage = Stage.SUCCEEDED
        else:
            stage = Stage.HOLD if state.restarts < state.max_restarts else Stage.EXHAUSTED
        return _moved(state, stage, event.at, finished)
    if isinstance(event, Held):
        return _moved(state, Stage.DRAIN, event.at, current)
    if event.outcome not in ("drained", "ceased"):
        raise TransitionError(f"a drain wait ends drained or ceased, not {event.outcome!r}")
    drained = replace(current, drained=event.outcome, drained_at=event.at)
    following = Submission(current.submission + 1)
    return RestartState(state.max_restarts, Stage.OPEN, event.at, (*state.history[:-1], drained, following))


def _finished_admission(current: Submission, finished: int | None) -> int | None:
    """The execution a submission's outcome belongs to: the one it was opened as (A > 0, the outcome pinned to
    it), or, opened as 0 (Kueue admits), the one that finished. Another execution's outcome is a
    `TransitionError`: the chain never records an outcome that is not its submission's execution's."""
    if finished is None:
        return current.admission
    if finished < 0:
        raise TransitionError(f"an admission number is never negative: {finished}")
    if current.admission and finished != current.admission:
        raise TransitionError(
            f"submission {current.submission} was opened as execution {current.admission}; the outcome of "
            f"execution {finished} is not its"
        )
    return finished


def bounded(text: str) -> str:
    """`text` cut to `TEXT_LIMIT` characters, and shorter still until its JSON (ASCII, so a character outside it
    takes up to 12) is within `TEXT_LIMIT` too: the state's bound holds for any text an outcome quotes."""
    text = cut(text, TEXT_LIMIT)
    while len(json.dumps(text)) - 2 > TEXT_LIMIT:
        text = text[: len(text) - 8]
    return text


def _moved(state: RestartState, stage: Stage, at: float, current: Submission) -> RestartState:
    return RestartState(state.max_restarts, stage, at, (*state.history[:-1], current))


def trainjob_name(base: str, submission: int) -> str:
    """The TrainJob of submission k: `<base>-<k>`."""
    return f"{base}-{submission}"


def submission_manifest(
    manifest: Mapping[str, Any], submission: int, *, follows: Submission | None = None
) -> dict[str, Any]:
    """The TrainJob of submission k from the chain's manifest: named `<metadata.name>-<k>`, labelled submission k,
    and labelled job id `metadata.name` unless the manifest gives its own; `follows`, the submission before it
    (drained or ceased), goes in its `ANNOTATION_FOLLOWS`. The manifest must not carry a submission label (the
    chain numbers its submissions) or that annotation, nor hand the TrainJob to another manager than Trainer's
    own controller (`spec.managedBy`): `SpecRejectedError` (a refusal) otherwise. What
    `programs.prepare_manifest` checks (namespace, name length, the other labels) is left to it."""
    metadata = manifest.get("metadata")
    if not isinstance(metadata, Mapping) or not isinstance(metadata.get("name"), str):
        raise SpecRejectedError("the chain's TrainJob manifest needs metadata.name (its TrainJobs are <name>-<k>)")
    base = str(metadata["name"])
    labels = v.labels_of(manifest)
    if v.LABEL_SUBMISSION in labels:
        raise SpecRejectedError(
            f"the chain's TrainJob manifest {base} sets the label {v.LABEL_SUBMISSION}; the restart operator "
            "numbers the submissions itself (1, 2, ...), remove it"
        )
    if v.ANNOTATION_FOLLOWS in v.annotations_of(manifest):
        raise SpecRejectedError(
            f"the chain's TrainJob manifest {base} sets the annotation {v.ANNOTATION_FOLLOWS}; the restart "
            "operator writes it on each submission after the first, remove it"
        )
    managed_by = v.field(manifest, "spec", "managedBy")
    if managed_by not in (None, v.TRAINER_MANAGED_BY):
        raise SpecRejectedError(
            f"the chain's TrainJob manifest {base} sets spec.managedBy {managed_by!r}: its pods would run on "
            "another cluster, where dispatch cannot tell when they stopped; leave spec.managedBy out"
        )
    body = copy.deepcopy(dict(manifest))
    body["metadata"] = {**body["metadata"], "name": trainjob_name(base, submission)}
    body["metadata"]["labels"] = {
        **labels,
        v.LABEL_JOB_ID: labels.get(v.LABEL_JOB_ID, base),
        v.LABEL_SUBMISSION: str(submission),
    }
    if follows is not None:
        body["metadata"]["annotations"] = {
            **v.annotations_of(manifest),
            v.ANNOTATION_FOLLOWS: follows_annotation(follows),
        }
    return body


def give_up_message(state: RestartState, trainjob: str) -> str:
    """Why an exhausted chain fails its task: the limit, and how the last submission ended."""
    last = state.current
    used = f"{state.restarts} restart{'' if state.restarts == 1 else 's'}"
    said = f" ({last.reason}: {last.message})" if last.reason or last.message else ""
    return (
        f"gave up after {used} (max_restarts={state.max_restarts}): submission {last.submission}, TrainJob "
        f"{trainjob} execution {last.admission}, ended {last.outcome}{said}. Every submission failed; the "
        "history is in this task's XCom 'restarts'."
    )


def follows_annotation(previous: Submission) -> str:
    """The value of `ANNOTATION_FOLLOWS` on the submission after `previous` (drained or ceased)."""
    return json.dumps({"submission": previous.submission, "drained": previous.drained}, separators=(",", ":"))


def follows_of(trainjob: Mapping[str, Any] | None) -> tuple[int, str] | None:
    """(k, "drained" | "ceased") from a TrainJob's `ANNOTATION_FOLLOWS`; None when absent or not the chain's."""
    raw = v.annotations_of(trainjob).get(v.ANNOTATION_FOLLOWS)
    try:
        value = json.loads(raw) if raw is not None else None
    except ValueError:
        return None
    if not isinstance(value, Mapping):
        return None
    number, drained = value.get("submission"), value.get("drained")
    if isinstance(number, bool) or not isinstance(number, int) or drained not in ("drained", "ceased"):
        return None
    return number, str(drained)


# --- one chain per DAG run ------------------------------------------------------------------------------------

#: hex digits of the run key's digest (16.7 million values: two runs of one task colliding on the same day is not
#: a practical concern, and the date keeps the names readable)
RUN_KEY_DIGITS: Final = 6
#: what `per_run` adds to the name and the job id: `-YYYYMMDD-` and the digits
RUN_KEY_LENGTH: Final = len("-YYYYMMDD-") + RUN_KEY_DIGITS


def run_key(*, dag_id: str, task_id: str, run_id: str, date: datetime, map_index: int = -1) -> str:
    """The key of one DAG run's chain: the run's date (UTC; its logical date, or when it was due to run if it has
    none, as an Airflow 3 manual run may not) and a digest of the DAG, the task, its map index and the run id.
    Every try of the run (a retry, a Clear) gets the same key; every other run, task or map index another."""
    if date.tzinfo is None:
        raise ValueError(f"the run's date must carry its time zone, not {date!r}")
    digest = hashlib.sha256("\0".join((dag_id, task_id, str(map_index), run_id)).encode()).hexdigest()
    return f"{date.astimezone(UTC):%Y%m%d}-{digest[:RUN_KEY_DIGITS]}"


def per_run(manifest: Mapping[str, Any], key: str) -> dict[str, Any]:
    """The chain's manifest for one DAG run: `metadata.name` and, when the manifest sets it, the job id label end
    with `-<key>` (`run_key`), so the run's submissions are `<name>-<key>-<k>` of job id `<name>-<key>`."""
    metadata = manifest.get("metadata")
    if not isinstance(metadata, Mapping) or not isinstance(metadata.get("name"), str):
        raise SpecRejectedError("the chain's TrainJob manifest needs metadata.name (its TrainJobs are <name>-<k>)")
    body = copy.deepcopy(dict(manifest))
    body["metadata"] = {**body["metadata"], "name": f"{metadata['name']}-{key}"}
    labels = v.labels_of(manifest)
    if v.LABEL_JOB_ID in labels:
        body["metadata"]["labels"] = {**labels, v.LABEL_JOB_ID: f"{labels[v.LABEL_JOB_ID]}-{key}"}
    return body


def from_json(value: object) -> RestartState:
    """The state `as_json` gave; `TransitionError` for anything else (another writer, another version)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as error:
            raise TransitionError(f"the restart state is not JSON: {error}") from None
    if not isinstance(value, Mapping):
        raise TransitionError(f"the restart state must be an object, not {type(value).__name__}")
    try:
        max_restarts = validate_max_restarts(value.get("max_restarts"))
        stage = Stage(str(value.get("stage")))
        started = _number(value.get("stage_started"), "stage_started")
        entries = value.get("history")
        if not isinstance(entries, list) or not 1 <= len(entries) <= MAX_RESTARTS_LIMIT + 1:
            # more than max_restarts + 1 when the chain was resumed from the cluster with a lower limit
            raise TransitionError(f"the restart state needs 1 to {MAX_RESTARTS_LIMIT + 1} submissions in its history")
        history = tuple(_submission(entry, index + 1) for index, entry in enumerate(entries))
    except (ValueError, TypeError) as error:
        raise TransitionError(f"the restart state is malformed: {error}") from None
    return RestartState(max_restarts, stage, started, history)


def _number(value: object, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TransitionError(f"{what} must be a number, not {value!r}")
    return float(value)


def _submission(value: object, expected: int) -> Submission:
    if not isinstance(value, Mapping) or value.get("submission") != expected:
        raise TransitionError(f"history entry {expected} is not submission {expected}")
    admission = value.get("admission")
    if admission is not None and (isinstance(admission, bool) or not isinstance(admission, int) or admission < 0):
        raise TransitionError(f"submission {expected} has the admission number {admission!r}")
    texts = {key: value.get(key, "") for key in ("reason", "message")}
    if not all(isinstance(text, str) and len(text) <= TEXT_LIMIT for text in texts.values()):
        raise TransitionError(f"submission {expected}: reason and message must be texts of at most {TEXT_LIMIT}")
    outcome, drained = value.get("outcome"), value.get("drained")
    if outcome not in (None, COMPLETE, FAILED) or drained not in (None, "drained", "ceased"):
        raise TransitionError(f"submission {expected} has the outcome {outcome!r} and drain {drained!r}")
    times = {key: value.get(key) for key in ("opened_at", "finished_at", "drained_at")}
    for key, at in times.items():
        if at is not None:
            _number(at, key)
    return Submission(
        submission=expected,
        admission=admission,
        opened_at=times["opened_at"],
        outcome=outcome,
        reason=texts["reason"],
        message=texts["message"],
        finished_at=times["finished_at"],
        drained=drained,
        drained_at=times["drained_at"],
    )


__all__ = [
    "COMPLETE",
    "FAILED",
    "MAX_RESTARTS_LIMIT",
    "RUN_KEY_DIGITS",
    "RUN_KEY_LENGTH",
    "STATE_LIMIT",
    "TEXT_LIMIT",
    "Drained",
    "Event",
    "Finished",
    "Held",
    "Opened",
    "RestartState",
    "Stage",
    "Submission",
    "TransitionError",
    "advance",
    "bounded",
    "follows_annotation",
    "follows_of",
    "from_json",
    "give_up_message",
    "per_run",
    "run_key",
    "start",
    "submission_manifest",
    "trainjob_name",
    "validate_max_restarts",
]

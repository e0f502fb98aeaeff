"""What the sensors and triggers ask the cluster, as sans-I/O programs composed from the dispatch core.

The Airflow layer decides nothing: each check here is a program of `dispatch.programs` steps whose answer comes
from the core's pure functions, and either adapter runs it (`DispatchAdapter.run` in a sensor,
`AsyncDispatchAdapter.run` in a trigger), so a poke and a trigger decide alike.

* `drain_check`: the TrainJob (it must exist and be managed by dispatch: a missing one is a `NotFoundError`, so a
  typo in a name fails fast instead of waiting for a timeout), then its remaining pods in one consistent read
  with their nodes' states (`programs.drain` and its report: the same steps `programs.remaining_pods` and
  release take, so a poke decides as release does, without reading the TrainJob twice).
* `outcome_check`: the TrainJob's execution identity and whether it finished (`assessment.finished`: the
  `Complete` or `Failed` condition True).

Both write nothing and work with a read-only adapter.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from airflow_provider_dispatch.dispatch import programs
from airflow_provider_dispatch.dispatch.assessment import (
    DrainReport,
    Execution,
    State,
    finished,
    is_held,
    managed,
)
from airflow_provider_dispatch.dispatch.errors import RefusedError
from airflow_provider_dispatch.dispatch.fencing import recorded
from airflow_provider_dispatch.dispatch.operations import Operations
from airflow_provider_dispatch.dispatch.programs import Program
from airflow_provider_dispatch.dispatch.selection import Selection
from airflow_provider_dispatch.dispatch.validation import Ref, parse_ref


@dataclass(frozen=True)
class DrainCheck:
    """One consistent look at an object's remaining pods, and what the trigger needs to watch for changes."""

    report: DrainReport
    execution: Execution
    held: bool
    selection: Selection

    @property
    def ref(self) -> str:
        return self.report.ref

    def as_dict(self) -> dict[str, Any]:
        """JSON for XCom and trigger events."""
        return {
            "ref": self.report.ref,
            "report": self.report.as_dict(),
            "execution": self.execution.as_dict(),
            "held": self.held,
        }


def drain_check(ref: str | Ref, options: Operations, *, now: datetime | None = None) -> Program[DrainCheck]:
    """The object's remaining pods and their nodes' states; NotFoundError when the TrainJob does not exist."""
    target = parse_ref(ref)
    text = str(target)
    trainjob = yield from programs.read_trainjob(target)
    obj = managed(trainjob)
    drained = yield from programs.drain(
        obj.selection,
        ref=text,
        execution_pods=recorded(trainjob, obj.admission, text),
        strategy=options.pod_read,
        page_size=options.page_size,
    )
    report = drained.report(text, now=now if now is not None else options.clock())
    return DrainCheck(report=report, execution=obj.execution, held=is_held(trainjob), selection=obj.selection)


@dataclass(frozen=True)
class OutcomeCheck:
    """Whether the TrainJob finished, for which execution, and the condition that says so."""

    ref: str
    execution: Execution
    outcome: str | None
    reason: str
    message: str
    resource_version: str | None

    @property
    def finished(self) -> bool:
        return self.outcome is not None

    def as_dict(self) -> dict[str, Any]:
        """The TrainJobOutcomeSensor's XCom (and the trigger's event body)."""
        return {
            "ref": self.ref,
            "outcome": self.outcome,
            "reason": self.reason,
            "message": self.message,
            "execution": self.execution.as_dict(),
            "admission": self.execution.admission,
            "resource_version": self.resource_version,
        }


def outcome_of(trainjob: Mapping[str, Any]) -> OutcomeCheck:
    """The outcome read off one TrainJob object (pure)."""
    obj = managed(trainjob)
    done = finished(trainjob)
    outcome: str | None = None
    reason = message = ""
    if done is not None:
        state, entry = done
        outcome = "Complete" if state is State.SUCCEEDED else "Failed"
        reason = str(entry.get("reason") or "")
        message = str(entry.get("message") or "")
    return OutcomeCheck(
        ref=str(obj.ref),
        execution=obj.execution,
        outcome=outcome,
        reason=reason,
        message=message,
        resource_version=obj.resource_version,
    )


OutcomeDecision = Literal["finished", "waiting", "superseded"]


def outcome_decision(check: OutcomeCheck, admission: int | None) -> OutcomeDecision:
    """Whether a wait for the outcome (of execution `admission`, or of whatever runs) is over.

    The TrainJob's conditions belong to its current execution. Waiting for a given admission number A: a
    current A below it is not admitted yet (wait), one above it means A was superseded and its outcome can no
    longer be read off the object (`superseded_error`); this is what keeps a chained restart from reading the
    previous run's outcome.
    """
    current = check.execution.admission
    if admission is not None and current > admission:
        return "superseded"
    if admission is not None and current < admission:
        return "waiting"
    return "finished" if check.finished else "waiting"


def superseded_error(check: OutcomeCheck, admission: int) -> RefusedError:
    return RefusedError(
        f"TrainJob {check.ref} runs execution {check.execution.admission} now, so the outcome of execution "
        f"{admission} can no longer be read off it. Wait for the newest execution (admission "
        f"{check.execution.admission}) instead.",
        ref=check.ref,
    )


def outcome_check(ref: str | Ref) -> Program[OutcomeCheck]:
    """One GET of the TrainJob: its execution identity and outcome; NotFoundError when it does not exist."""
    trainjob = yield from programs.read_trainjob(parse_ref(ref))
    return outcome_of(trainjob)


__all__ = [
    "DrainCheck",
    "OutcomeCheck",
    "OutcomeDecision",
    "drain_check",
    "outcome_check",
    "outcome_decision",
    "outcome_of",
    "superseded_error",
]

"""What the sensors and triggers ask the cluster, as sans-I/O programs composed from the dispatch core.

The Airflow layer decides nothing: each check here is a program of `dispatch.programs` steps whose answer comes
from the core's pure functions, and either adapter runs it (`DispatchAdapter.run` in a sensor,
`AsyncDispatchAdapter.run` in a trigger), so a poke and a trigger decide alike.

* `drain_check`: the TrainJob (it must exist and be managed by dispatch: a missing one is a `NotFoundError`, so a
  typo in a name fails fast instead of waiting for a timeout), then its remaining pods in one consistent read
  with their nodes' states (`programs.drain` and its report: the same steps `programs.remaining_pods` and
  release take, so a poke decides as release does, without reading the TrainJob twice).
* `outcome_check`: the TrainJob's execution identity and whether it finished (`assessment.finished`: the
  `Complete` or `Failed` condition True); while it has not, what keeps it from finishing
  (`unfinished.explain_unfinished`), from the pods of its execution in one consistent read, their Nodes and,
  under Kueue, its Workload.

Both write nothing and work with a read-only adapter.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Literal

from airflow_provider_dispatch.dispatch import programs
from airflow_provider_dispatch.dispatch.assessment import (
    DrainReport,
    Execution,
    Mode,
    State,
    finished,
    is_held,
    managed,
)
from airflow_provider_dispatch.dispatch.blocking import nodes_to_read
from airflow_provider_dispatch.dispatch.errors import RefusedError
from airflow_provider_dispatch.dispatch.fencing import recorded
from airflow_provider_dispatch.dispatch.operations import Operations
from airflow_provider_dispatch.dispatch.payloads import REASON_WORDS_ROOM, WAIT_REASON_LIMIT
from airflow_provider_dispatch.dispatch.programs import Program
from airflow_provider_dispatch.dispatch.selection import Selection
from airflow_provider_dispatch.dispatch.unfinished import explain_unfinished
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
        clock_skew_seconds=options.clock_skew_seconds,
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
    #: while not finished: what keeps it from finishing (`Unfinished.as_dict`: `headline`, `detail` within
    #: `UNFINISHED_LIMIT`, `fingerprint`, ...); None when finished or not looked at
    waiting: Mapping[str, Any] | None = None
    #: the execution's pods, and the state of each of their nodes: what a trigger's pod and node watches compare
    selection: Selection | None = field(default=None, compare=False)
    node_states: Mapping[str, str] = field(default_factory=dict, compare=False)

    @property
    def finished(self) -> bool:
        return self.outcome is not None

    def as_dict(self) -> dict[str, Any]:
        """The TrainJobOutcomeSensor's XCom (and the trigger's event body); `waiting` only while not finished."""
        waiting = {"waiting": dict(self.waiting)} if self.waiting is not None else {}
        return waiting | {
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


#: the explanation's share of the outcome sensor's wait reason ("waiting for TrainJob <ref> to finish execution
#: <A>: " comes around it)
UNFINISHED_LIMIT = WAIT_REASON_LIMIT - REASON_WORDS_ROOM


def outcome_check(
    ref: str | Ref, options: Operations | None = None, *, now: datetime | None = None
) -> Program[OutcomeCheck]:
    """The TrainJob's execution identity and outcome (NotFoundError when it does not exist). While it has not
    finished, also what keeps it from finishing: its execution's pods (one consistent read), their Nodes, and its
    Workload under Kueue, explained by `unfinished.explain_unfinished`. Writes nothing."""
    ops = options if options is not None else Operations()
    trainjob = yield from programs.read_trainjob(parse_ref(ref))
    check = outcome_of(trainjob)
    if check.finished:
        return check
    obj = managed(trainjob)
    read = yield from programs.read_pods(obj.selection, ref=check.ref, strategy=ops.pod_read, page_size=ops.page_size)
    nodes = yield from programs.read_nodes(nodes_to_read(read.pods), ref=check.ref)
    workload: Mapping[str, Any] | None = None
    if obj.mode is Mode.KUEUE:
        workloads = yield from programs.read_workloads(obj)
        workload = workloads[0] if workloads else None
    why = explain_unfinished(trainjob, read.pods, nodes, workload=workload, now=now if now is not None else ops.clock())
    return replace(
        check, waiting=why.as_dict(UNFINISHED_LIMIT), selection=obj.selection, node_states=dict(why.node_states)
    )


__all__ = [
    "UNFINISHED_LIMIT",
    "DrainCheck",
    "OutcomeCheck",
    "OutcomeDecision",
    "drain_check",
    "outcome_check",
    "outcome_decision",
    "outcome_of",
    "superseded_error",
]

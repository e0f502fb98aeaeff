"""How every wait reads: the one composer of wait reasons, and what a remedy needs (issue 25).

A wait reason is read at a glance, in Airflow's UI (the task log, the Rendered Templates tab, Storage → XCom), in
`dispatch status`, and in a Kueue admission check's message. Every one of them is composed here, in this order:

1. the first line: what to do, or what is awaited, and its subject (a node, a pod), within `payloads.GLANCE`
   characters when names are of ordinary length (Airflow 3.3's UI at 1366x768 wraps neither the log nor the
   Rendered Templates tab, and shows about 98 characters of a line in each: `payloads.GLANCE` says how that was
   measured);
2. how: the exact commands, the permission the remedy needs, and the runbook section (`Remedy.how`);
3. about: who waits, and for what: the TrainJob, its execution, the restart chain's submission;
4. the details: the remaining pods, the census of node states, the explanations at length, as many lines as the
   payload's limit leaves (`payloads.fit`, whole lines only).

Callers differ only in what they put in each part: the sensors and the release operator their TrainJob, the
restart chain its submission (`WaitReason.around`), the Kueue controller nothing about Airflow. Pure text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Final

from airflow_provider_dispatch.dispatch.payloads import WAIT_REASON_LIMIT, fit

#: where the runbook is: every remedy names one of its sections (`Remedy.runbook`), each a stable anchor
RUNBOOK: Final = "docs/runbook.md"
#: the runbook's sections a wait reason points to (tests/test_docs.py checks that each anchor exists there)
CONFIRM_SHUTDOWN: Final = "confirm-the-shutdown"
OUT_OF_SERVICE: Final = "mark-the-node-out-of-service"
REMOVE_THE_TAINT: Final = "remove-the-taint"
NEVER_FORCE_DELETE: Final = "never-force-delete"
NODE_NOT_READABLE: Final = "node-not-readable"
EDITED_LABELS: Final = "edited-labels"
JOBS_NOT_SUSPENDED: Final = "jobs-not-suspended"
HOLD_SETTLES: Final = "hold-settles"
OUTCOME_WAITS: Final = "outcome-waits"
RUNBOOK_SECTIONS: Final = (
    CONFIRM_SHUTDOWN,
    OUT_OF_SERVICE,
    REMOVE_THE_TAINT,
    NEVER_FORCE_DELETE,
    NODE_NOT_READABLE,
    EDITED_LABELS,
    JOBS_NOT_SUSPENDED,
    HOLD_SETTLES,
    OUTCOME_WAITS,
)


def runbook(section: str) -> str:
    """`Runbook: docs/runbook.md#<section>`."""
    return f"Runbook: {RUNBOOK}#{section}"


@dataclass(frozen=True)
class Remedy:
    """What a person does about one wait, or what is awaited when there is nothing to do.

    `action` leads the first line (`Confirm node-3 is powered off, then taint it out-of-service`); the other
    fields make the lines below it (`how`): the exact commands, one per line so each can be copied, then one line
    with the permission the commands need (`needs`: `patch nodes`; empty when there is nothing to do), `note` (why,
    or a warning) and the runbook section."""

    action: str
    commands: tuple[str, ...] = ()
    needs: str = ""
    runbook: str = ""
    note: str = ""

    @property
    def how(self) -> tuple[str, ...]:
        said = [f"Needs permission to {self.needs}."] if self.needs else []
        if self.note:
            said.append(self.note)
        if self.runbook:
            said.append(runbook(self.runbook))
        return (*self.commands, *([" ".join(said)] if said else []))


@dataclass(frozen=True)
class WaitReason:
    """A wait reason in its four parts (module docstring): `first` line, `how` lines, `about` lines, `details`."""

    first: str
    how: tuple[str, ...] = ()
    about: tuple[str, ...] = ()
    details: str = ""

    def around(self, *lines: str) -> WaitReason:
        """The same reason said by a caller that waits on behalf of something more (the restart chain's
        submission): `lines` go first among the `about` lines, after the first line and the remedy."""
        return replace(self, about=(*lines, *self.about))

    @property
    def short(self) -> str:
        """The line logged while the reason does not change: the first line."""
        return self.first

    def text(self, limit: int | None = WAIT_REASON_LIMIT) -> str:
        """The reason as one text: the first line, the how and about lines, then the details' leading lines that
        fit in what `limit` leaves (`payloads.fit`, whole lines, with a note of how many were left out). Without
        `limit` (`dispatch status`), everything."""
        head = "\n".join((self.first, *self.how, *self.about))
        if not self.details:
            return head
        lines = self.details.splitlines()
        if limit is None:
            return head + "\n" + self.details
        room = limit - len(head) - 1
        shown, _ = fit(lines, len(lines), room, separator="\n", more=lambda n: f"({n:,} more lines left out)")
        return head + "\n" + shown if shown else head


def compose(first: str, how: Sequence[str] = (), about: Sequence[str] = (), details: str = "") -> WaitReason:
    """A `WaitReason` from its parts (the lines as given; empty ones left out)."""
    return WaitReason(first, tuple(line for line in how if line), tuple(line for line in about if line), details)


#: how the line that says whose pods a drain wait waits for begins (`dispatch demo` finds the full reasons by it)
WAITING_FOR_PODS: Final = "Waiting until the pods of TrainJob"


def pods_line(ref: str, admission: object, *, accept_ceased: bool) -> str:
    """The about line of a wait for a TrainJob's pods (`PodsDrainedSensor`, the restart chain's drain)."""
    which = f" (execution {admission})" if admission is not None else ""
    until = "gone or proven stopped" if accept_ceased else "gone"
    return f"{WAITING_FOR_PODS} {ref}{which} are {until}."


def outcome_line(ref: str, running: int, admission: int | None) -> str:
    """The about line of a wait for a TrainJob's outcome (`TrainJobOutcomeSensor`, the restart chain): which
    execution runs (0: Kueue has not admitted one yet) and which one's outcome is awaited."""
    awaited = f"execution {admission}" if admission is not None else "its current execution"
    runs = f"runs execution {running}" if running else "has no execution admitted yet"
    return f"TrainJob {ref} {runs}; waiting for {awaited} to finish (Complete or Failed)."


def settling(ref: str, seconds_left: float, message: str) -> WaitReason:
    """The wait while a hold settles (`HoldSettlingError`: a write a controller started before it saw the hold may
    still land): nothing to do but wait the time left; the error's message says why, below."""
    return compose(
        f"Waiting {seconds_left:.0f}s more for the hold of TrainJob {ref} to settle; nothing to do",
        (runbook(HOLD_SETTLES),),
        details=message,
    )


def observing(ref: str, delay: float) -> str:
    """The log line while the controllers have not observed a hold yet (`SuspensionNotObservedError`): usual
    for a second or so after every create or hold, so said as what is awaited, not as a problem."""
    return (
        f"Waiting for Trainer and JobSet to observe the hold of TrainJob {ref}, as after every create or hold; "
        f"checking again in {delay:.1f}s"
    )


__all__ = [
    "CONFIRM_SHUTDOWN",
    "EDITED_LABELS",
    "HOLD_SETTLES",
    "JOBS_NOT_SUSPENDED",
    "NEVER_FORCE_DELETE",
    "NODE_NOT_READABLE",
    "OUTCOME_WAITS",
    "OUT_OF_SERVICE",
    "REMOVE_THE_TAINT",
    "RUNBOOK",
    "RUNBOOK_SECTIONS",
    "WAITING_FOR_PODS",
    "Remedy",
    "WaitReason",
    "compose",
    "observing",
    "outcome_line",
    "pods_line",
    "runbook",
    "settling",
]

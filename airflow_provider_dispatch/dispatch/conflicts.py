"""Conflicts are not failures: a write refused with 409 re-runs the whole operation, a bounded number of times.

Trainer writes a TrainJob's status whenever its JobSet moves, so between dispatch's read of a TrainJob and its
conditional write (DESIGN §3.6) the resourceVersion often changes, and the write is refused with 409 (or the
program refuses it itself when the execution changed while the pods were read). Nothing was admitted or held
then, and the right answer is the one a retried task would give: read everything again and decide again. Doing
that inside the operation spares the DAG a failed try (Airflow's default `retries=0` would fail the run).

`retrying` wraps a program factory: each attempt is a fresh program from its first read (the TrainJob, the
pods, the nodes, the hold's evidence, the settle, the fencing record), so a retry re-runs the complete check on
the new state and never re-sends the refused write. Only `ConflictError` is retried; every other error, and
every refusal, is raised at once. After `attempts` conflicts in a row the last one surfaces as a
`PersistentConflictError`, still retryable (Airflow's retries, or the caller, try again later); with
`attempts=1` the `ConflictError` itself is raised, for a caller that retries on its own terms (the release and
open operators do, so that each retry consults their record of the admission first: operators/trainjob.py).

Each retry is reported (`ConflictRetry`: the attempt, the bound, what the conflict said, and the TrainJob as it
is now, read once more for the report) to a callback the adapter gives: the adapters log it, so a task log says
why an operation took more than one pass. The module is pure: no I/O beyond the program's requests, no clock.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, TypeVar

from airflow_provider_dispatch.dispatch import vocabulary as v
from airflow_provider_dispatch.dispatch.assessment import is_held
from airflow_provider_dispatch.dispatch.errors import ConflictError, DispatchError, PersistentConflictError
from airflow_provider_dispatch.dispatch.programs import ApiFailure, GetObject, Program
from airflow_provider_dispatch.dispatch.validation import parse_ref

_T = TypeVar("_T")

#: attempts of one operation before a conflict surfaces (the first try counts)
DEFAULT_CONFLICT_ATTEMPTS: Final = 5
#: the most attempts allowed: each one re-reads the namespace's pods, which may take seconds
MAX_CONFLICT_ATTEMPTS: Final = 20


def validate_conflict_attempts(value: object) -> int:
    """`conflict_attempts` as an int from 1 to `MAX_CONFLICT_ATTEMPTS`; anything else is a ValueError."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_CONFLICT_ATTEMPTS:
        raise ValueError(
            f"conflict_attempts must be an integer from 1 (no retry on conflict) to {MAX_CONFLICT_ATTEMPTS}, "
            f"not {value!r}"
        )
    return value


@dataclass(frozen=True)
class ConflictRetry:
    """One conflict that will be retried: which operation, which attempt met it, and what changed."""

    operation: str
    ref: str
    attempt: int
    attempts: int
    conflict: str
    now: str
    """The TrainJob as it is after the conflict (resourceVersion, execution, held or running), or why unknown."""

    def describe(self) -> str:
        return (
            f"{self.operation} of TrainJob {self.ref}: conflict on attempt {self.attempt} of {self.attempts} "
            f"({self.conflict}); {self.now}. Nothing was written by this attempt; reading everything again and "
            "re-running the complete check."
        )


def describe_state(trainjob: Mapping[str, Any]) -> str:
    """The facts of a TrainJob a conflict is about: its resourceVersion, execution, held or running."""
    version = v.field(trainjob, "metadata", "resourceVersion")
    admission = v.annotations_of(trainjob).get(v.ANNOTATION_ADMISSION, "none")
    state = "held" if is_held(trainjob) else "not held"
    return f"now at resourceVersion {version}, admission {admission}, {state}"


def persistent(operation: str, attempts: int, error: ConflictError) -> PersistentConflictError:
    """What surfaces after `attempts` conflicts in a row, the last one `error`."""
    return PersistentConflictError(
        f"{operation} of TrainJob {error.ref or '?'} met a conflict on each of its {attempts} attempts (another "
        f"writer keeps changing it between dispatch's read and its write); nothing was admitted or held by the "
        f"last one. Last conflict: {error.message} Retry later; if it persists, find the other writer (the API "
        "server's audit log names it).",
        ref=error.ref,
    )


def state_after(ref: str) -> Program[str]:
    """Read the TrainJob once more for the report (never used for a decision: the next attempt reads again)."""
    try:
        target = parse_ref(ref)
    except DispatchError:
        return "its current state is unknown"
    response = yield GetObject(v.TRAINJOB, target.namespace, target.name)
    if isinstance(response, ApiFailure):
        return f"reading it again failed ({response.status or 'no answer'})"
    return describe_state(response)


def retrying(
    operation: str,
    start: Callable[[], Program[_T]],
    *,
    attempts: int,
    report: Callable[[ConflictRetry], None],
) -> Program[_T]:
    """Run `start()` and, while it ends in a `ConflictError`, a fresh `start()` again, at most `attempts` times."""
    attempts = validate_conflict_attempts(attempts)
    for attempt in range(1, attempts + 1):
        try:
            return (yield from start())
        except ConflictError as error:
            ref = error.ref or "?"
            if attempts == 1:
                raise  # one attempt asked for: the conflict itself, for a caller that retries on its own
            if attempt == attempts:
                raise persistent(operation, attempts, error) from error
            now = yield from state_after(ref)
            report(ConflictRetry(operation, ref, attempt, attempts, error.message, now))
    raise AssertionError("unreachable: the last attempt returns or raises")  # pragma: no cover


__all__ = [
    "DEFAULT_CONFLICT_ATTEMPTS",
    "MAX_CONFLICT_ATTEMPTS",
    "ConflictRetry",
    "describe_state",
    "persistent",
    "retrying",
    "state_after",
    "validate_conflict_attempts",
]

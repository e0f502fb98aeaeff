"""conflicts.py: which errors re-run an operation, how often, and what a persistent conflict says.

Driven with scripted programs (generators), as every pure test of the rule is; the real 409s from a concurrent
writer, through both clients, are tests/dispatch_lab/test_conflicts.py.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from airflow_provider_dispatch.dispatch import vocabulary as v
from airflow_provider_dispatch.dispatch.conflicts import (
    MAX_CONFLICT_ATTEMPTS,
    ConflictRetry,
    retrying,
    validate_conflict_attempts,
)
from airflow_provider_dispatch.dispatch.errors import (
    ConflictError,
    DispatchError,
    NotFoundError,
    PersistentConflictError,
    UnreachableError,
)
from airflow_provider_dispatch.dispatch.operations import Operations
from airflow_provider_dispatch.dispatch.programs import ApiFailure, GetObject, Program, Request, Response, drive

from .support import NAME, NS, trainjob


def failing_then(errors: list[DispatchError], result: str) -> Callable[[], Program[str]]:
    """A program factory: each program reads the TrainJob, then raises the next error, or returns `result`."""

    def start() -> Program[str]:
        yield GetObject(v.TRAINJOB, NS, NAME)  # stands for the operation's reads
        if errors:
            raise errors.pop(0)
        return result

    return start


def answer(request: Request) -> Response:
    """The TrainJob as it is after each conflict: resourceVersion 12, admission 4, held."""
    if isinstance(request, GetObject) and request.name == NAME:
        return trainjob(admission="4", suspend=True, rv="12")
    return ApiFailure(404, None)


@pytest.mark.parametrize("value", [0, 21, -1, True, 2.5, "5", None])
def test_conflict_attempts_out_of_range_are_refused(value: object) -> None:
    with pytest.raises(ValueError, match="conflict_attempts must be an integer from 1"):
        validate_conflict_attempts(value)
    with pytest.raises(ValueError, match="conflict_attempts"):
        Operations(conflict_attempts=value)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [1, 5, MAX_CONFLICT_ATTEMPTS])
def test_conflict_attempts_in_range_are_kept(value: int) -> None:
    assert validate_conflict_attempts(value) == value
    assert Operations(conflict_attempts=value).conflict_attempts == value


def test_conflicts_are_retried_with_a_report_each_until_one_attempt_succeeds() -> None:
    ref = f"{NS}/{NAME}"
    reports: list[ConflictRetry] = []
    errors: list[DispatchError] = [ConflictError("first", ref=ref), ConflictError("second", ref=ref)]
    assert drive(retrying("release", failing_then(errors, "done"), attempts=3, report=reports.append), answer) == "done"
    assert [(r.attempt, r.attempts, r.conflict) for r in reports] == [(1, 3, "first"), (2, 3, "second")]
    assert {r.now for r in reports} == {"now at resourceVersion 12, admission 4, held"}
    assert reports[0].describe().startswith(f"release of TrainJob {ref}: conflict on attempt 1 of 3 (first)")


def test_one_attempt_raises_the_conflict_itself() -> None:
    error = ConflictError("only", ref=f"{NS}/{NAME}")
    with pytest.raises(ConflictError) as raised:
        drive(retrying("release", failing_then([error], "done"), attempts=1, report=lambda r: None), answer)
    assert raised.value is error


def test_a_conflict_on_the_last_attempt_surfaces_as_persistent_and_retryable() -> None:
    ref = f"{NS}/{NAME}"
    errors: list[DispatchError] = [ConflictError(f"c{n}", ref=ref) for n in range(2)]
    reports: list[ConflictRetry] = []
    with pytest.raises(PersistentConflictError, match=r"each of its 2 attempts.*Last conflict: c1") as raised:
        drive(retrying("hold", failing_then(errors, "done"), attempts=2, report=reports.append), answer)
    assert isinstance(raised.value, UnreachableError)
    assert isinstance(raised.value.__cause__, ConflictError)
    assert len(reports) == 1  # the last conflict is raised, not reported as a retry


@pytest.mark.parametrize(
    "error", [NotFoundError("gone", ref=f"{NS}/{NAME}"), UnreachableError("down", ref=f"{NS}/{NAME}")]
)
def test_other_errors_are_raised_at_once(error: DispatchError) -> None:
    reports: list[ConflictRetry] = []
    errors: list[DispatchError] = [error]
    with pytest.raises(type(error)) as raised:
        drive(retrying("open", failing_then(errors, "done"), attempts=5, report=reports.append), answer)
    assert raised.value is error
    assert reports == []

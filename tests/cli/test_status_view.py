"""The pure parts of `dispatch status`: AGE as kubectl prints it, the table layout, exit codes, error JSON."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from airflow_provider_dispatch.cli.status_view import (
    EXIT_REFUSED,
    EXIT_UNREACHABLE,
    age,
    error_dict,
    exit_code,
    human_duration,
    table,
)
from airflow_provider_dispatch.dispatch.errors import (
    ConflictError,
    DispatchError,
    ForbiddenError,
    InvalidNameError,
    NotFoundError,
    NotManagedError,
    PodsRemainError,
    RefusedError,
    SuspensionNotObservedError,
    UnreachableError,
)

MINUTE, HOUR, DAY, YEAR = 60, 3600, 86400, 365 * 86400


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        # apimachinery HumanDuration: skew up to 2 s reads as now, more is invalid
        (-2.5, "<invalid>"),
        (-2, "<invalid>"),
        (-1.9, "0s"),
        (-1, "0s"),
        (0, "0s"),
        (0.9, "0s"),
        (59, "59s"),
        (119, "119s"),
        (2 * MINUTE, "2m"),
        (2 * MINUTE + 1, "2m1s"),
        (9 * MINUTE + 59, "9m59s"),
        (10 * MINUTE, "10m"),
        (10 * MINUTE + 30, "10m"),
        (3 * HOUR - 1, "179m"),
        (3 * HOUR, "3h"),
        (3 * HOUR + 30 * MINUTE, "3h30m"),
        (7 * HOUR + 59 * MINUTE, "7h59m"),
        (8 * HOUR, "8h"),
        (8 * HOUR + 30 * MINUTE, "8h"),
        (47 * HOUR, "47h"),
        (2 * DAY, "2d"),
        (2 * DAY + 5 * HOUR, "2d5h"),
        (8 * DAY - 1, "7d23h"),
        (8 * DAY + 5 * HOUR, "8d"),
        (2 * YEAR - DAY, "729d"),
        (2 * YEAR, "2y"),
        (2 * YEAR + 10 * DAY, "2y10d"),
        (8 * YEAR, "8y"),
        (8 * YEAR + 100 * DAY, "8y"),
    ],
)
def test_human_duration(seconds: float, shown: str) -> None:
    assert human_duration(seconds) == shown


NOW = datetime(2026, 8, 21, 10, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("created", "shown"),
    [
        (None, "<unknown>"),
        (NOW - timedelta(minutes=4, seconds=3), "4m3s"),
        (NOW + timedelta(minutes=5), "<invalid>"),
    ],
)
def test_age(created: datetime | None, shown: str) -> None:
    assert age(created, NOW) == shown


def test_table_aligns_columns_and_strips_trailing_space() -> None:
    assert table(("A", "LONGER"), [("xyz", ""), ("q", "1")], indent="  ") == [
        "  A     LONGER",
        "  xyz",
        "  q     1",
    ]


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (UnreachableError("x"), EXIT_UNREACHABLE),
        (ConflictError("x"), EXIT_UNREACHABLE),
        (SuspensionNotObservedError("x"), EXIT_UNREACHABLE),
        (PodsRemainError("ml/ft", ()), EXIT_UNREACHABLE),
        (RefusedError("x"), EXIT_REFUSED),
        (NotFoundError("x"), EXIT_REFUSED),
        (NotManagedError("x"), EXIT_REFUSED),
        (ForbiddenError("x"), EXIT_REFUSED),
        (InvalidNameError("x"), EXIT_REFUSED),
        (DispatchError("x"), EXIT_REFUSED),
    ],
)
def test_exit_code(error: DispatchError, code: int) -> None:
    assert exit_code(error) == code


def test_error_dict() -> None:
    assert error_dict(ForbiddenError("ml/ft: forbidden", ref="ml/ft")) == {
        "error": {"type": "ForbiddenError", "retryable": False, "ref": "ml/ft", "message": "ml/ft: forbidden"}
    }

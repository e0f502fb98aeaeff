"""The figures the reliability tests measured, printed at the end of the pytest run (conftest.py)."""

from __future__ import annotations

FIGURES: list[str] = []


def report(line: str) -> None:
    """Keep `line` for the run's summary (and print it, for `pytest -s`)."""
    FIGURES.append(line)
    print(line)

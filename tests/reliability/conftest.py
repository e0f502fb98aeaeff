"""Prints the reliability figures (schedules, steps, admissions, overlaps; the fault matrix) after the run."""

from __future__ import annotations

import pytest

from .figures import FIGURES


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if FIGURES:
        terminalreporter.section("reliability figures")
        for line in FIGURES:
            terminalreporter.write_line(line)

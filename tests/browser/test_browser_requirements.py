"""When the browser test may skip: only without Chromium, only when told it may, and never under CI."""

from __future__ import annotations

from pathlib import Path

import chromium
import pytest

SKIPPED, FAILED, RUNS = "skipped", "failed", "runs"


@pytest.mark.parametrize(
    ("installed", "optional", "ci", "expected"),
    [
        (True, None, None, RUNS),
        (True, "1", "true", RUNS),
        (False, None, None, FAILED),
        (False, "0", None, FAILED),
        (False, "1", None, SKIPPED),
        (False, "1", "true", FAILED),  # CI must run it, whatever the variable says
    ],
)
def test_require_browser(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    installed: bool,
    optional: str | None,
    ci: str | None,
    expected: str,
) -> None:
    for name in ("chromium", "chromedriver"):
        binary = tmp_path / name
        if installed:
            binary.write_text("")
        monkeypatch.setattr(chromium, name.upper(), binary)
    for variable, value in ((chromium.OPTIONAL_ENV, optional), ("CI", ci)):
        if value is None:
            monkeypatch.delenv(variable, raising=False)
        else:
            monkeypatch.setenv(variable, value)

    outcome, message = RUNS, ""
    try:
        chromium.require_browser()
    except pytest.skip.Exception as skip:
        outcome, message = SKIPPED, str(skip)
    except pytest.fail.Exception as failure:
        outcome, message = FAILED, str(failure)
    assert outcome == expected
    if outcome != RUNS:
        assert "apt-get install chromium chromium-driver" in message
    if outcome == SKIPPED:
        assert f"{chromium.OPTIONAL_ENV}=1" in message

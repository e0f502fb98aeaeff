"""The regression schedules: every schedule the model found a violation with, shrunk and saved under
`schedules/` (`long_run.py --shrink --save`), replays without a violation.

Each file keeps its seed, the profile's options and the world's parameters, and what it broke when it was found
(`found`), so a failure here says which class of the promise came back. They replay with

    python tests/reliability/long_run.py --replay tests/reliability/schedules/<file>.json --verbose
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .long_run import replay

SCHEDULES = sorted((Path(__file__).parent / "schedules").glob("*.json"))
#: schedules of what stays outside the promise (docs/reliability.md, "What a person with rights over pods and
#: TrainJobs can still do"): each must still break it, so the docs' list of limits stays exactly true
OUTSIDE = sorted((Path(__file__).parent / "schedules" / "outside").glob("*.json"))


def test_there_are_regression_schedules() -> None:
    assert SCHEDULES, "tests/reliability/schedules/ holds no schedule"


@pytest.mark.parametrize("path", SCHEDULES, ids=[p.stem for p in SCHEDULES])
def test_a_saved_schedule_keeps_the_promise(path: Path) -> None:
    result = replay(path)
    found = json.loads(path.read_text()).get("found", [])
    assert not result.failed, f"{path.name} (found: {found}):\n{result.describe()}"


@pytest.mark.parametrize("path", OUTSIDE, ids=[p.stem for p in OUTSIDE])
def test_a_schedule_of_what_is_outside_the_promise_still_breaks_it(path: Path) -> None:
    """A person force-deletes a pod Terminating on a lost node, then deletes the TrainJob and opens a namesake:
    the record of the old execution's pods went with the deleted object, so nothing can see the process."""
    result = replay(path)
    assert result.failed, f"{path.name} no longer breaks the promise: move it to schedules/ and the docs' limit"

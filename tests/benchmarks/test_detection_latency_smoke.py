"""The detection latency benchmark at a tiny scale, in the normal suite, so that the script cannot rot.

It runs the real thing (the lab in its own process with its clock probe, each case in a fresh worker, the real
`PodsDrainedTrigger` against the fixed-interval poll) with two removals per case and a short poll interval, and
checks what must hold at any scale: every sample ended `drained`, the trigger was woken by the watch (its first
check and one re-check, with its safety-net re-check an hour away), lab time never ran faster than the clock's
speed, and the results page shows every figure with its ratio. No figure is compared with a time.
"""

from __future__ import annotations

from typing import Any

import pytest

from .detection_latency import BASELINE, CANDIDATE, Config, render_markdown, run

pytestmark = pytest.mark.slow  # about 20 s: a lab process and two worker processes
REPEAT, POLL, SPEED = 2, 0.3, 100.0


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return run(Config(repeat=REPEAT, poll_interval=POLL, speed=SPEED, workdir=tmp_path_factory.mktemp("latency")))


def test_every_removal_is_detected_as_drained(results: dict[str, Any]) -> None:
    assert set(results["cases"]) == {CANDIDATE, BASELINE}
    for case in results["cases"].values():
        assert [s["status"] for s in case["samples"]] == ["drained"] * REPEAT
        assert all(0 <= s["phaseSeconds"] < POLL for s in case["samples"])


def test_the_trigger_is_woken_by_the_watch_and_the_poll_by_its_interval(results: dict[str, Any]) -> None:
    watch, poll = results["cases"][CANDIDATE]["samples"], results["cases"][BASELINE]["samples"]
    assert [s["checks"] for s in watch] == [2] * REPEAT  # the first check, and the one the DELETED event caused
    assert all(s["checks"] >= 2 for s in poll)  # the first check, then one per interval until drained
    # both cases saw the same removal phases (the same seeded draws)
    assert [s["phaseSeconds"] for s in watch] == [s["phaseSeconds"] for s in poll]


def test_lab_time_follows_the_lab_clock(results: dict[str, Any]) -> None:
    for case in results["cases"].values():
        for sample in case["samples"]:
            assert sample["wallSeconds"] > sample["deleteRoundTripSeconds"] > 0
            # the lab clock runs at `speed` at most (it lags when its loop stalls, never leads)
            assert 0 < sample["labSeconds"] <= sample["wallSeconds"] * SPEED * 1.01 + 0.05


def test_the_results_page_shows_each_figure_against_the_baseline(results: dict[str, Any]) -> None:
    page = render_markdown(results, "python tests/benchmarks/detection_latency.py --repeat 2")
    rows = {line.split(" | ")[0]: line for line in page.splitlines() if line.startswith("| `")}
    assert set(rows) == {f"| `{CANDIDATE}`", f"| `{BASELINE}`"}
    assert rows[f"| `{CANDIDATE}`"].count("x)") == 4  # wall median and p95, lab median and p95, each with a ratio
    assert "x)" not in rows[f"| `{BASELINE}`"]
    assert "--repeat 2" in page
    assert "Lab clock at 100x" in page

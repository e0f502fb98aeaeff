"""The slot-seconds benchmark at a tiny scale, in the normal suite, so that the script cannot rot.

It runs the real thing (the lab in its own process with its clock probe; the real `PodsDrainedSensor` under
`dag.test()` in poke, reschedule and deferrable mode, in a worker with an Airflow home and DB of its own) on a
wait of 30 lab seconds at 100x, and checks what must hold at any scale, from Airflow's own records: every
sensor succeeded on its first try; poke holds one slot for the whole wait; reschedule releases the slot between
pokes (one `TaskReschedule` row per release); deferrable holds it for exactly two runs, the poke before deferring
and the resume; the wait lasted the lab time asked; the results page shows every figure with its ratio. No
figure is compared with a time.
"""

from __future__ import annotations

from typing import Any

import pytest

from .slot_seconds import BASELINE, MODES, Config, render_markdown, run

pytestmark = pytest.mark.slow  # about 25 s: a lab process, an Airflow DB migration, four dag.test() runs
WAIT, POKE = 30.0, 30.0


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return run(Config(wait=WAIT, poke_interval=POKE, repeat=1, workdir=tmp_path_factory.mktemp("slots")))


def events(results: dict[str, Any], mode: str) -> list[str]:
    (one,) = results["modes"][mode]["runs"]
    return [e["event"] for e in one["records"]["events"]]


def test_every_mode_succeeds_on_its_first_try(results: dict[str, Any]) -> None:
    assert set(results["modes"]) == set(MODES)
    for mode in MODES:
        (one,) = results["modes"][mode]["runs"]
        assert (one["records"]["state"], one["records"]["tryNumber"], one["dagRunState"]) == ("success", 1, "success")


def test_the_slots_follow_from_each_mode(results: dict[str, Any]) -> None:
    assert events(results, "poke") == ["running", "success"]
    assert events(results, "deferrable") == ["running", "deferred", "running", "success"]
    reschedule = events(results, "reschedule")
    assert reschedule[-2:] == ["running", "success"]
    assert reschedule[:-2] == ["running", "up_for_reschedule"] * (len(reschedule) // 2 - 1)
    assert len(reschedule) >= 4  # at least one release: the wait is longer than one poke interval
    (one,) = results["modes"]["reschedule"]["runs"]
    assert len(one["records"]["reschedules"]) == len(reschedule) // 2 - 1
    for mode in MODES:
        figures = results["modes"][mode]["figures"]
        assert figures["runs"] == events(results, mode).count("running")
        assert 0 < figures["slotSeconds"] <= figures["taskSeconds"] + 1e-6  # slots lie within the task's span


def test_the_wait_lasts_the_lab_time_asked(results: dict[str, Any]) -> None:
    for mode in MODES:
        figures = results["modes"][mode]["figures"]
        # the wait, plus a phase within one poke, plus the lab loop's lag in waking the actor (generous: the
        # machine may be loaded; this checks that the wait is the one asked for, not how fast the lab is)
        assert WAIT <= figures["waitLabSeconds"] < WAIT + POKE + 60


def test_the_results_page_shows_each_figure_against_the_baseline(results: dict[str, Any]) -> None:
    page = render_markdown(results, "python tests/benchmarks/slot_seconds.py --wait 30")
    rows = {line.split(" | ")[0]: line for line in page.splitlines() if line.startswith("| `")}
    assert set(rows) == {f"| `{mode}`" for mode in MODES}
    for mode in MODES:
        assert rows[f"| `{mode}`"].count("x)") == (0 if mode == BASELINE else 3)
    assert "--wait 30" in page
    assert "Lab clock at 100x" in page

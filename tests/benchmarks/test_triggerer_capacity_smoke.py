"""The triggerer capacity benchmark at a tiny scale, in the normal suite, so that the script cannot rot.

It runs the real thing (the lab in its own process, each case in a fresh worker with real PodsDrainedTriggers)
with 4 triggers, and checks what must hold at any scale: every trigger answered its first check and none
ended, the shared case opens one pod watch per namespace plus one node watch while the unshared one opens two
per trigger and the poll none, every safety-net re-check and every poll shows in the counts, and the results
page renders every case and ratio. No figure is compared with a time.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from .triggerer_capacity import Config, find, render_markdown, requests, run

pytestmark = pytest.mark.slow  # about 30 s: a lab process and four worker processes
TRIGGERS, NAMESPACES, WINDOW, RECHECK, POLL = 4, 2, 1.5, 0.5, 0.25


@pytest.fixture(scope="module")
def results() -> dict[str, Any]:
    config = Config(
        triggers=(TRIGGERS,),
        baseline_triggers=(TRIGGERS,),
        namespaces=NAMESPACES,
        window_seconds=WINDOW,
        recheck_interval=RECHECK,
        poll_interval=POLL,
        recheck_probe=0,
    )
    return run(config)


def test_every_case_ran_with_every_trigger_waiting(results: dict[str, Any]) -> None:
    ran = {(r["case"], r["namespaces"]) for r in results["cases"]}
    assert ran == {("shared", 1), ("shared", NAMESPACES), ("unshared", 1), ("poll", 1)}
    for r in results["cases"]:
        assert r["triggers"] == TRIGGERS
        assert r["events"] == []  # every pod stays, so no trigger may end
        assert r["startup"]["checks"] >= TRIGGERS  # each answered its first drain check


def test_watches_are_shared_per_namespace(results: dict[str, Any]) -> None:
    shared, spread = find(results, "shared", TRIGGERS), find(results, "shared", TRIGGERS, "spread")
    unshared, poll = find(results, "unshared", TRIGGERS), find(results, "poll", TRIGGERS)
    assert shared is not None
    assert spread is not None
    assert unshared is not None
    assert poll is not None
    assert shared["watches"]["streams"] == 1 + 1  # pods of the namespace, nodes
    assert spread["watches"]["streams"] == NAMESPACES + 1
    assert shared["watches"]["connections"] == spread["watches"]["connections"] == 1
    assert unshared["watches"]["streams"] == 2 * TRIGGERS
    assert unshared["watches"]["connections"] == TRIGGERS
    assert poll["watches"]["streams"] == 0


def test_rechecks_and_polls_are_counted(results: dict[str, Any]) -> None:
    for r in results["cases"]:
        steady = r["steady"]
        interval = POLL if r["case"] == "poll" else RECHECK
        # each trigger checks at least once more in a window of several intervals (jitter: 10% either way)
        assert steady["checks"] >= TRIGGERS * math.floor(WINDOW / (interval * 1.1) - 1)
        assert steady["checks"] >= TRIGGERS
        # a drain check is a TrainJob get, two pod lists and a node get: nothing else is asked while waiting (a
        # check still in flight at either edge of the window is counted by the meter or by the trigger, not both)
        assert abs(requests(steady) - 4 * steady["checks"]) <= 4 * TRIGGERS
        assert abs(requests(steady, ("get",)) - 2 * steady["checks"]) <= 2 * TRIGGERS
        assert requests(steady, ("watch",)) == 0  # no watch ended or was started again


def test_the_results_page_shows_each_case_against_the_baselines(results: dict[str, Any]) -> None:
    page = render_markdown(results, "python tests/benchmarks/triggerer_capacity.py --triggers 4")
    for case in ("shared", "unshared", "poll"):
        assert f"| `{case}` {TRIGGERS} (1 ns" in page
    assert f"| `shared` {TRIGGERS} ({NAMESPACES} ns" in page
    ratio_rows = [line for line in page.splitlines() if "/ `shared`" in line]
    assert len(ratio_rows) == 2
    # every figure with its ratio (or why there is none)
    assert all(line.count("x)") + line.count("unbounded") + line.count("(both 0)") == 7 for line in ratio_rows)
    assert "--triggers 4" in page


def test_full_collections_are_timed_and_split_out_of_the_lag(results: dict[str, Any]) -> None:
    page = render_markdown(results, "python tests/benchmarks/triggerer_capacity.py --triggers 4")
    table = page.split("#### Full garbage collections", 1)[1].split("####", 1)[0]
    for r in results["cases"]:
        timed = r["fullCollection"]
        before, waiting = timed["beforeTriggers"], timed["triggersWaiting"]
        assert before["objects"] > 0
        assert waiting["objects"] > 0
        assert before["seconds"] > 0
        assert waiting["seconds"] > 0
        for phase in ("startup", "steady"):
            lag = r[phase]["lag"]
            outside = lag["outsideFullCollections"]
            # the samples no full collection overlapped are a subset of all samples, all of them when none ran
            assert outside["samples"] <= lag["samples"]
            assert outside["max"] <= lag["max"]
            if lag["fullCollections"] == 0:
                assert (outside["samples"], outside["max"]) == (lag["samples"], lag["max"])
                assert lag["longestFullCollection"] == 0
    assert table.count(f"| `shared` {TRIGGERS} (") == 2
    assert table.count(f"| `unshared` {TRIGGERS} (") == table.count(f"| `poll` {TRIGGERS} (") == 1

"""The drain check benchmark at a tiny scale, in the normal suite, so that the script cannot rot.

It runs the real thing (the lab in its own process, each case in a fresh worker) on a namespace of a few dozen
pods, and checks what must hold at any scale: every case finds the job's pods, the request counts follow from
the read strategies and the page size, the pinned read moves fewer bytes than the baseline, and the results page
renders every figure with its ratio. No figure is compared with a time.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from .drain_bench import BASELINE, Config, render_markdown, run
from .harness.measure import Measurement

JOB_PODS, NODES, PAGE_SIZE, SIZE = 8, 2, 20, 48
pytestmark = pytest.mark.slow  # about 15 s: a lab process and five worker processes
CASES = ("baseline", "full", "pinned", "pinned-async", "check")


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    config = Config(
        sizes=(SIZE,),
        cases=CASES,
        job_pods=JOB_PODS,
        nodes=NODES,
        repeat=2,
        budget_seconds=0.5,
        page_size=PAGE_SIZE,
        workdir=tmp_path_factory.mktemp("bench"),
    )
    return run(config)


def measurements(results: dict[str, Any]) -> dict[str, Measurement]:
    (size,) = results["sizes"]
    return {name: Measurement.from_json(case["measurement"]) for name, case in size["cases"].items()}


def test_every_case_selects_the_jobs_pods(results: dict[str, Any]) -> None:
    (size,) = results["sizes"]
    selected = {name: case["selected"] for name, case in size["cases"].items()}
    assert set(selected) == set(CASES)
    assert len(selected[BASELINE]) == JOB_PODS
    assert all(names == selected[BASELINE] for names in selected.values())


def test_request_counts_follow_from_the_strategies(results: dict[str, Any]) -> None:
    m = measurements(results)
    assert m["baseline"].traffic.requests == 1  # one unpaged namespace list
    assert m["full"].traffic.requests == math.ceil(SIZE / PAGE_SIZE)  # every page of the namespace
    assert m["pinned"].traffic.requests == m["pinned-async"].traffic.requests == 2  # one list per selector
    assert m["check"].traffic.requests == 1 + 2 + NODES  # the TrainJob, the pinned read, each pod's Node
    assert all(x.traffic_stable for x in m.values())


def test_the_pinned_read_moves_and_holds_less_than_the_baseline(results: dict[str, Any]) -> None:
    m = measurements(results)
    baseline, pinned = m["baseline"], m["pinned"]
    assert pinned.traffic.response_bytes < baseline.traffic.response_bytes
    assert pinned.peak_heap_bytes < baseline.peak_heap_bytes
    assert all(x.cpu_seconds > 0 and x.peak_heap_bytes > 0 for x in m.values())
    # the full read carries the whole namespace, like the baseline, but holds one page of it at a time
    assert m["full"].traffic.response_bytes > baseline.traffic.response_bytes


def test_the_results_page_shows_each_figure_against_the_baseline(results: dict[str, Any]) -> None:
    page = render_markdown(results, "python tests/benchmarks/drain_check.py --pods 48")
    assert f"#### {SIZE} pods in the namespace" in page
    for case in CASES:
        assert f"| `{case}` (" in page
    rows = [line for line in page.splitlines() if line.startswith("| `") and not line.startswith("| `baseline`")]
    assert rows
    assert all(line.count("x)") == 4 for line in rows)  # requests, bytes, CPU and heap each with a ratio
    assert "--pods 48" in page

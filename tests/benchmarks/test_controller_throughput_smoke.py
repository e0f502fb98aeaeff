"""The admission controller throughput benchmark at a tiny scale, in the normal suite, so that the script cannot
rot.

It runs the real controller (in a worker process, against a lab process of its own) on 1 and on 4 pending
Workloads, and checks what must hold at any scale: every Workload was decided, the admitted half had A raised
and its check set Ready and the other half kept Pending with the waiting message (the driver reads that back
through the API), each decision was written once, and the results page renders every case and ratio. No
figure is compared with a time.
"""

from __future__ import annotations

from typing import Any

import pytest

from .controller_throughput import Config, find, render_markdown, run
from .harness.series import request_count

pytestmark = pytest.mark.slow  # about 20 s: two lab processes and two worker processes
WORKLOADS = 4


@pytest.fixture(scope="module")
def results() -> dict[str, Any]:
    return run(Config(workloads=WORKLOADS, cases=("single-admit", "bulk"), timeout=120))


def test_every_workload_is_decided_as_its_pods_say(results: dict[str, Any]) -> None:
    single, bulk = find(results, "single-admit"), find(results, "bulk")
    assert single is not None
    assert bulk is not None
    assert (single["admitted"], single["waiting"]) == (1, 0)
    assert (bulk["admitted"], bulk["waiting"]) == (WORKLOADS // 2, WORKLOADS // 2)
    assert bulk["verified"] == {"ready": WORKLOADS // 2, "waitingMessage": WORKLOADS // 2, "raised": WORKLOADS // 2}
    assert bulk["unexpected"] == {}
    assert bulk["reconciles"] >= WORKLOADS


def test_each_decision_is_written_once(results: dict[str, Any]) -> None:
    bulk = find(results, "bulk")
    assert bulk is not None
    traffic = bulk["traffic"]
    assert request_count(traffic, ("patch",), ("workloads.kueue.x-k8s.io/status",)) == WORKLOADS
    assert request_count(traffic, ("update",), ("trainjobs.trainer.kubeflow.org",)) == WORKLOADS // 2
    assert request_count(traffic, ("list",), ("workloads.kueue.x-k8s.io",)) == 1  # the informer's one list


def test_the_results_page_shows_each_case_and_the_per_workload_ratios(results: dict[str, Any]) -> None:
    page = render_markdown(results, f"python tests/benchmarks/controller_throughput.py --workloads {WORKLOADS}")
    assert "| `single-admit` (1, 4 workers)" in page
    assert f"| `bulk` ({WORKLOADS}, 4 workers)" in page
    ratio_rows = [line for line in page.splitlines() if "per Workload |" in line]
    assert len(ratio_rows) == 4
    assert all("x)" in line for line in ratio_rows)

"""The payload sizes measurement at a tiny scale, in the normal suite, so that the script cannot rot.

It runs the real thing, the package as it is and, as the baseline, the package at git HEAD in a child process, on
a few dozen pods, and checks what must hold at any scale: every payload is measured on both sides, within its
limit on this side, and the page renders every figure with its ratio. No figure is compared with a time.
"""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_dispatch.dispatch import payloads

from .payload_sizes import PAYLOADS, Config, render_markdown, run

pytestmark = pytest.mark.slow  # about 20 s: the baseline child imports Airflow

LIMITS = {
    "wait_reason": payloads.WAIT_REASON_LIMIT,
    "drain_xcom": payloads.DRAIN_XCOM_LIMIT,
    "trigger_event": payloads.TRIGGER_EVENT_LIMIT,
    "trigger_kwargs": payloads.TRIGGER_KWARGS_LIMIT,
    "release_reason": payloads.WAIT_REASON_LIMIT,
    "kueue_message": payloads.KUEUE_MESSAGE_LIMIT,
}


@pytest.fixture(scope="module")
def results() -> dict[str, Any]:
    return run(Config(cases=((60, 12),), baseline_ref="HEAD"))


def test_every_payload_is_measured_on_both_sides_and_within_its_limit(results: dict[str, Any]) -> None:
    (candidate,), (baseline,) = results["candidate"], results["baseline"]
    assert set(candidate["sizes"]) == set(baseline["sizes"]) == {key for key, _ in PAYLOADS} == set(LIMITS)
    for key, size in candidate["sizes"].items():
        assert 0 < size <= LIMITS[key], key
    # what to do first, and its subject: the lost node's remedy (its command is the next line); the benchmark's
    # node names have 31 characters, so the line is a little past `payloads.GLANCE` (the node's state comes last)
    first = candidate["waitReasonFirstLine"]
    assert first.startswith("Confirm gpu-node-")
    assert first.endswith(" is powered off, then taint it out-of-service (Ready=Unknown)")
    assert candidate["waitReasonFirstLineBytes"] <= payloads.GLANCE + 8


def test_the_page_shows_both_sides_of_every_payload(results: dict[str, Any]) -> None:
    page = render_markdown(results, "python tests/benchmarks/payload_sizes.py --cases 60:12 --baseline-ref HEAD")
    assert "| payload | limit | 60 pods on 12 nodes: before | after |" in page
    for _, label in PAYLOADS:
        assert f"| {label} | " in page
    assert "(baseline: the package at `HEAD`)" in page

"""Bounded payloads (dispatch/payloads.py): the one cut, the census of node states, the fingerprint, and every text
and report the shells pass on, at 50,000 pods on 5,000 nodes, within its limit and still saying what it must."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from airflow_provider_dispatch.dispatch import explain, payloads
from airflow_provider_dispatch.dispatch.assessment import DrainReport, remaining_report
from airflow_provider_dispatch.dispatch.blocking import RemainingPod, remaining_pods
from airflow_provider_dispatch.dispatch.errors import PodsRemainError

from .support import NODE_MIX, node, node_name, pod, remaining_across

NOW = datetime(2026, 8, 21, 10, 0, 18, tzinfo=UTC)
REF = "ml/ft-7"
PODS, NODES = 50_000, 5_000
#: every distinct node state `remaining_across` produces
STATES = {
    "Ready=Unknown",
    "Ready=False",
    "Ready=Unknown, out-of-service",
    "gone",
    "Ready=True, out-of-service",
    "not scheduled",
    "Ready=True",
}


@pytest.fixture(scope="module")
def many() -> tuple[RemainingPod, ...]:
    return remaining_across(PODS, NODES)


@pytest.fixture(scope="module")
def report(many: tuple[RemainingPod, ...]) -> DrainReport:
    return remaining_report(REF, many, "123", now=NOW)


def first_by_name(pods: tuple[RemainingPod, ...], count: int) -> list[RemainingPod]:
    return sorted(pods, key=lambda p: p.name)[:count]


# --- the one cut ------------------------------------------------------------------------------------------------


def test_fit_joins_everything_that_fits() -> None:
    assert payloads.fit(["a", "b", "c"], 3, 100, more=payloads.and_more) == ("a, b, c", 3)


def test_fit_keeps_room_for_what_it_left_out_and_never_cuts_inside_an_item() -> None:
    items = [f"item-{i}" for i in range(100)]
    text, shown = payloads.fit(items, 100, 60, more=payloads.and_more)
    assert len(text) <= 60
    assert text == ", ".join(items[:shown]) + f", and {100 - shown} more"
    assert shown == 6
    assert len(", ".join(items[: shown + 1]) + f", and {100 - shown - 1} more") > 60  # one more would not fit


def test_fit_reads_a_lazy_list_only_as_far_as_it_needs() -> None:
    read = 0

    def items() -> Iterator[str]:
        nonlocal read
        for i in range(1_000_000):
            read += 1
            yield f"pod-{i}"

    text, shown = payloads.fit(items(), 1_000_000, 50, more=payloads.and_more)
    assert read < 20
    assert text.endswith(f"and {1_000_000 - shown:,} more")


def test_fit_without_a_note_only_counts_and_an_item_too_long_for_the_room_is_left_out() -> None:
    assert payloads.fit(["x" * 50, "y"], 2, 10, separator=",") == ("", 0)
    assert payloads.fit(["x" * 50], 1, 10, more=payloads.and_more) == ("and 1 more", 0)


def test_cut_keeps_whole_words() -> None:
    assert payloads.cut("short", 10) == "short"
    assert payloads.cut("one two three four", 12) == "one two ..."


# --- at 50,000 pods on 5,000 nodes -------------------------------------------------------------------------------


def test_the_census_counts_every_pod_and_every_node_and_names_each_state(many: tuple[RemainingPod, ...]) -> None:
    whole = payloads.census(many)
    assert (whole.pods, whole.nodes) == (PODS, NODES)
    assert {group.state for group in whole.states} == STATES
    assert whole.states[0].state == "Ready=Unknown"  # the lost nodes first, the Ready ones last
    assert whole.states[-1].state == "Ready=True"
    assert sum(group.pods for group in whole.states) == PODS
    assert whole.line.startswith(f"{PODS:,} pods on {NODES:,} nodes: Ready=Unknown (2 nodes: {node_name(0)}, ")
    assert whole.line.endswith(f"Ready=True ({NODES - len(NODE_MIX):,} nodes)")


def test_the_detail_stays_within_its_limit_and_names_the_count_the_first_pods_and_every_state(
    many: tuple[RemainingPod, ...], report: DrainReport
) -> None:
    assert len(report.detail) <= payloads.DETAIL_LIMIT
    first, census, *hints = report.detail.splitlines()
    assert len(first) <= payloads.FIRST_LINE_ROOM
    shown = first_by_name(many, 3)
    assert first.startswith("remaining pods: " + ", ".join(explain.pod_on_node(p) for p in shown))
    assert first.endswith(" more")
    assert census == payloads.census(many).line
    assert all(state in census for state in STATES)
    assert any(explain.taint_command(node_name(0)) in hint for hint in hints)  # the lost node's remedy
    assert hints[-1].startswith("(")
    assert "`dispatch status`" in hints[-1]


def test_the_report_as_json_stays_within_its_limit_and_counts_everything(
    many: tuple[RemainingPod, ...], report: DrainReport
) -> None:
    body = report.as_dict()
    assert payloads.json_size(body) <= payloads.REPORT_LIMIT
    assert (body["remaining_count"], body["node_count"]) == (PODS, NODES)
    assert {entry["state"] for entry in body["node_states"]} == STATES
    listed = body["remaining"]
    assert 10 <= len(listed) < PODS
    assert [entry["name"] for entry in listed] == [p.name for p in first_by_name(many, len(listed))]
    assert all({"node", "node_state"} <= set(entry) for entry in listed)
    assert body["fingerprint"] == report.fingerprint


def test_the_release_wait_reason_is_headline_first_within_its_limit(many: tuple[RemainingPod, ...]) -> None:
    message = PodsRemainError(REF, many, now=NOW).message
    assert len(message) <= payloads.WAIT_REASON_LIMIT
    first, *lines = message.splitlines()
    assert first == explain.headline(many)
    assert len(first) <= payloads.HEADLINE_ROOM
    said = f"TrainJob {REF} is not admitted: 50,000 pods of the previous execution remain, so it may still run."
    assert any(line.startswith(said) for line in lines[:5]), lines[:5]
    assert first_by_name(many, 1)[0].name in message
    assert payloads.census(many).line in message
    assert f"kubectl taint node {node_name(0)} " in message


def test_the_kueue_message_stays_within_its_limit_and_the_api_limit(many: tuple[RemainingPod, ...]) -> None:
    message = explain.kueue_waiting_message(many)
    assert len(message) <= payloads.KUEUE_MESSAGE_LIMIT <= payloads.KUEUE_MESSAGE_API_LIMIT
    first = first_by_name(many, 1)[0]
    assert message.startswith(explain.headline(many) + "\n")
    assert f"\npods of the previous execution remain: {explain.pod_on_node(first)}, " in message
    assert message.endswith("; " + payloads.census(many).line)
    assert " more; 50,000 pods on 5,000 nodes: " in message


def test_a_few_pods_are_all_named_as_before() -> None:
    """Below the limits nothing is cut: every pod, every explanation, no census line."""
    pods = remaining_pods(
        [pod("b", node="n2", deletion="2026-08-21T10:00:30Z"), pod("a", node="n1")],
        {"n1": node("n1", ready="Unknown"), "n2": node("n2")},
    )
    bounded = explain.remaining_detail(pods, now=NOW, limit=payloads.DETAIL_LIMIT)
    assert bounded == explain.remaining_detail(sorted(pods, key=lambda p: p.name), now=NOW)
    assert bounded.splitlines()[0] == "remaining pods: a on n1 (Ready=Unknown), b on n2 (Ready=True)"
    body = remaining_report(REF, pods, "1", now=NOW).as_dict()
    assert [entry["name"] for entry in body["remaining"]] == ["a", "b"]
    assert body["remaining_count"] == 2


def test_the_fingerprint_is_the_set_whatever_its_order_and_changes_with_a_node_state() -> None:
    before = remaining_across(40, 8)
    assert payloads.remaining_fingerprint(before) == payloads.remaining_fingerprint(reversed(before))
    assert payloads.remaining_fingerprint(before) == payloads.fingerprint(payloads.summary_entry(p) for p in before)
    assert payloads.remaining_fingerprint(before) != payloads.remaining_fingerprint(before[1:])
    objects = [pod(p.name, node=p.node.name) for p in before]
    lookups = {name: node(name) for name in {p.node.name for p in before if p.node.name}}
    assert payloads.remaining_fingerprint(remaining_pods(objects, lookups)) != payloads.remaining_fingerprint(before)


def test_the_json_form_is_ascii_so_its_characters_are_its_bytes(report: DrainReport) -> None:
    encoded = json.dumps(report.as_dict(), separators=(",", ":"))
    assert len(encoded.encode()) == len(encoded)

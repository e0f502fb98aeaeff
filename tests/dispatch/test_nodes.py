"""Node states and cessation (DESIGN §4, §7): ceased = gone OR (out-of-service AND Ready != True)."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_dispatch.dispatch.nodes import NodeRead, Presence, Readiness, node_state
from airflow_provider_dispatch.dispatch.vocabulary import TAINT_OUT_OF_SERVICE

from .support import OUT_OF_SERVICE, node


@pytest.mark.parametrize(
    ("ready", "taints", "label", "ceased"),
    [
        ("True", [], "Ready=True", False),
        ("False", [], "Ready=False", False),
        ("Unknown", [], "Ready=Unknown", False),
        (None, [], "Ready=Unknown", False),
        ("True", [OUT_OF_SERVICE], "Ready=True, out-of-service", False),
        ("False", [OUT_OF_SERVICE], "Ready=False, out-of-service", True),
        ("Unknown", [OUT_OF_SERVICE], "Ready=Unknown, out-of-service", True),
        (None, [OUT_OF_SERVICE], "Ready=Unknown, out-of-service", True),
    ],
)
def test_present_node(ready: str | None, taints: list[dict[str, Any]], label: str, ceased: bool) -> None:
    state = node_state("n1", node("n1", ready=ready, taints=taints))
    assert state.presence is Presence.PRESENT
    assert state.label == label
    assert state.ceased is ceased
    assert state.ready_reported is (ready is not None)


@pytest.mark.parametrize(
    "taint",
    [
        {"key": TAINT_OUT_OF_SERVICE, "effect": "NoSchedule"},
        {"key": TAINT_OUT_OF_SERVICE, "value": "anything", "effect": "NoExecute"},
        {"key": TAINT_OUT_OF_SERVICE},
    ],
)
def test_out_of_service_taint_any_value_any_effect(taint: dict[str, Any]) -> None:
    state = node_state("n1", node("n1", ready="Unknown", taints=[taint]))
    assert state.out_of_service
    assert state.ceased


@pytest.mark.parametrize(
    "taint",
    [
        {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"},
        {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"},
        {"key": "example.com/out-of-service", "effect": "NoExecute"},
        {"value": TAINT_OUT_OF_SERVICE},
    ],
)
def test_other_taints_are_not_proof(taint: dict[str, Any]) -> None:
    state = node_state("n1", node("n1", ready="Unknown", taints=[taint]))
    assert not state.out_of_service
    assert not state.ceased


@pytest.mark.parametrize(
    ("node_name", "lookup", "presence", "label", "ceased"),
    [
        ("n1", NodeRead.GONE, Presence.GONE, "gone", True),
        ("n1", NodeRead.NOT_READABLE, Presence.NOT_READABLE, "not readable", False),
        ("n1", None, Presence.NOT_READABLE, "not readable", False),
        (None, None, Presence.UNSCHEDULED, "not scheduled", True),
        ("", NodeRead.NOT_READABLE, Presence.UNSCHEDULED, "not scheduled", True),
    ],
)
def test_absent_unreadable_unscheduled(
    node_name: str | None, lookup: NodeRead | None, presence: Presence, label: str, ceased: bool
) -> None:
    state = node_state(node_name, lookup)
    assert (state.presence, state.label, state.ceased) == (presence, label, ceased)


@pytest.mark.parametrize("weird", ["", "true", "Maybe", None, 1])
def test_unexpected_ready_status_reads_unknown(weird: object) -> None:
    obj = {"metadata": {"name": "n1"}, "status": {"conditions": [{"type": "Ready", "status": weird}]}}
    state = node_state("n1", obj)
    assert state.ready is Readiness.UNKNOWN
    assert not state.ceased


def test_malformed_node_is_never_ceased() -> None:
    state = node_state("n1", {"spec": {"taints": "x"}, "status": {"conditions": "y"}})
    assert state.label == "Ready=Unknown"
    assert not state.ceased


def test_as_dict_is_plain() -> None:
    state = node_state("n1", node("n1", ready="False", taints=[OUT_OF_SERVICE]))
    assert state.as_dict() == {
        "name": "n1",
        "state": "Ready=False, out-of-service",
        "ready": "False",
        "out_of_service": True,
        "ceased": True,
    }

"""The node-fencing rule as pure functions (dispatch/fencing.py, anchors §8.1): the record, its parsing, and
which vanished pods block, over every node state of DESIGN §7."""

from __future__ import annotations

import json
from typing import Any

import pytest

from airflow_provider_dispatch.dispatch import vocabulary as v
from airflow_provider_dispatch.dispatch.admission import admission_body, hold_body
from airflow_provider_dispatch.dispatch.assessment import State, assess, drain_report
from airflow_provider_dispatch.dispatch.blocking import Blocking
from airflow_provider_dispatch.dispatch.errors import NotManagedError
from airflow_provider_dispatch.dispatch.evidence import HoldEvidence
from airflow_provider_dispatch.dispatch.fencing import (
    MAX_RECORDED_NAMES,
    UNNAMED,
    ExecutionPods,
    blocking_pods,
    nodes_to_check,
    record,
    recorded,
    vanished_pods,
)
from airflow_provider_dispatch.dispatch.nodes import RETURN_MARGIN_SECONDS, NodeLookup, NodeRead
from airflow_provider_dispatch.dispatch.selection import Selection
from airflow_provider_dispatch.dispatch.vocabulary import parse_time

from .support import A_DAY, NS, OUT_OF_SERVICE, evidence, jobset, node, pod, runtime, trainjob

UNREACHABLE = {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}

#: node state -> (lookup, does a pod that vanished there still block?)
NODE_STATES: dict[str, tuple[NodeLookup, bool]] = {
    "Ready=True": (node("n1"), False),
    # back from a partition: the kubelet may not have stopped what was deleted while it was away (fencing.py)
    "Ready=True, just returned": (node("n1", ready_for=0), True),
    "Ready=True, returned within grace and margin": (node("n1", ready_for=30 + int(RETURN_MARGIN_SECONDS) - 1), True),
    "Ready=True, returned longer than grace and margin": (node("n1", ready_for=30 + int(RETURN_MARGIN_SECONDS)), False),
    "Ready=True, no heartbeat times": (node("n1", ready_for=None), True),
    "Ready=True, out-of-service": (node("n1", taints=[OUT_OF_SERVICE]), False),
    "Ready=False": (node("n1", ready="False"), True),
    "Ready=Unknown": (node("n1", ready="Unknown", taints=[UNREACHABLE]), True),
    "no Ready condition": (node("n1", ready=None), True),
    "Ready=Unknown, out-of-service": (node("n1", ready="Unknown", taints=[OUT_OF_SERVICE]), False),
    "Ready=False, out-of-service": (node("n1", ready="False", taints=[OUT_OF_SERVICE]), False),
    "gone": (NodeRead.GONE, False),
    "not readable": (NodeRead.NOT_READABLE, True),
}


def held_with(execution_pods: ExecutionPods | None, admission: str = "1") -> dict[str, Any]:
    obj = trainjob(admission=admission)
    if execution_pods is not None:
        obj["metadata"].setdefault("annotations", {})[v.ANNOTATION_EXECUTION_PODS] = execution_pods.to_annotation()
    return obj


@pytest.mark.parametrize("state", sorted(NODE_STATES))
def test_a_recorded_pod_that_vanished_blocks_exactly_while_its_node_did_not_confirm(state: str) -> None:
    lookup, blocks = NODE_STATES[state]
    execution_pods = ExecutionPods(1, {"n1": ("p-0",)})
    found = vanished_pods(execution_pods, NS, [], (), {"n1": lookup})
    assert bool(found) is blocks
    if blocks:
        (vanished,) = found
        assert (vanished.name, vanished.node.name, vanished.blocking) == ("p-0", "n1", Blocking.VANISHED)
        assert not vanished.ceased


@pytest.mark.parametrize("state", sorted(NODE_STATES))
def test_a_recorded_pod_still_listed_is_judged_as_any_pod(state: str) -> None:
    lookup, _ = NODE_STATES[state]
    listed = [pod("p-0", deletion="2026-12-03T10:00:00Z")]
    remaining = blocking_pods(listed, {"n1": lookup}, ExecutionPods(1, {"n1": ("p-0",)}), NS)
    assert [(p.name, p.blocking) for p in remaining] == [("p-0", Blocking.NOT_FINISHED)]


@pytest.mark.parametrize(
    ("grace", "ready_for", "blocks"), [(600, 659, True), (600, 660, False), (None, 89, True), (None, 90, False)]
)
def test_a_returned_node_confirms_after_the_recorded_grace_and_the_margin(
    grace: int | None, ready_for: int, blocks: bool
) -> None:
    """The grace the record kept for the node counts (the default 30 s for a record without one): a node that came
    back is trusted only once its kubelet has reported Ready for longer than that plus the relist margin."""
    execution_pods = ExecutionPods(1, {"n1": ("p-0",)}, grace={} if grace is None else {"n1": grace})
    assert recorded(held_with(execution_pods), 1, "ml/ft-7") == execution_pods
    found = vanished_pods(execution_pods, NS, [], (), {"n1": node("n1", ready_for=ready_for)})
    assert bool(found) is blocks
    if blocks:
        assert found[0].deletion_grace_period_seconds == (grace or 30)


@pytest.mark.parametrize(
    ("recorded_for", "now_for", "blocks"),
    [
        (0, 0, False),  # Ready throughout since the record (same transition): confirmed at once, however fresh
        (A_DAY, A_DAY, False),
        (A_DAY, 0, True),  # the transition moved: the node went away and came back since the record
        (None, 0, True),  # not Ready when recorded (or an older record): the grace and the margin count
    ],
)
def test_a_node_ready_throughout_since_the_record_confirms_at_once(
    recorded_for: int | None, now_for: int, blocks: bool
) -> None:
    """The record keeps the Ready transition of each node Ready then; the same transition now means the node
    never left, so its kubelet saw each deletion as it happened (fencing.py)."""
    pods = [pod("p-0", node="n1", uid="u-0")]
    lookup: NodeLookup = node("n1", ready="Unknown") if recorded_for is None else node("n1", ready_for=recorded_for)
    made = record(1, pods, nodes={"n1": lookup})
    assert ("n1" in made.ready) is (recorded_for is not None)
    assert recorded(held_with(made), 1, "ml/ft-7") == made
    found = vanished_pods(made, NS, [], (), {"n1": node("n1", ready_for=now_for)})
    assert bool(found) is blocks


def test_a_node_never_read_is_not_confirmation() -> None:
    assert [p.node.label for p in vanished_pods(ExecutionPods(1, {"n1": ("p-0",)}), NS, [], (), {})] == ["not readable"]


def test_the_record_keeps_the_pods_that_may_run_by_node() -> None:
    pods = [
        pod("b", node="n2", uid="u-b"),
        pod("a", node="n2", uid="u-a", deletion="2026-12-03T10:00:00Z"),
        pod("c", node="n1", uid="u-c", phase="Pending"),
        pod("done", node="n1", phase="Succeeded"),
        pod("failed", node="n1", phase="Failed"),
        pod("unscheduled", node=None, uid="u-u", phase="Pending"),
    ]
    pods[0]["spec"]["terminationGracePeriodSeconds"] = 600  # the longest grace on n2 is kept for n2
    pods[1]["metadata"]["deletionGracePeriodSeconds"] = 5
    pods[4]["spec"]["terminationGracePeriodSeconds"] = 3600  # finished: not recorded, its grace neither
    since = parse_time("2026-12-03T10:00:00Z")
    made = record(3, pods, since=since)
    uids = {"a": "u-a", "b": "u-b", "c": "u-c", "unscheduled": "u-u"}
    assert made == ExecutionPods(
        3,
        {"n1": ("c",), "n2": ("a", "b")},
        uids=uids,
        unscheduled=("unscheduled",),
        since=since,
        grace={"n1": 30, "n2": 600},
    )
    assert json.loads(made.to_annotation()) == {
        "admission": 3,
        "nodes": {"n1": ["c"], "n2": ["a", "b"]},
        "uids": uids,
        "unscheduled": ["unscheduled"],
        "since": "2026-12-03T10:00:00Z",
        "grace": {"n1": 30, "n2": 600},
    }
    assert recorded(held_with(made, admission="3"), 3, "ml/ft-7") == made


def test_a_record_too_large_keeps_the_nodes_without_names() -> None:
    pods = [pod(f"p-{i}", node=f"n{i % 3}") for i in range(MAX_RECORDED_NAMES + 1)]
    made = record(1, pods)
    assert made.nodes == {"n0": (), "n1": (), "n2": ()}
    assert len(made.to_annotation()) < 100
    lost = {"n0": node("n0", ready="Unknown"), "n1": node("n1", ready="Unknown"), "n2": node("n2")}
    # on n1 a listed pod blocks already; on n0 nothing listed does, so the unnamed entry stands for its pods
    listed = [pod("p-1", node="n1")]
    remaining = blocking_pods(listed, lost, made, NS)
    assert [(p.name, p.node.name) for p in remaining] == [("p-1", "n1"), (UNNAMED, "n0")]


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        ("{", "not JSON"),
        ('{"nodes": {}}', "no integer admission"),
        ('{"admission": true, "nodes": {}}', "no integer admission"),
        ('{"admission": 1, "nodes": {"n1": "p"}}', "nodes is not a map"),
        ('{"admission": 1, "nodes": [1]}', "nodes is not a map"),
        ('{"admission": 1, "nodes": {}, "grace": {"n1": -1}}', "grace is not a map"),
        ('{"admission": 1, "nodes": {}, "grace": {"n1": "30"}}', "grace is not a map"),
        ('{"admission": 1, "nodes": {}, "ready": {"n1": 5}}', "ready is not a map"),
    ],
)
def test_a_malformed_record_is_refused_with_what_to_do(raw: str, why: str) -> None:
    obj = trainjob(admission="1")
    obj["metadata"].setdefault("annotations", {})[v.ANNOTATION_EXECUTION_PODS] = raw
    with pytest.raises(NotManagedError) as refused:
        recorded(obj, 1, "ml/ft-7")
    assert why in str(refused.value)
    assert "remove the annotation" in str(refused.value)


def test_a_record_of_another_execution_is_not_consulted() -> None:
    assert recorded(held_with(ExecutionPods(1, {"n1": ("p-0",)}), admission="2"), 2, "ml/ft-7") is None
    assert recorded(trainjob(admission="1"), 1, "ml/ft-7") is None
    assert recorded(held_with(ExecutionPods(1, {"n1": ("p-0",)})), 1, "ml/ft-7") == ExecutionPods(1, {"n1": ("p-0",)})


def test_the_nodes_to_check_are_those_where_a_recorded_pod_is_not_listed() -> None:
    execution_pods = ExecutionPods(1, {"n1": ("p-0",), "n2": ("p-1",), "n3": ()})
    listed = [pod("p-0", node="n1", deletion="2026-12-03T10:00:00Z"), pod("other", node="n4")]
    assert nodes_to_check(listed, execution_pods) == ("n1", "n4", "n2", "n3")
    assert nodes_to_check(listed, None) == ("n1", "n4")


def test_hold_writes_the_record_and_admission_drops_it() -> None:
    running = trainjob(admission="1", suspend=False)
    body = hold_body(running, ExecutionPods(1, {"n1": ("p-0",)}).to_annotation())
    assert body["spec"]["suspend"] is True
    assert v.ANNOTATION_EXECUTION_PODS in body["metadata"]["annotations"]
    assert body["metadata"]["annotations"][v.ANNOTATION_ADMISSION] == "1"
    admitted, execution = admission_body(body, runtime())
    assert execution.admission == 2
    assert v.ANNOTATION_EXECUTION_PODS not in admitted["metadata"]["annotations"]


def test_assess_and_the_drain_report_see_the_vanished_pod() -> None:
    execution_pods = ExecutionPods(1, {"n1": ("p-0",)})
    obj = held_with(execution_pods)
    lost = {"n1": node("n1", ready="Unknown", taints=[UNREACHABLE])}
    status = assess(obj, evidence(jobset(), obj, execution_pods=execution_pods), [], lost)
    assert status.state is State.WAITING
    assert [p.name for p in status.remaining] == ["p-0"]
    assert "p-0 on n1 (Ready=Unknown)" in status.detail
    assert "deleted from the API" in status.detail
    # without the record nothing vanished can be seen, and the hold counts as not observed: no record, no admission
    unrecorded = assess(obj, HoldEvidence(jobset(), record=None), [], lost)
    assert (unrecorded.state, unrecorded.remaining, unrecorded.hold_observed) == (State.WAITING, (), False)
    selection = Selection(NS, "ft-7", "job-1", "s1")
    report = drain_report("ml/ft-7", selection, [], lost, "5", execution_pods=execution_pods)
    assert not report.drained
    assert not report.ceased
    assert drain_report("ml/ft-7", selection, [], lost, "5").drained


def test_a_vanished_pod_on_a_node_not_readable_asks_for_the_node_role_only() -> None:
    obj = held_with(ExecutionPods(1, {"n1": ("p-0",)}))
    status = assess(
        obj, evidence(jobset(), obj, execution_pods=recorded(obj, 1, "ml/ft-7")), [], {"n1": NodeRead.NOT_READABLE}
    )
    assert "p-0 on n1 (not readable)" in status.detail
    assert "grant get and list on nodes" in status.detail
    assert "must go by" not in status.detail

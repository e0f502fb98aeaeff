"""Cause texts and what would unblock them (DESIGN §7): exact strings for the key cases."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime
from typing import Any

import pytest

from airflow_provider_dispatch.dispatch import explain
from airflow_provider_dispatch.dispatch.blocking import RemainingPod, remaining_pods
from airflow_provider_dispatch.dispatch.errors import PodsRemainError
from airflow_provider_dispatch.dispatch.fencing import ExecutionPods, vanished_pods
from airflow_provider_dispatch.dispatch.nodes import NodeLookup, NodeRead
from airflow_provider_dispatch.dispatch.vocabulary import CONDITION_KUEUE_FAILURE_RECOVERY

from .support import OUT_OF_SERVICE, condition, node, pod

DEADLINE = "2026-08-21T10:00:30Z"
NOW = datetime(2026, 8, 21, 10, 0, 18, tzinfo=UTC)


def one(subject: dict[str, Any], lookup: NodeLookup | None) -> tuple[RemainingPod, ...]:
    node_name = subject["spec"].get("nodeName")
    return remaining_pods([subject], {} if lookup is None else {node_name: lookup})


def test_remaining_line_lists_every_state() -> None:
    pods = [
        pod("a", node="n1"),
        pod("b", node="n2"),
        pod("c", node="n3"),
        pod("d", node="n4"),
        pod("e", node=None),
    ]
    nodes: dict[str, NodeLookup] = {
        "n1": node("n1", ready="True"),
        "n2": node("n2", ready="Unknown", taints=[OUT_OF_SERVICE]),
        "n3": NodeRead.GONE,
        "n4": NodeRead.NOT_READABLE,
    }
    assert explain.remaining_line(remaining_pods(pods, nodes)) == (
        "remaining pods: a on n1 (Ready=True), b on n2 (Ready=Unknown, out-of-service), c on n3 (gone), "
        "d on n4 (not readable), e on no node (not scheduled)"
    )


def test_lost_node_gives_the_taint_command_and_the_warnings() -> None:
    (hint,) = explain.unblock_hints(
        one(pod("ft-7-node-0-0", node="n2", deletion=DEADLINE), node("n2", ready="Unknown"))
    )
    assert hint == (
        "Node n2 is not Ready (Ready=Unknown): its kubelet cannot confirm that pod ft-7-node-0-0 stopped, so "
        "it stays until the node is deleted or tainted out-of-service after its shutdown is confirmed. First "
        "confirm that n2 is shut down (powered off), then run "
        "`kubectl taint node n2 node.kubernetes.io/out-of-service=nodeshutdown:NoExecute`; remove the taint "
        "once the node is repaired or deleted (`kubectl taint node n2 node.kubernetes.io/out-of-service-`). "
        "Deleting the pod object would not stop its processes."
    )


def test_graceful_termination_on_a_ready_node_gives_the_deadline() -> None:
    (hint,) = explain.unblock_hints(one(pod("p", deletion=DEADLINE), node("n1")), now=NOW)
    assert hint == (
        "Pod p on node n1 (Ready=True) is terminating: it goes when the kubelet confirms termination, at "
        "most the grace period: by 2026-08-21T10:00:30Z (in 12s)."
    )


def test_deadline_passed_says_so() -> None:
    later = datetime(2026, 8, 21, 10, 1, 0, tzinfo=UTC)
    (hint,) = explain.unblock_hints(one(pod("p", deletion=DEADLINE), node("n1")), now=later)
    assert hint.endswith("by 2026-08-21T10:00:30Z (30s ago, and the kubelet has not confirmed yet).")


def test_deadline_without_clock() -> None:
    (hint,) = explain.unblock_hints(one(pod("p", deletion=DEADLINE), node("n1")))
    assert hint.endswith("at most the grace period: by 2026-08-21T10:00:30Z.")


def test_taint_on_a_ready_node_is_not_proof() -> None:
    hints = explain.unblock_hints(one(pod("p", deletion=DEADLINE), node("n1", taints=[OUT_OF_SERVICE])), now=NOW)
    assert hints[0] == (
        "Node n1 carries the node.kubernetes.io/out-of-service taint but is Ready=True: the taint is not "
        "proof that pod p stopped, since the node's kubelet is alive (PodGC ignores the taint on a Ready "
        "node). If the node was tainted by mistake, remove the taint (`kubectl taint node n1 "
        "node.kubernetes.io/out-of-service-`)."
    )
    assert hints[1].startswith("Pod p on node n1 (Ready=True) is terminating")


def test_not_readable_asks_for_node_permissions() -> None:
    (hint,) = explain.unblock_hints(one(pod("p"), NodeRead.NOT_READABLE))
    assert hint == (
        "Node n1 is not readable with these credentials, so cessation of pod p cannot be proven: grant get "
        "and list on nodes (a ClusterRole) to the identity dispatch uses. Until then the pod must go by "
        "itself."
    )


def test_ceased_node_says_podgc_finishes_it() -> None:
    (hint,) = explain.unblock_hints(
        one(pod("p", deletion=DEADLINE), node("n1", ready="False", taints=[OUT_OF_SERVICE]))
    )
    assert hint.startswith("Node n1 is out-of-service and Ready=False: the processes of pod p are proven gone")


def test_kueue_failed_pod_explains_why_failed_still_blocks() -> None:
    subject = pod("p", phase="Failed", conditions=[condition(CONDITION_KUEUE_FAILURE_RECOVERY)])
    hints = explain.unblock_hints(one(subject, node("n1", ready="Unknown")))
    assert hints[0] == (
        "Pod p was marked Failed by Kueue's failure recovery without proof that its containers stopped, so "
        "it blocks until node n1 is ceased."
    )
    assert "out-of-service=nodeshutdown:NoExecute" in hints[1]


def test_pods_on_one_node_are_grouped() -> None:
    pods = [pod("a", node="n2"), pod("b", node="n2")]
    (hint,) = explain.unblock_hints(remaining_pods(pods, {"n2": node("n2", ready="False")}))
    assert "cannot confirm that pods a, b stopped, so they stay" in hint
    assert "Deleting the pod objects would not stop their processes." in hint


LOOKUPS: list[NodeLookup | None] = [
    node("n1", ready=r, taints=t)
    for r, t in itertools.product(["True", "False", "Unknown", None], [[], [OUT_OF_SERVICE]])
] + [NodeRead.GONE, NodeRead.NOT_READABLE, None]


@pytest.mark.parametrize("lookup", LOOKUPS)
@pytest.mark.parametrize("deletion", [None, DEADLINE])
def test_never_suggests_force_deletion(lookup: NodeLookup | None, deletion: str | None) -> None:
    text = " ".join(explain.unblock_hints(one(pod("p", deletion=deletion), lookup), now=NOW))
    assert text
    for forbidden in ("--force", "grace-period", "force-delete", "force delete", "kubectl delete"):
        assert forbidden not in text


def test_kueue_waiting_message() -> None:
    pods = remaining_pods([pod("b", node=None), pod("a", node="n1")], {"n1": node("n1", ready="Unknown")})
    # what to do first (the lost node's remedy, command, permission, runbook), then the pods that remain
    lines = explain.kueue_waiting_message(pods).splitlines()
    assert lines[0] == "Confirm n1 is powered off, then taint it out-of-service (Ready=Unknown)"
    assert lines[1] == "kubectl taint node n1 node.kubernetes.io/out-of-service=nodeshutdown:NoExecute"
    assert lines[2].startswith("Needs permission to patch nodes. ")
    assert lines[3] == "1 more pod on no node: see below."
    assert lines[4:] == ["pods of the previous execution remain: a on n1 (Ready=Unknown), b on no node (not scheduled)"]


def test_kueue_waiting_message_fits_its_limit_with_the_count_and_every_node_state() -> None:
    pods = remaining_pods(
        [pod(f"pod-{i:04d}", node="n1" if i else "n2") for i in range(40)],
        {"n1": node("n1"), "n2": node("n2", ready="Unknown")},
    )
    text = explain.kueue_waiting_message(pods, limit=900)  # the first line and remedy take about 500
    assert len(text) <= 900
    assert text.startswith("Confirm n2 is powered off, then taint it out-of-service (Ready=Unknown)\n")
    assert "\npods of the previous execution remain: pod-0000 on n2 (Ready=Unknown), " in text
    shown = text.count(" on n")
    assert text.endswith(
        f", and {40 - shown} more; 40 pods on 2 nodes: Ready=Unknown (1 node: n2), Ready=True (1 node: n1)"
    )


def test_admission_check_line() -> None:
    assert explain.admission_check_line("dispatch-drained", "Pending", "waiting for pods") == (
        "admission check dispatch-drained Pending: waiting for pods"
    )
    assert explain.admission_check_line("dispatch-drained", "Pending", "") == "admission check dispatch-drained Pending"


def test_pods_remain_error_names_pods_nodes_and_consequence() -> None:
    remaining = one(pod("ft-7-node-0-0", node="n2", deletion=DEADLINE), node("n2", ready="Unknown"))
    error = PodsRemainError("ml/ft-7", remaining, now=NOW)
    message = str(error)
    lines = message.splitlines()
    # what to do first, as every wait reason: the node, its state and the remedy, then its command, the
    # permission it needs and the runbook section
    assert lines[0] == explain.headline(remaining)
    assert lines[0] == "Confirm n2 is powered off, then taint it out-of-service (Ready=Unknown)"
    assert lines[1] == "kubectl taint node n2 node.kubernetes.io/out-of-service=nodeshutdown:NoExecute"
    assert lines[2] == (
        "Needs permission to patch nodes. If the machine is gone for good, deleting its Node (`kubectl delete node "
        "n2`, which needs permission to delete nodes) also ends the wait. Never force-delete the pods. Runbook: "
        "docs/runbook.md#confirm-the-shutdown"
    )
    # then what it means for the TrainJob
    assert lines[3] == (
        "TrainJob ml/ft-7 is not admitted: 1 pod of the previous execution remains, so it may still run. The hold "
        "stays in force."
    )
    # then the drain report's detail, line by line (the same explanation as the sensor's)
    assert lines[4:] == explain.remaining_detail(remaining, now=NOW).splitlines()
    assert lines[4] == "remaining pods: ft-7-node-0-0 on n2 (Ready=Unknown)"
    assert lines[5].startswith("Node n2 is not Ready")
    assert error.reason.text() == message
    assert error.ref == "ml/ft-7"
    assert error.remaining == remaining
    assert error.retryable
    assert not error.ceased


def test_running_pod_not_being_deleted() -> None:
    (hint,) = explain.unblock_hints(one(pod("p"), node("n1")))
    assert hint == (
        "Pod p on node n1 (Ready=True) is running and not being deleted: it goes when it finishes or its "
        "controller deletes it (the Job controller deletes the pods of a suspended Job: check that the "
        "TrainJob's Jobs are suspended)."
    )


def test_never_scheduled_pod() -> None:
    (hint,) = explain.unblock_hints(one(pod("p", node=None, phase="Pending"), None))
    assert hint == (
        "Pod p was never scheduled: it runs nothing, but could still be bound to a node, so it blocks until "
        "deleted (the Job controller deletes the pods of a suspended Job)."
    )


def test_a_pod_deleted_while_its_node_was_away_waits_for_the_node_to_be_back_long_enough() -> None:
    """The node is Ready again but its kubelet may not have stopped the pod yet (fencing.py): the text says how
    long it must have reported Ready and for how long it has, never that the pod runs unattended, and the
    headline's remedy is to wait."""
    returned = node("n1", ready_for=12)
    pods = vanished_pods(ExecutionPods(1, {"n1": ("p-0",)}, grace={"n1": 45}), "ml", [], (), {"n1": returned})
    (hint,) = explain.unblock_hints(pods, now=NOW)
    assert hint == (
        "Pod p-0 of the previous execution was deleted from the API, and node n1 has been Ready only briefly (12s "
        "so far, by its kubelet's own clock). A node back from a partition stops a pod deleted while it was away "
        "only once its kubelet relists its pods, within the pod's grace period (45s), so it blocks until the "
        "kubelet has reported Ready for 105s (a kubelet reports every 5 minutes while nothing changes). Nothing "
        "to do but wait."
    )
    assert explain.urgent(pods) == (
        "Waiting until n1 has been Ready 105s: 1 pod deleted while away may still run",
        (
            "Nothing to do but wait: its kubelet stops it once it relists its pods. Runbook: "
            "docs/runbook.md#never-force-delete",
        ),
    )


def test_a_recorded_grace_of_zero_is_explained_as_the_rule_counts_it() -> None:
    """A pod whose spec sets `terminationGracePeriodSeconds: 0` is recorded with grace 0: the rule then waits the
    margin alone (60 s), and the text says so rather than the API's default grace."""
    pods = vanished_pods(
        ExecutionPods(1, {"n1": ("p-0",)}, grace={"n1": 0}), "ml", [], (), {"n1": node("n1", ready_for=12)}
    )
    (hint,) = explain.unblock_hints(pods, now=NOW)
    assert "within the pod's grace period (0s)" in hint
    assert "has reported Ready for 60s" in hint

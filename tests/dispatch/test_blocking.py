"""Which selected pods remain (DESIGN §3.4), over every combination of phase, deletion, conditions and node.

The oracle below restates the rule from the design in the plainest terms; the explicit rows after it pin the
cases the design names.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from airflow_provider_dispatch.dispatch.blocking import Blocking, nodes_to_read, remaining_pods
from airflow_provider_dispatch.dispatch.nodes import NodeLookup, NodeRead
from airflow_provider_dispatch.dispatch.vocabulary import (
    CONDITION_DISRUPTION_TARGET,
    CONDITION_KUEUE_FAILURE_RECOVERY,
)

from .support import OUT_OF_SERVICE, condition, node, pod

PHASES = ["Pending", "Running", "Succeeded", "Failed", "Unknown", None]
DELETIONS = [None, "2026-08-21T10:00:30Z"]
CONDITION_SETS: dict[str, list[dict[str, Any]]] = {
    "none": [],
    "kueue-failure-recovery": [condition(CONDITION_KUEUE_FAILURE_RECOVERY, "True", "KueueForcefullyDeleted")],
    "kueue-failure-recovery-false": [condition(CONDITION_KUEUE_FAILURE_RECOVERY, "False")],
    "podgc": [condition(CONDITION_DISRUPTION_TARGET, "True", "DeletionByPodGC", "PodGC: node no longer exists")],
}
# name -> (pod's nodeName, what the driver learnt about that node, is it ceased by DESIGN §4)
NODE_CASES: dict[str, tuple[str | None, NodeLookup | None, bool]] = {
    "ready": ("n1", node("n1", ready="True"), False),
    "not-ready": ("n1", node("n1", ready="False"), False),
    "unknown": ("n1", node("n1", ready="Unknown"), False),
    "no-ready-condition": ("n1", node("n1", ready=None), False),
    "ready+oos": ("n1", node("n1", ready="True", taints=[OUT_OF_SERVICE]), False),
    "not-ready+oos": ("n1", node("n1", ready="False", taints=[OUT_OF_SERVICE]), True),
    "unknown+oos": ("n1", node("n1", ready="Unknown", taints=[OUT_OF_SERVICE]), True),
    "no-ready-condition+oos": ("n1", node("n1", ready=None, taints=[OUT_OF_SERVICE]), True),
    "gone": ("n1", NodeRead.GONE, True),
    "not-readable": ("n1", NodeRead.NOT_READABLE, False),
    "never-read": ("n1", None, False),
    "unscheduled": (None, None, True),
}


def oracle(phase: str | None, conditions: str, node_ceased: bool) -> bool:
    """DESIGN §3.4: Succeeded/Failed do not block, except Failed by Kueue failure recovery until ceased."""
    if phase not in ("Succeeded", "Failed"):
        return True
    return phase == "Failed" and conditions == "kueue-failure-recovery" and not node_ceased


@pytest.mark.parametrize(
    ("phase", "deletion", "conditions", "node_case"),
    list(itertools.product(PHASES, DELETIONS, CONDITION_SETS, NODE_CASES)),
)
def test_every_combination(phase: str | None, deletion: str | None, conditions: str, node_case: str) -> None:
    node_name, lookup, node_ceased = NODE_CASES[node_case]
    subject = pod("p", phase=phase, node=node_name, deletion=deletion, conditions=CONDITION_SETS[conditions])
    nodes: dict[str, NodeLookup] = {} if lookup is None or node_name is None else {node_name: lookup}
    result = remaining_pods([subject], nodes)
    assert bool(result) is oracle(phase, conditions, node_ceased)
    if result:
        (remaining,) = result
        assert remaining.ceased is node_ceased
        assert remaining.terminating is (deletion is not None)
        assert remaining.node.name == node_name


@pytest.mark.parametrize(
    ("case", "phase", "deletion", "conditions", "node_case", "remains", "why"),
    [
        (
            "terminating running pod on a Ready node",
            "Running",
            "t",
            "none",
            "ready",
            True,
            Blocking.NOT_FINISHED,
        ),
        ("terminating pending pod", "Pending", "t", "none", "ready", True, Blocking.NOT_FINISHED),
        ("pod on a lost node stays forever", "Running", "t", "none", "unknown", True, Blocking.NOT_FINISHED),
        (
            "a ceased node does not lift a Running pod",
            "Running",
            "t",
            "none",
            "gone",
            True,
            Blocking.NOT_FINISHED,
        ),
        ("finished rank kept across suspend", "Succeeded", None, "none", "ready", False, None),
        ("failed pod waiting to be deleted", "Failed", "t", "none", "unknown", False, None),
        ("PodGC failed it: cessation was proven", "Failed", "t", "podgc", "unknown", False, None),
        (
            "Kueue failed it on an unreachable node",
            "Failed",
            "t",
            "kueue-failure-recovery",
            "unknown",
            True,
            Blocking.FAILED_WITHOUT_PROOF,
        ),
        (
            "Kueue failed it, node tainted on a Ready node",
            "Failed",
            "t",
            "kueue-failure-recovery",
            "ready+oos",
            True,
            Blocking.FAILED_WITHOUT_PROOF,
        ),
        ("Kueue failed it, node gone", "Failed", None, "kueue-failure-recovery", "gone", False, None),
        (
            "Kueue failed it, node shut down and tainted",
            "Failed",
            "t",
            "kueue-failure-recovery",
            "unknown+oos",
            False,
            None,
        ),
        (
            "Kueue failed it, node not readable",
            "Failed",
            "t",
            "kueue-failure-recovery",
            "not-readable",
            True,
            Blocking.FAILED_WITHOUT_PROOF,
        ),
        ("deprecated Unknown phase", "Unknown", None, "none", "ready", True, Blocking.NOT_FINISHED),
        ("no phase at all", None, None, "none", "ready", True, Blocking.NOT_FINISHED),
        ("never scheduled pod", "Pending", None, "none", "unscheduled", True, Blocking.NOT_FINISHED),
    ],
)
def test_named_cases(
    case: str,
    phase: str | None,
    deletion: str | None,
    conditions: str,
    node_case: str,
    remains: bool,
    why: Blocking | None,
) -> None:
    node_name, lookup, _ = NODE_CASES[node_case]
    subject = pod(
        "p",
        phase=phase,
        node=node_name,
        deletion=deletion and "2026-08-21T10:00:30Z",
        conditions=CONDITION_SETS[conditions],
    )
    nodes: dict[str, NodeLookup] = {} if lookup is None or node_name is None else {node_name: lookup}
    result = remaining_pods([subject], nodes)
    assert bool(result) is remains, case
    if remains:
        assert result[0].blocking is why


def test_nodes_to_read_only_for_pods_that_may_block() -> None:
    pods = [
        pod("a", node="n1"),
        pod("b", node="n2", phase="Succeeded"),
        pod("c", node="n1"),
        pod("d", node=None),
        pod("e", node="n3", phase="Failed", conditions=CONDITION_SETS["kueue-failure-recovery"]),
        pod("f", node="n4", phase="Failed"),
    ]
    assert nodes_to_read(pods) == ("n1", "n3")


def test_remaining_pod_carries_what_explanations_need() -> None:
    subject = pod("p", uid="u-1", deletion="2026-08-21T10:00:30Z")
    (remaining,) = remaining_pods([subject], {"n1": node("n1")})
    assert remaining.as_dict() == {
        "name": "p",
        "namespace": "ml",
        "uid": "u-1",
        "phase": "Running",
        "node": "n1",
        "node_state": "Ready=True",
        "out_of_service": False,
        "ceased": False,
        "blocking": "not finished",
        "deletion_timestamp": "2026-08-21T10:00:30Z",
        "relabelled": False,
    }
    assert remaining.deletion_grace_period_seconds == 30

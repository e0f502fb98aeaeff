"""Every wait reads at a glance (dispatch/reasons.py, issue 25): each kind of wait's first line leads with what to
do or what is awaited and its subject, within `payloads.GLANCE` characters with names of ordinary length; the
lines below it give the command, the permission and the runbook section; who waits comes after; the details are
cut, never the head."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

import pytest

from airflow_provider_dispatch.dispatch import explain, payloads, reasons
from airflow_provider_dispatch.dispatch.blocking import remaining_pods
from airflow_provider_dispatch.dispatch.fencing import ExecutionPods, vanished_pods
from airflow_provider_dispatch.dispatch.nodes import NodeLookup, NodeRead
from airflow_provider_dispatch.dispatch.unfinished import explain_unfinished

from .support import OUT_OF_SERVICE, condition, node, pod, trainjob, workload

#: names of ordinary length: a cloud-sized node name, a Trainer pod name, a Kueue Workload name
NODE = "gpu-node-017.internal"
POD = "resnet-20261205-1-node-0-0-x7k2p"
DEADLINE = "2026-08-21T10:00:30Z"
#: how a first line may begin: a person's action, or what is awaited
LEADS = re.compile(r"^(Confirm|Remove|Check|Delete|Let|Add|Find|Fix|Create|Free|Release|See|Waiting) ")


def drain_case(name: str) -> tuple[list[dict[str, Any]], dict[str, NodeLookup]]:
    lost = {NODE: node(NODE, ready="Unknown")}
    ready = {NODE: node(NODE)}
    cases: dict[str, tuple[list[dict[str, Any]], dict[str, NodeLookup]]] = {
        "lost": ([pod(POD, node=NODE, deletion=DEADLINE), pod(POD + "b", node=NODE)], lost),
        "not ready": ([pod(POD, node=NODE)], {NODE: node(NODE, ready="False")}),
        "ceased": ([pod(POD, node=NODE)], {NODE: node(NODE, ready="Unknown", taints=[OUT_OF_SERVICE])}),
        "mistaken taint": ([pod(POD, node=NODE)], {NODE: node(NODE, taints=[OUT_OF_SERVICE])}),
        "not readable": ([pod(POD, node=NODE, deletion=DEADLINE)], {NODE: NodeRead.NOT_READABLE}),
        "gone": ([pod(POD, node=NODE)], {NODE: NodeRead.GONE}),
        "never scheduled": ([pod(POD, node=None)], {}),
        "terminating": ([pod(POD, node=NODE, deletion=DEADLINE)], ready),
        "running": ([pod(POD, node=NODE)], ready),
        "several nodes": (
            [pod(POD, node=NODE), pod("other-0", node="gpu-node-018.internal", deletion=DEADLINE)],
            {NODE: node(NODE, ready="Unknown"), "gpu-node-018.internal": node("gpu-node-018.internal")},
        ),
    }
    return cases[name]


DRAIN_CASES = [
    "lost",
    "not ready",
    "ceased",
    "mistaken taint",
    "not readable",
    "gone",
    "never scheduled",
    "terminating",
    "running",
    "several nodes",
]


@pytest.mark.parametrize("case", DRAIN_CASES)
def test_every_drain_wait_leads_with_what_to_do_or_what_is_awaited_within_a_glance(case: str) -> None:
    pods, nodes = drain_case(case)
    first, how = explain.urgent(remaining_pods(pods, nodes))
    assert len(first) <= payloads.GLANCE, first
    assert LEADS.match(first), first
    assert "\n" not in first
    # the subject: the node, or (never scheduled) the pods that have none
    assert NODE in first or "never scheduled" in first
    said = " ".join(line for line in how if not line.endswith("see below."))  # not the other nodes' count
    if first.startswith("Waiting "):
        # nothing for a person to do now: the lines below say so
        assert "Nothing to do" in said, said
    else:
        # a person acts: the lines below name the permission it needs and the runbook section
        assert "needs permission to " in said.lower(), said
        assert re.search(rf"Runbook: {re.escape(reasons.RUNBOOK)}#[a-z-]+$", said), said


def test_a_relabelled_pod_is_the_subject_with_the_delete_command_and_its_permission() -> None:
    edited = [replace(p, relabelled=True) for p in remaining_pods([pod(POD, node=NODE)], {NODE: node(NODE)})]
    first, how = explain.urgent(edited)
    assert first == f"Delete pod {POD} once done with it: its labels were edited"
    assert how == (
        f"kubectl delete pod -n ml {POD}",
        "Needs permission to delete pods. Delete gracefully (never with --force): its process must end before the "
        f"next execution starts. Runbook: {reasons.RUNBOOK}#{reasons.EDITED_LABELS}",
    )


def test_a_pod_deleted_while_its_node_was_away_is_waited_for_with_the_time_the_node_needs() -> None:
    returned = node(NODE, ready_for=12)
    pods = vanished_pods(ExecutionPods(1, {NODE: (POD,)}, grace={NODE: 30}), "ml", [], (), {NODE: returned})
    first, how = explain.urgent(pods)
    assert first == f"Waiting until {NODE} has been Ready 90s: 1 pod deleted while away may still run"
    assert len(first) <= payloads.GLANCE
    assert how[0].startswith("Nothing to do but wait")


@pytest.mark.parametrize(
    "conditions",
    [
        [condition("PodScheduled", "False", "Unschedulable", "0/3 nodes are available")],
        [condition("PodScheduled", "False", "SchedulingGated", "gated")],
        [],
    ],
)
def test_every_outcome_wait_for_pending_pods_leads_within_a_glance(conditions: list[dict[str, Any]]) -> None:
    pending = [pod(f"{POD}-{i}", node=None, phase="Pending", conditions=conditions) for i in range(4)]
    why = explain_unfinished(trainjob(admission="2", suspend=False, suspended_condition="False"), pending, {})
    assert len(why.first_line) <= payloads.GLANCE, why.first_line
    assert LEADS.match(why.first_line), why.first_line
    assert "4 pods" in why.first_line


@pytest.mark.parametrize(
    "state",
    ["no workload", "not considered", "no quota", "evicted", "deactivated", "check without message", "admitted"],
)
def test_every_kueue_wait_leads_within_a_glance(state: str) -> None:
    queued = trainjob(admission="2", queue="user-queue")
    base = workload()
    found: dict[str, Any] = {
        "no workload": None,
        "not considered": base,
        "no quota": base | {"status": {"conditions": [condition("QuotaReserved", "False", "Pending", "short")]}},
        "evicted": base | {"status": {"conditions": [condition("Evicted", "True", "Preempted", "by another")]}},
        "deactivated": workload(active=False),
        "check without message": workload(checks=[{"name": "dispatch-drained", "state": "Pending"}]),
        "admitted": workload(checks=[{"name": "dispatch-drained", "state": "Ready"}]),
    }
    subject = found[state]
    if state in ("check without message", "admitted"):
        subject["status"]["conditions"] = [condition("QuotaReserved")]
    why = explain_unfinished(queued, [], {}, workload=subject)
    assert len(why.first_line) <= payloads.GLANCE, why.first_line
    assert LEADS.match(why.first_line), why.first_line


def test_nothing_blocking_a_running_training_reads_as_what_is_awaited() -> None:
    running = trainjob(admission="2", suspend=False, suspended_condition="False")
    why = explain_unfinished(running, [pod(POD, node=NODE), pod(POD + "b", node=NODE)], {NODE: node(NODE)})
    assert why.first_line == "Waiting for the training to finish; nothing blocks it (pods: 2 Running)"


def test_the_settle_wait_leads_with_the_time_left() -> None:
    reason = reasons.settling("ml/resnet-20261205-1", 42.4, "the hold of TrainJob ... settles until ...")
    assert reason.first == "Waiting 42s more for the hold of TrainJob ml/resnet-20261205-1 to settle; nothing to do"
    assert len(reason.first) <= payloads.GLANCE
    assert reason.how == (f"Runbook: {reasons.RUNBOOK}#{reasons.HOLD_SETTLES}",)
    assert reason.text().endswith("\nthe hold of TrainJob ... settles until ...")


def test_a_reason_is_first_line_how_about_then_details_and_the_chain_goes_after_the_remedy() -> None:
    reason = reasons.compose(
        "Do this to node-3", ("kubectl do node-3", ""), ("TrainJob ml/x-1 runs execution 1.",), "d1\nd2"
    )
    chained = reason.around("Restart chain, submission 1 of at most 4.")
    assert chained.text().splitlines() == [
        "Do this to node-3",
        "kubectl do node-3",
        "Restart chain, submission 1 of at most 4.",
        "TrainJob ml/x-1 runs execution 1.",
        "d1",
        "d2",
    ]
    assert chained.short == "Do this to node-3"


def test_the_limit_cuts_whole_detail_lines_never_the_head() -> None:
    details = "\n".join(f"detail line {i:03d}" for i in range(500))
    reason = reasons.compose("First", ("how",), ("about",), details)
    text = reason.text(300)
    assert len(text) <= 300
    lines = text.splitlines()
    assert lines[:4] == ["First", "how", "about", "detail line 000"]
    assert re.fullmatch(r"\(\d+ more lines left out\)", lines[-1]), lines[-1]
    assert reason.text(None).count("\n") == 3 + 499


def test_a_remedy_names_its_permission_before_its_note_and_its_runbook_section_last() -> None:
    remedy = reasons.Remedy("Act", commands=("cmd a", "cmd b"), needs="patch nodes", runbook="x", note="Why.")
    assert remedy.how == ("cmd a", "cmd b", f"Needs permission to patch nodes. Why. Runbook: {reasons.RUNBOOK}#x")
    assert reasons.Remedy("Waiting for it").how == ()

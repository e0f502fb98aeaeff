"""What keeps a TrainJob from finishing (unfinished.py): exact first lines for the key cases, the drain check's
remedies reused, bounded texts, and a fingerprint that changes exactly when the explanation does."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from airflow_provider_dispatch.dispatch import explain, payloads
from airflow_provider_dispatch.dispatch import vocabulary as v
from airflow_provider_dispatch.dispatch.blocking import remaining_pods
from airflow_provider_dispatch.dispatch.nodes import NodeRead
from airflow_provider_dispatch.dispatch.unfinished import explain_unfinished, pending_reason

from .support import OUT_OF_SERVICE, across_nodes, condition, node, pod, trainjob, workload

NOW = datetime(2026, 8, 21, 10, 0, 18, tzinfo=UTC)
DEADLINE = "2026-08-21T10:00:30Z"
TAINT = "kubectl taint node n2 node.kubernetes.io/out-of-service=nodeshutdown:NoExecute"


def running(**kwargs: Any) -> dict[str, Any]:
    return trainjob(admission="2", suspend=False, suspended_condition="False", **kwargs)


def unschedulable(name: str, message: str = "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.") -> Any:
    return pod(
        name,
        node=None,
        phase="Pending",
        conditions=[condition("PodScheduled", "False", "Unschedulable", message)],
    )


def test_a_pod_terminating_on_a_lost_node_is_named_with_its_node_state_and_the_taint_command() -> None:
    pods = [pod("ft-7-node-0-0", node="n2", deletion=DEADLINE), pod("ft-7-node-1-0", node="n1")]
    nodes = {"n1": node("n1"), "n2": node("n2", ready="Unknown")}
    why = explain_unfinished(running(), pods, nodes, now=NOW)
    assert why.first_line == "Confirm n2 is powered off, then taint it out-of-service (Ready=Unknown)"
    lines = why.text().splitlines()
    # then the command, the permission it needs and the runbook section: the drain check's (explain.urgent)
    assert (lines[0], tuple(lines[1:3])) == explain.urgent(remaining_pods(pods[:1], nodes))
    assert lines[1] == TAINT
    # the details are the drain check's explanation, word for word
    (hint,) = explain.unblock_hints(remaining_pods(pods[:1], nodes), now=NOW)
    assert lines[3] == hint
    assert "Deleting the pod object would not stop its processes." in hint
    assert lines[4] == "pods of execution 2 not finished: 2 Running, 1 of them Terminating"
    assert why.node_states == (("n1", "Ready=True"), ("n2", "Ready=Unknown"))


def test_a_running_pod_on_a_ready_node_blocks_nothing() -> None:
    why = explain_unfinished(running(), [pod("a", node="n1")], {"n1": node("n1")}, now=NOW)
    assert why.blockers == ()
    assert why.text() == "Waiting for the training to finish; nothing blocks it (pods: 1 Running)"


def test_pending_pods_say_why_from_their_conditions_one_line_per_message() -> None:
    pods = [unschedulable("b"), unschedulable("a"), pod("c", node="n1", phase="Pending")]
    why = explain_unfinished(running(), pods, {"n1": node("n1")}, now=NOW)
    assert why.text().splitlines() == [
        "Add capacity or relax their requests or placement: 2 pods Pending (Unschedulable)",
        "Add capacity that fits them, or relax their requests, node selector, affinity or tolerations (the "
        "scheduler's message below says what is short). Runbook: docs/runbook.md#outcome-waits",
        "1 more thing blocks it: see below.",
        "Waiting for 1 pod to start (starting)",
        "Nothing to do yet: the scheduler and the kubelet are at work.",
        "pods a, b Pending (Unschedulable)",
        "pods a, b: Unschedulable: 0/3 nodes are available: 3 Insufficient nvidia.com/gpu.",
        "pod c Pending (starting)",
        "pods of execution 2 not finished: 3 Pending",
    ]


def test_a_container_waiting_reason_explains_a_bound_pending_pod() -> None:
    subject = pod("a", node="n1", phase="Pending")
    subject["status"]["containerStatuses"] = [
        {"name": "node", "state": {"waiting": {"reason": "ContainerCreating"}}},
        {"name": "side", "state": {"waiting": {"reason": "ImagePullBackOff", "message": "Back-off pulling x:1"}}},
    ]
    assert pending_reason(subject) == ("ImagePullBackOff", "Back-off pulling x:1")
    why = explain_unfinished(running(), [subject], {"n1": node("n1")})
    assert why.first_line == "Fix the image name or the pull secret: 1 pod Pending (ImagePullBackOff)"


def test_a_lost_node_comes_before_pending_pods_and_a_held_trainjob_before_both() -> None:
    pods = [unschedulable("a"), pod("b", node="n2")]
    nodes = {"n2": node("n2", ready="False")}
    why = explain_unfinished(running(), pods, nodes, now=NOW)
    assert why.first_line == "Confirm n2 is powered off, then taint it out-of-service (Ready=False)"
    assert why.how[-1] == "1 more thing blocks it: see below."
    held = explain_unfinished(trainjob(admission="2"), pods, nodes, now=NOW)
    assert held.first_line == "Release the TrainJob to run it: it is held (suspended) and runs nothing"
    assert held.how[-1] == "2 more things block it: see below."
    lines = held.text().splitlines()
    assert lines.index("Confirm n2 is powered off, then taint it out-of-service (Ready=False)") < lines.index(
        "Add capacity or relax their requests or placement: 1 pod Pending (Unschedulable)"
    )


def test_ceased_and_unreadable_nodes_use_the_drain_checks_remedies() -> None:
    pods = [pod("a", node="n3", deletion=DEADLINE), pod("b", node="n4", deletion=DEADLINE), pod("c", node="n5")]
    nodes = {"n3": node("n3", ready="Unknown", taints=[OUT_OF_SERVICE]), "n4": NodeRead.NOT_READABLE}
    why = explain_unfinished(running(), pods, nodes, now=NOW)  # n5 unread: a running pod there is not named
    assert [b.headline for b in why.blockers] == [
        "Let dispatch read node n4: 1 pod on it cannot be proven stopped",
        "Waiting for PodGC to delete 1 pod on n3: it is proven stopped",
    ]
    assert why.blockers[0].how == (
        "Bind the dispatch-node-reader ClusterRole to the identity dispatch uses (docs/rbac.md); binding it needs "
        "permission to create clusterrolebindings. Runbook: docs/runbook.md#node-not-readable",
    )


def test_kueue_eviction_quota_and_admission_checks_are_named() -> None:
    tj = trainjob(admission="2", queue="user-queue")
    base = workload()
    assert explain_unfinished(tj, [], {}, workload=None).first_line == (
        "Check that its LocalQueue exists and Kueue runs: the TrainJob has no Kueue Workload yet"
    )
    not_considered = explain_unfinished(tj, [], {}, workload=base)
    assert not_considered.first_line == (
        "Waiting for Kueue to consider Workload trainjob-ft-7-3f9a1 (queued, no QuotaReserved yet)"
    )
    assert "free or add quota" not in not_considered.text()
    no_quota = base | {"status": {"conditions": [condition("QuotaReserved", "False", "Pending", "insufficient")]}}
    why = explain_unfinished(tj, [], {}, workload=no_quota)
    assert why.first_line == "Free or add quota in its ClusterQueue: Workload trainjob-ft-7-3f9a1 has no quota reserved"
    assert why.how[0].startswith("Needs permission to update clusterqueues. ")
    assert why.text().splitlines()[2] == "Workload trainjob-ft-7-3f9a1 QuotaReserved=False: Pending: insufficient"
    evicted = base | {"status": {"conditions": [condition("Evicted", "True", "Preempted", "by a higher priority")]}}
    why = explain_unfinished(trainjob(admission="2", queue="q", suspend=False), [], {}, workload=evicted)
    assert why.first_line == "Waiting for Kueue to admit Workload trainjob-ft-7-3f9a1 again: it was evicted (Preempted)"
    checking = workload(checks=[{"name": "dispatch", "state": "Pending", "message": "waiting for pods"}])
    checking["status"]["conditions"] = [condition("QuotaReserved")]
    why = explain_unfinished(tj, [], {}, workload=checking)
    # the check's own message leads (dispatch's says what to do first), then whose check it is
    assert why.text().splitlines() == [
        "waiting for pods",
        "Workload trainjob-ft-7-3f9a1 waits for admission check dispatch (Pending).",
        explain.admission_check_line("dispatch", "Pending", "waiting for pods"),
        "none of its pods is running or pending",
    ]
    silent = workload(checks=[{"name": "other", "state": "Pending"}])
    silent["status"]["conditions"] = [condition("QuotaReserved")]
    assert explain_unfinished(tj, [], {}, workload=silent).first_line == (
        "Waiting for admission check other of Workload trainjob-ft-7-3f9a1 (Pending)"
    )
    deactivated = workload(active=False)
    assert explain_unfinished(tj, [], {}, workload=deactivated).first_line == (
        "Release the TrainJob: its Workload trainjob-ft-7-3f9a1 is deactivated (held by dispatch)"
    )


def test_the_fingerprint_changes_exactly_when_the_explanation_does() -> None:
    pods = [pod("a", node="n2", deletion=DEADLINE), pod("b", node="n1")]
    lost = {"n1": node("n1"), "n2": node("n2", ready="Unknown")}
    first = explain_unfinished(running(), pods, lost, now=NOW)
    later = explain_unfinished(running(), list(reversed(pods)), lost, now=datetime(2026, 8, 21, 11, tzinfo=UTC))
    assert first.fingerprint == later.fingerprint  # order and the clock do not count
    fenced = {"n1": node("n1"), "n2": node("n2", ready="Unknown", taints=[OUT_OF_SERVICE])}
    assert explain_unfinished(running(), pods, fenced, now=NOW).fingerprint != first.fingerprint
    assert explain_unfinished(running(), pods[1:], lost, now=NOW).fingerprint != first.fingerprint


def test_pods_that_only_start_are_no_progress() -> None:
    """Pending while the scheduler and the kubelet are at work, then Running: nobody has to act, nothing changes
    for a trigger (a task woken for it right after its deferral meets Airflow's stale executor event). A pod that
    cannot start (an image that cannot be pulled) is a change."""
    starting = pod("a", node="n1", phase="Pending")
    nodes = {"n1": node("n1")}
    started = explain_unfinished(running(), [starting], nodes, now=NOW)
    assert started.first_line == "Waiting for 1 pod to start (starting)"
    assert started.how == ("Nothing to do yet: the scheduler and the kubelet are at work.",)
    assert explain_unfinished(running(), [pod("a", node="n1")], nodes, now=NOW).fingerprint == started.fingerprint
    stuck = pod("a", node="n1", phase="Pending")
    stuck["status"]["containerStatuses"] = [{"name": "c", "state": {"waiting": {"reason": "ImagePullBackOff"}}}]
    assert explain_unfinished(running(), [stuck], nodes, now=NOW).fingerprint != started.fingerprint


def test_at_50000_pods_the_explanation_stays_within_its_limit_and_keeps_its_first_line() -> None:
    objects, lookups = across_nodes(50_000, 3_000, terminating=True)
    why = explain_unfinished(running(), objects, lookups, now=NOW)
    text = why.text(payloads.WAIT_REASON_LIMIT - payloads.REASON_WORDS_ROOM)
    assert len(text) <= payloads.WAIT_REASON_LIMIT - payloads.REASON_WORDS_ROOM
    assert text.splitlines()[0] == why.first_line
    assert len(why.first_line) <= payloads.HEADLINE_ROOM
    assert "Ready=Unknown" in why.first_line
    assert why.how[0].startswith("kubectl taint node ")
    assert text.splitlines()[-1].endswith("more lines left out)")
    assert payloads.json_size(why.as_dict(payloads.DETAIL_LIMIT)) < payloads.TRIGGER_EVENT_LIMIT


def test_the_headline_of_the_drain_check_is_short_and_complete() -> None:
    pods = remaining_pods(
        [pod("a", node="n1", deletion=DEADLINE), pod("b", node="n2"), pod("c", node="n2")],
        {"n1": node("n1"), "n2": node("n2", ready="Unknown")},
    )
    first, how = explain.urgent(pods)
    assert first == "Confirm n2 is powered off, then taint it out-of-service (Ready=Unknown)"
    assert how[0] == TAINT
    assert how[-1] == "1 more pod on 1 other node: see below."
    assert explain.urgent(pods[:1]) == (
        "Waiting for the kubelet of n1 to stop 1 pod (Ready=True)",
        ("Nothing to do: the kubelet confirms its end within its grace period.",),
    )
    assert explain.urgent(()) == ("", ())
    assert v.TAINT_OUT_OF_SERVICE in how[0]

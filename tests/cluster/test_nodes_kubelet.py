"""The scheduler and the kubelets on healthy nodes: binding, running to completion, graceful deletion, and the
lab's own annotations, all through the official client, in lab time. A test that reads a pod while a lab-time run
or termination would end it holds lab time still across that window (`lab_time.py`)."""

from __future__ import annotations

from datetime import timedelta

import kubernetes
import pytest
from api_answers import expect_answer
from kubernetes.client import ApiException
from lab_time import lab_time_stopped

from airflow_provider_dispatch_lab.scenario.scenario import Scenario
from airflow_provider_dispatch_lab.simulated.controllers import NODE_CONTROLLERS
from airflow_provider_dispatch_lab.simulated.nodes.kubelet import STATE_ANNOTATION
from airflow_provider_dispatch_lab.simulated.nodes.workload import EXIT_NOW, RUN_SECONDS

from .nodes_support import Zone, condition, phase, pod
from .waiting import wait_for

CONTROLLERS = NODE_CONTROLLERS
LAB_SPEED = 20.0


def _running(p: object) -> bool:
    return p is not None and p.status.phase == "Running"  # type: ignore[attr-defined]


def test_scheduler_binds_only_to_ready_schedulable_nodes(
    scenario: Scenario, core: kubernetes.client.CoreV1Api, zone: Zone, cluster_namespace: str
) -> None:
    ns = cluster_namespace
    ready = zone.node("ready", cpu="4")
    cordoned = zone.node("cordoned")
    core.patch_node(cordoned, {"spec": {"unschedulable": True}})
    zone.node("tainted", taints=[{"key": "example.com/dedicated", "value": "infra", "effect": "NoSchedule"}])
    silent = zone.node("silent")
    scenario.freeze(silent)
    scenario.advance(70)  # past the 50 s grace: the silent node is Unknown and tainted unreachable:NoSchedule
    node = scenario.wait_for_node(silent, lambda n: ("node.kubernetes.io/unreachable", "NoSchedule") in _taints(n))
    assert condition(node, "Ready")["status"] == "Unknown"  # type: ignore[index]

    for index in range(3):
        core.create_namespaced_pod(ns, pod(f"p{index}", zone=zone, cpu="1"))
    for index in range(3):
        bound = wait_for(core.list_namespaced_pod, f"p{index}", _running, namespace=ns)
        assert bound.spec.node_name == ready
    scheduled = [c for c in core.read_namespaced_pod("p0", ns).status.conditions if c.type == "PodScheduled"]
    assert scheduled[0].status == "True"

    core.create_namespaced_pod(ns, pod("too-big", zone=zone, cpu="2"))
    pending = wait_for(
        core.list_namespaced_pod,
        "too-big",
        lambda p: p is not None and any(c.reason == "Unschedulable" for c in p.status.conditions or []),
        namespace=ns,
    )
    message = next(c.message for c in pending.status.conditions if c.type == "PodScheduled")
    assert pending.status.phase == "Pending"
    assert not pending.spec.node_name
    for reason in (
        "1 Insufficient cpu",
        "1 node(s) were unschedulable",
        "1 node(s) had untolerated taint {example.com/dedicated: infra}",
        "1 node(s) had untolerated taint {node.kubernetes.io/unreachable: }",
    ):
        assert reason in message

    core.delete_namespaced_pod("p0", ns)  # frees a cpu: the pending pod is retried and fits
    bound = wait_for(core.list_namespaced_pod, "too-big", _running, namespace=ns)
    assert bound.spec.node_name == ready


def _taints(node: dict | None) -> set[tuple[str, str]]:
    return {(t["key"], t["effect"]) for t in ((node or {}).get("spec") or {}).get("taints") or ()}


@pytest.mark.parametrize(
    ("exit_code", "expected_phase", "reason"), [(0, "Succeeded", "Completed"), (3, "Failed", "Error")]
)
def test_a_pod_runs_and_exits_as_its_annotations_say(
    scenario: Scenario,
    core: kubernetes.client.CoreV1Api,
    zone: Zone,
    cluster_namespace: str,
    exit_code: int,
    expected_phase: str,
    reason: str,
) -> None:
    ns = cluster_namespace
    node = zone.node("n")
    with lab_time_stopped(scenario.lab):  # the 45 s run is lab time: it ends when the test advances past it
        core.create_namespaced_pod(ns, pod("p", node=node, run_seconds=45, exit_code=exit_code))
        running = wait_for(core.list_namespaced_pod, "p", _running, namespace=ns)
        state = running.status.container_statuses[0]
        assert state.ready
        assert state.state.running is not None
        assert running.status.start_time is not None
        assert {c.type: c.status for c in running.status.conditions}["Ready"] == "True"

        scenario.advance(50)
        done = wait_for(
            core.list_namespaced_pod, "p", lambda p: p is not None and p.status.phase != "Running", namespace=ns
        )
    assert done.status.phase == expected_phase
    terminated = done.status.container_statuses[0].state.terminated
    assert (terminated.exit_code, terminated.reason) == (exit_code, reason)
    assert terminated.finished_at - terminated.started_at == timedelta(seconds=45)
    ready = next(c for c in done.status.conditions if c.type == "Ready")
    assert ready.status == "False"
    assert ready.reason == ("PodCompleted" if exit_code == 0 else "PodFailed")


def test_on_failure_restarts_and_the_scenario_can_complete_or_fail_a_pod(
    scenario: Scenario, core: kubernetes.client.CoreV1Api, zone: Zone, cluster_namespace: str
) -> None:
    ns = cluster_namespace
    node = zone.node("n")
    core.create_namespaced_pod(ns, pod("flaky", node=node, restart_policy="OnFailure"))
    core.create_namespaced_pod(ns, pod("doomed", node=node))
    wait_for(core.list_namespaced_pod, "flaky", _running, namespace=ns)
    wait_for(core.list_namespaced_pod, "doomed", _running, namespace=ns)

    scenario.fail(ns, "flaky", exit_code=2)  # OnFailure: the kubelet restarts it after the 10 s back-off
    scenario.advance(15)
    restarted = wait_for(
        core.list_namespaced_pod,
        "flaky",
        lambda p: p is not None and p.status.container_statuses[0].restart_count == 1 and _running(p),
        namespace=ns,
    )
    assert restarted.status.container_statuses[0].last_state.terminated.exit_code == 2
    scenario.complete(ns, "flaky")  # exit 0 ends an OnFailure pod
    assert phase(scenario.wait_for_pod(ns, "flaky", lambda p: phase(p) != "Running")) == "Succeeded"

    scenario.fail(ns, "doomed", exit_code=7)
    doomed = scenario.wait_for_pod(ns, "doomed", lambda p: phase(p) != "Running")
    assert phase(doomed) == "Failed"
    assert doomed["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 7  # type: ignore[index]


def test_exit_now_annotation_through_the_api(
    core: kubernetes.client.CoreV1Api, zone: Zone, cluster_namespace: str
) -> None:
    ns = cluster_namespace
    core.create_namespaced_pod(ns, pod("p", node=zone.node("n")))
    wait_for(core.list_namespaced_pod, "p", _running, namespace=ns)
    core.patch_namespaced_pod("p", ns, {"metadata": {"annotations": {EXIT_NOW: "4"}}})
    done = wait_for(core.list_namespaced_pod, "p", lambda p: p is not None and p.status.phase == "Failed", namespace=ns)
    assert done.status.container_statuses[0].state.terminated.exit_code == 4


@pytest.mark.parametrize(
    ("termination", "grace", "exit_code", "stop_after"),
    [(5, 30, 143, 5), (120, 10, 137, 10)],
    ids=["stops-in-time", "killed-at-the-deadline"],
)
def test_graceful_deletion_on_a_ready_node_ends_within_the_grace_period(
    scenario: Scenario,
    core: kubernetes.client.CoreV1Api,
    zone: Zone,
    cluster_namespace: str,
    termination: int,
    grace: int,
    exit_code: int,
    stop_after: int,
) -> None:
    ns = cluster_namespace
    body = pod("p", node=zone.node("n"), termination_seconds=termination, grace=grace, finalizer=True)
    core.create_namespaced_pod(ns, body)
    wait_for(core.list_namespaced_pod, "p", _running, namespace=ns)
    with lab_time_stopped(scenario.lab):  # the termination (5 s in the first case) ends when the test advances
        core.delete_namespaced_pod("p", ns)
        deleting = core.read_namespaced_pod("p", ns)
        assert deleting.status.phase == "Running"
        requested_at = deleting.metadata.deletion_timestamp - timedelta(seconds=grace)

        scenario.advance(grace + 5)
        final = wait_for(
            core.list_namespaced_pod,
            "p",
            lambda p: p is not None and p.metadata.deletion_grace_period_seconds == 0,
            namespace=ns,
        )
    terminated = final.status.container_statuses[0].state.terminated
    assert final.status.phase == "Failed"  # the terminal phase comes first, then the kubelet's grace-0 delete
    assert terminated.exit_code == exit_code
    assert terminated.finished_at <= deleting.metadata.deletion_timestamp + timedelta(seconds=1)
    assert terminated.finished_at - requested_at <= timedelta(seconds=stop_after + 1)
    # the Job finalizer keeps it until its owner removes it
    core.patch_namespaced_pod("p", ns, {"metadata": {"finalizers": None}})
    assert wait_for(core.list_namespaced_pod, "p", lambda p: p is None, namespace=ns) is None


def test_sigterm_that_exits_zero_succeeds(
    scenario: Scenario, core: kubernetes.client.CoreV1Api, zone: Zone, cluster_namespace: str
) -> None:
    ns = cluster_namespace
    body = pod("p", node=zone.node("n"), termination_seconds=2, finalizer=True)
    body["metadata"]["annotations"]["lab.dispatch.phpboyscout.uk/sigterm-exit-code"] = "0"
    core.create_namespaced_pod(ns, body)
    wait_for(core.list_namespaced_pod, "p", _running, namespace=ns)
    core.delete_namespaced_pod("p", ns)
    scenario.advance(5)
    final = wait_for(
        core.list_namespaced_pod, "p", lambda p: p is not None and p.status.phase != "Running", namespace=ns
    )
    assert final.status.phase == "Succeeded"


def test_lab_annotations_with_bad_values_are_refused(
    core: kubernetes.client.CoreV1Api, zone: Zone, cluster_namespace: str
) -> None:
    body = pod("p", node=zone.node("n"))
    body["metadata"]["annotations"] = {RUN_SECONDS: "soon"}
    with pytest.raises(ApiException) as refused:
        core.create_namespaced_pod(cluster_namespace, body)
    expect_answer(refused.value, 422)
    assert RUN_SECONDS in refused.value.body
    with pytest.raises(ApiException) as refused_node:
        core.patch_node(f"{zone.name}-n", {"metadata": {"annotations": {STATE_ANNOTATION: "asleep"}}})
    assert '"frozen"' in expect_answer(refused_node.value, 422)["message"]
    assert core.list_namespaced_pod(cluster_namespace).items == []

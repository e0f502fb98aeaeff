"""The node lifecycle controller's full-disruption mode, in a lab of its own (the mode looks at every node of
the cluster): when no node at all is Ready it assumes the fault is its own, and neither taints nor evicts."""

from __future__ import annotations

import kubernetes

from airflow_provider_dispatch_lab.scenario.scenario import Scenario
from airflow_provider_dispatch_lab.simulated.controllers import NODE_CONTROLLERS

from .nodes_support import Zone, condition, phase, pod, taint_keys

CONTROLLERS = NODE_CONTROLLERS
LAB_SPEED = 20.0


def test_the_only_node_going_silent_is_not_tainted_and_its_pods_are_not_evicted(
    scenario: Scenario, cluster_api: kubernetes.client.ApiClient, cluster_namespace: str
) -> None:
    core = kubernetes.client.CoreV1Api(cluster_api)
    node = Zone(scenario).node("only")
    core.create_namespaced_pod(cluster_namespace, pod("p", node=node))
    scenario.wait_for_pod(cluster_namespace, "p", lambda p: phase(p) == "Running")
    scenario.freeze(node)
    scenario.advance(400)
    silent = scenario.wait_for_node(node, lambda n: condition(n, "Ready")["status"] == "Unknown")  # type: ignore[index]
    assert ("node.kubernetes.io/unreachable", "NoExecute") not in taint_keys(silent)
    assert ("node.kubernetes.io/unreachable", "NoSchedule") in taint_keys(silent)  # NoSchedule is not rate-limited
    assert core.read_namespaced_pod("p", cluster_namespace).metadata.deletion_timestamp is None

    scenario.recover(node)
    scenario.advance(10)
    ready = scenario.wait_for_node(node, lambda n: condition(n, "Ready")["status"] == "True")  # type: ignore[index]
    assert not taint_keys(scenario.wait_for_node(node, lambda n: not taint_keys(n)))
    assert ready is not None

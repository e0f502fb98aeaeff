"""The lab's fencing agent (`lab/simulated/nodes/fencing.py`) with the node side of the cluster: it fences only nodes
armed with `fence-after-seconds`, only once they have been not Ready that long, powers the machine off before it
taints, and removes its taint when the node is Ready again. Lab time runs at speed 20, and stands still
(`lab_time.py`) from the moment the node is seen Unknown where a test needs the fence to have happened (or not) by
a given moment: it then moves by `advance` only.
"""

from __future__ import annotations

from typing import Any

import kubernetes
import pytest
from lab_time import lab_time_stopped_when

from airflow_provider_dispatch_lab.clock import parse_timestamp
from airflow_provider_dispatch_lab.runtime import Lab
from airflow_provider_dispatch_lab.scenario.scenario import Scenario
from airflow_provider_dispatch_lab.simulated.controllers import NODE_CONTROLLERS
from airflow_provider_dispatch_lab.simulated.nodes.fencing import FENCE_AFTER_SECONDS, FencingAgent, fence_after
from airflow_provider_dispatch_lab.simulated.nodes.kubelet_runs import STATE_ANNOTATION

from .nodes_support import Appears, Zone, condition, phase, pod

CONTROLLERS = [*NODE_CONTROLLERS, FencingAgent]
LAB_SPEED = 20.0
OUT_OF_SERVICE = ("node.kubernetes.io/out-of-service", "nodeshutdown", "NoExecute")
Obj = dict[str, Any]


def agent(lab: Lab) -> FencingAgent:
    return next(c for c in lab.inner.controllers if isinstance(c, FencingAgent))


def out_of_service(node: Obj | None) -> list[tuple[str, str, str]]:
    taints = ((node or {}).get("spec") or {}).get("taints") or ()
    found = [(t.get("key"), t.get("value"), t.get("effect")) for t in taints]
    return [t for t in found if t[0] == OUT_OF_SERVICE[0]]


def machine(node: Obj | None) -> str:
    return str((((node or {}).get("metadata") or {}).get("annotations") or {}).get(STATE_ANNOTATION, "ready"))


def running(lab: Lab, scenario: Scenario, node: str, namespace: str) -> bool:
    """Whether the machine under `node` runs the process of pod `p` (the recorder's truth, not the API's)."""
    return lab.call(lambda: scenario.inner.kubelet(node).running_process(namespace, "p") is not None)


def arm(api: kubernetes.client.ApiClient, node: str, seconds: str | None) -> None:
    kubernetes.client.CoreV1Api(api).patch_node(node, {"metadata": {"annotations": {FENCE_AFTER_SECONDS: seconds}}})


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        ({}, None),
        ({FENCE_AFTER_SECONDS: "600"}, 600.0),
        ({FENCE_AFTER_SECONDS: "0"}, 0.0),
        ({FENCE_AFTER_SECONDS: "2.5"}, 2.5),
        ({FENCE_AFTER_SECONDS: "-1"}, None),
        ({FENCE_AFTER_SECONDS: "ten"}, None),
        ({FENCE_AFTER_SECONDS: "nan"}, None),
        ({FENCE_AFTER_SECONDS: "inf"}, None),
        ({FENCE_AFTER_SECONDS: ""}, None),
    ],
)
def test_fence_after_reads_only_a_number_of_seconds(annotations: dict[str, str], expected: float | None) -> None:
    assert fence_after({"metadata": {"name": "n", "annotations": annotations}}) == expected


def test_an_armed_node_is_powered_off_then_tainted_once_not_ready_long_enough(
    scenario: Scenario, cluster_lab: Lab, cluster_api: kubernetes.client.ApiClient, cluster_namespace: str
) -> None:
    zone = Zone(scenario)
    node, other = zone.node("a"), zone.node("b")
    core = kubernetes.client.CoreV1Api(cluster_api)
    core.create_namespaced_pod(cluster_namespace, pod("p", node=node))
    scenario.wait_for_pod(cluster_namespace, "p", lambda p: phase(p) == "Running")
    arm(cluster_api, node, "120")
    scenario.freeze(node)
    scenario.advance(60)  # silent for 60 s: Ready=Unknown (after the 50 s grace), not yet fenced
    unknown = Appears.node(scenario, node, lambda n: condition(n, "Ready")["status"] == "Unknown")  # type: ignore[index]
    # lab time stands still from the Unknown on, so that the fence 120 s later comes only with the advance below
    with lab_time_stopped_when(cluster_lab, unknown) as silent:
        assert (machine(silent), out_of_service(silent)) == ("frozen", [])
        since = parse_timestamp(condition(silent, "Ready")["lastTransitionTime"])  # type: ignore[index]
        assert running(cluster_lab, scenario, node, cluster_namespace)  # frozen: the process runs on

        store = cluster_lab.inner.store
        before = cluster_lab.call(lambda: store.revision)
        scenario.advance(130)
        fenced = scenario.wait_for_node(node, lambda n: bool(out_of_service(n)))
    assert (out_of_service(fenced), machine(fenced)) == ([OUT_OF_SERVICE], "powered-off")
    # the machine was off before the taint went on: no version of the Node has the taint on a running machine
    versions = [
        e.obj
        for e in cluster_lab.call(lambda: store.events_since(before, "nodes"))
        if e.obj["metadata"]["name"] == node
    ]
    tainted = [machine(v) for v in versions if out_of_service(v)]
    assert tainted
    assert set(tainted) == {"powered-off"}
    [taint] = [t for t in fenced["spec"]["taints"] if t["key"] == OUT_OF_SERVICE[0]]  # type: ignore[index]
    assert parse_timestamp(taint["timeAdded"]) >= since + 120
    assert agent(cluster_lab).fenced.count(node) == 1
    # the machine really is off: its process stopped when the fence landed
    assert not running(cluster_lab, scenario, node, cluster_namespace)
    # the other node of the zone, never armed, is untouched
    untouched = scenario.wait_for_node(other, lambda n: n is not None)
    assert (machine(untouched), out_of_service(untouched)) == ("ready", [])


def test_a_node_without_the_annotation_is_never_fenced(
    scenario: Scenario, cluster_lab: Lab, cluster_api: kubernetes.client.ApiClient
) -> None:
    zone = Zone(scenario)
    node, _ = zone.node("a"), zone.node("b")
    arm(cluster_api, node, "ten")  # unreadable: logged, never acted on
    scenario.freeze(node)
    scenario.advance(400)
    silent = scenario.wait_for_node(node, lambda n: condition(n, "Ready")["status"] == "Unknown")  # type: ignore[index]
    assert (machine(silent), out_of_service(silent)) == ("frozen", [])
    assert node not in agent(cluster_lab).fenced


def test_the_taint_goes_when_the_node_is_ready_again_and_it_is_not_fenced_twice(
    scenario: Scenario, cluster_lab: Lab, cluster_api: kubernetes.client.ApiClient
) -> None:
    zone = Zone(scenario)
    node, _ = zone.node("a"), zone.node("b")
    arm(cluster_api, node, "0")
    scenario.lose(node)
    scenario.advance(70)
    scenario.wait_for_node(node, lambda n: bool(out_of_service(n)) and machine(n) == "powered-off")

    scenario.recover(node)  # someone powers the machine on again: its kubelet reports Ready
    back = scenario.wait_for_node(node, lambda n: not out_of_service(n))
    assert condition(back, "Ready")["status"] == "True"  # type: ignore[index]
    scenario.advance(30)
    again = scenario.wait_for_node(node, lambda n: n is not None)
    assert (machine(again), out_of_service(again)) == ("ready", [])
    assert agent(cluster_lab).fenced.count(node) == 1

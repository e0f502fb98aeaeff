"""Machines that fail, and what the control plane does about it: frozen and lost nodes, power-off and reboot,
the lifecycle taints and taint-based eviction, PodGC's three rules, and the overlap recorder's truth.

Lab time runs at speed 20 so that the controllers' loops turn by themselves, and stands still (`lab_time.py`) across
each window a test checks, from the action or the state that opens it: a quarantine, a toleration or a run that
lab time would end while the test thread waits for the CPU.
"""

from __future__ import annotations

import kubernetes
import pytest
from lab_time import lab_time_stopped, lab_time_stopped_when

from airflow_provider_dispatch_lab.clock import parse_timestamp
from airflow_provider_dispatch_lab.runtime import Lab
from airflow_provider_dispatch_lab.scenario.scenario import Scenario
from airflow_provider_dispatch_lab.simulated.controllers import NODE_CONTROLLERS
from airflow_provider_dispatch_lab.simulated.nodes.podgc import PodGarbageCollector

from .nodes_support import Appears, Zone, condition, execution_labels, phase, pod, taint_keys
from .waiting import wait_for

CONTROLLERS = NODE_CONTROLLERS
LAB_SPEED = 20.0
UNREACHABLE_NO_EXECUTE = ("node.kubernetes.io/unreachable", "NoExecute")
NOT_READY_NO_EXECUTE = ("node.kubernetes.io/not-ready", "NoExecute")
Obj = dict


def _started(scenario: Scenario, core: kubernetes.client.CoreV1Api, ns: str, body: Obj) -> Obj:
    core.create_namespaced_pod(ns, body)
    running = scenario.wait_for_pod(ns, body["metadata"]["name"], lambda p: phase(p) == "Running")
    assert running is not None
    return running


def _running_processes(scenario: Scenario, ns: str) -> set[str]:
    return {r.pod for r in scenario.lab.call(lambda: scenario.recorder.running(ns))}


def _collector(lab: Lab) -> PodGarbageCollector:
    return next(c for c in lab.inner.controllers if isinstance(c, PodGarbageCollector))


def _gc_passes(lab: Lab) -> int:
    collector = _collector(lab)
    return lab.call(lambda: collector.passes)


class _GcPasses:
    """For `lab_time_stopped_when`: PodGC has made `count` passes in all (its own counter, on the lab's loop)."""

    def __init__(self, lab: Lab, count: int) -> None:
        self.collector, self.count = _collector(lab), count

    async def __call__(self) -> int:
        async with self.collector.passed:
            await self.collector.passed.wait_for(lambda: self.collector.passes >= self.count)
            return self.collector.passes

    def __repr__(self) -> str:
        return f"PodGC pass {self.count} (it has made {self.collector.passes})"


def test_a_frozen_node_keeps_its_pods_terminating_and_is_tainted_and_evicted(
    scenario: Scenario, core: kubernetes.client.CoreV1Api, zone: Zone, cluster_namespace: str
) -> None:
    ns = cluster_namespace
    frozen = zone.node("frozen")
    zone.node("healthy")  # the zone still has a Ready node: it is not in full disruption
    _started(scenario, core, ns, pod("deleted", node=frozen))
    _started(scenario, core, ns, pod("kept", node=frozen))
    scenario.advance(10)  # the node lifecycle controller has seen the node heartbeat
    scenario.freeze(frozen)
    frozen_at = scenario.now()
    core.delete_namespaced_pod("deleted", ns)

    scenario.advance(60)
    tainted = Appears.node(scenario, frozen, lambda n: UNREACHABLE_NO_EXECUTE in taint_keys(n))
    with lab_time_stopped_when(scenario.lab, tainted) as node:  # the toleration's 300 s start: time stands still
        ready = condition(node, "Ready")
        assert ready is not None
        assert (ready["status"], ready["reason"]) == ("Unknown", "NodeStatusUnknown")
        assert ready["message"] == "Kubelet stopped posting node status."
        # the last renewal was up to 10 s before the freeze, the controller looks every 5 s, advance() steps by 10 s
        assert 40 <= parse_timestamp(ready["lastTransitionTime"]) - frozen_at <= 75
        kept = core.read_namespaced_pod("kept", ns)
        assert kept.metadata.deletion_timestamp is None  # tolerated for 300 s (DefaultTolerationSeconds)
        assert next(c for c in kept.status.conditions if c.type == "Ready").status == "False"  # MarkPodsNotReady
        [taint] = [t for t in node["spec"]["taints"] if (t["key"], t["effect"]) == UNREACHABLE_NO_EXECUTE]  # type: ignore[index]

        scenario.advance(300)  # the taint manager's timer is due: it evicts
        evicted = scenario.wait_for_pod(ns, "kept", lambda p: bool(p and p["metadata"].get("deletionTimestamp")))
        disruption = condition(evicted, "DisruptionTarget")
        assert disruption is not None
        assert disruption["reason"] == "DeletionByTaintManager"
        assert parse_timestamp(disruption["lastTransitionTime"]) - parse_timestamp(taint["timeAdded"]) >= 300

        scenario.advance(3600)
        for name in ("deleted", "kept"):
            stuck = core.read_namespaced_pod(name, ns)
            assert stuck.metadata.deletion_timestamp is not None
            assert stuck.status.phase == "Running"  # nobody confirms: Terminating for as long as the node is frozen
        assert _running_processes(scenario, ns) == {"deleted", "kept"}  # and the machine still runs them


def test_a_recovered_kubelet_confirms_the_deletions_and_the_taints_go(
    scenario: Scenario, core: kubernetes.client.CoreV1Api, zone: Zone, cluster_namespace: str
) -> None:
    ns = cluster_namespace
    node = zone.node("n")
    zone.node("other")
    _started(scenario, core, ns, pod("p", node=node, termination_seconds=5, grace=30))
    scenario.freeze(node)
    core.delete_namespaced_pod("p", ns)
    scenario.advance(120)
    assert UNREACHABLE_NO_EXECUTE in taint_keys(scenario.wait_for_node(node, lambda n: n is not None))
    assert core.read_namespaced_pod("p", ns).metadata.deletion_timestamp is not None

    before = scenario.now()
    scenario.recover(node)  # the kubelet sends SIGTERM as it resumes, between these two instants
    after = scenario.now()
    scenario.advance(10)
    assert scenario.wait_for_pod(ns, "p", lambda p: p is None) is None
    (record,) = scenario.processes(ns, "")
    assert record.stop is not None
    assert before + 5 <= record.stop <= after + 5  # its 5 s of termination run from the SIGTERM, after recovery
    healthy = scenario.wait_for_node(node, lambda n: not taint_keys(n))
    assert condition(healthy, "Ready")["status"] == "True"  # type: ignore[index]


def test_a_lost_node_runs_on_and_reports_when_it_is_back(
    scenario: Scenario, core: kubernetes.client.CoreV1Api, zone: Zone, cluster_namespace: str
) -> None:
    ns = cluster_namespace
    node = zone.node("n")
    zone.node("other")
    # time stands still from the start: the 100 s run is lab time, and so is the taint manager's eviction of the
    # pod 300 s after the node goes Unknown, which would leave the kubelet nothing to report when it is back
    with lab_time_stopped(scenario.lab):
        _started(scenario, core, ns, pod("p", node=node, run_seconds=100))
        scenario.lose(node)
        scenario.advance(110)
        assert _running_processes(scenario, ns) == set()  # the machine ran it to the end...
        assert core.read_namespaced_pod("p", ns).status.phase == "Running"  # ...and nobody could tell the API
        scenario.recover(node)
        assert phase(scenario.wait_for_pod(ns, "p", lambda p: phase(p) != "Running")) == "Succeeded"


@pytest.mark.parametrize(
    ("restart_policy", "expected_phase", "restarts"), [("Never", "Failed", 1), ("OnFailure", "Running", 1)]
)
def test_power_off_stops_the_processes_and_a_reboot_decides_by_restart_policy(
    scenario: Scenario,
    core: kubernetes.client.CoreV1Api,
    zone: Zone,
    cluster_namespace: str,
    restart_policy: str,
    expected_phase: str,
    restarts: int,
) -> None:
    ns = cluster_namespace
    node = zone.node("n")
    zone.node("other")
    _started(scenario, core, ns, pod("p", node=node, restart_policy=restart_policy))
    with lab_time_stopped(scenario.lab) as off_at:  # the machine goes off at this very lab instant
        scenario.power_off(node)
        assert _running_processes(scenario, ns) == set()
        (record,) = scenario.processes(ns, "")
        assert record.stop == off_at
    scenario.advance(30)
    assert core.read_namespaced_pod("p", ns).status.phase == "Running"  # nothing told the API

    scenario.recover(node)
    after = scenario.wait_for_pod(
        ns,
        "p",
        lambda p: phase(p) == expected_phase and p["status"]["containerStatuses"][0]["restartCount"] == restarts,
    )
    container = after["status"]["containerStatuses"][0]  # type: ignore[index]
    # as the real kubelet v1.36.3 reported it after a reboot whose runtime forgot the container (docs/fidelity.md)
    assert container["lastState"] == {
        "terminated": {
            "exitCode": 137,
            "reason": "ContainerStatusUnknown",
            "message": "The container could not be located when the pod was deleted.  The container used to be Running",
        }
    }
    if expected_phase == "Failed":
        assert container["state"] == {
            "terminated": {
                "exitCode": 137,
                "reason": "ContainerStatusUnknown",
                "message": "The container could not be located when the pod was terminated",
            }
        }
    else:
        assert _running_processes(scenario, ns) == {"p"}


def test_a_not_ready_node_gets_the_not_ready_taint_until_it_is_ready_again(
    scenario: Scenario, zone: Zone, cluster_namespace: str
) -> None:
    node = zone.node("n")
    zone.node("other")
    scenario.set_not_ready(node)
    scenario.advance(10)
    tainted = scenario.wait_for_node(node, lambda n: NOT_READY_NO_EXECUTE in taint_keys(n))
    ready = condition(tainted, "Ready")
    assert ready is not None
    assert (ready["status"], ready["reason"]) == ("False", "KubeletNotReady")
    assert ("node.kubernetes.io/not-ready", "NoSchedule") in taint_keys(tainted)
    scenario.recover(node)
    scenario.advance(10)
    assert scenario.wait_for_node(node, lambda n: not taint_keys(n)) is not None


@pytest.mark.parametrize("effect", ["NoExecute", "NoSchedule"])
def test_out_of_service_on_a_ready_node_podgc_does_nothing(
    scenario: Scenario,
    core: kubernetes.client.CoreV1Api,
    zone: Zone,
    cluster_namespace: str,
    cluster_lab: Lab,
    effect: str,
) -> None:
    ns = cluster_namespace
    node = zone.node("n")
    _started(scenario, core, ns, pod("slow", node=node, termination_seconds=600, grace=900))
    core.delete_namespaced_pod("slow", ns)
    scenario.taint_out_of_service(node, effect=effect)
    passes = _gc_passes(cluster_lab)
    scenario.advance(60)
    # three of PodGC's passes since the taint, then time stands still: the pod's 600 s of termination are far off
    with lab_time_stopped_when(cluster_lab, _GcPasses(cluster_lab, passes + 3)):
        slow = core.read_namespaced_pod("slow", ns)
        assert slow.status.phase == "Running"  # not Failed: the node is Ready, so the taint proves nothing
        assert slow.metadata.deletion_grace_period_seconds == 900
        assert _running_processes(scenario, ns) == {"slow"}


def test_out_of_service_on_a_not_ready_node_podgc_fails_then_removes_the_pods(
    scenario: Scenario, core: kubernetes.client.CoreV1Api, zone: Zone, cluster_namespace: str
) -> None:
    ns = cluster_namespace
    node = zone.node("n")
    zone.node("other")
    _started(scenario, core, ns, pod("terminating", node=node, finalizer=True))
    _started(scenario, core, ns, pod("running", node=node, finalizer=True))
    _started(scenario, core, ns, pod("plain", node=node))
    scenario.freeze(node)
    core.delete_namespaced_pod("terminating", ns)
    core.delete_namespaced_pod("plain", ns)
    scenario.advance(60)
    unknown = Appears.node(scenario, node, lambda n: condition(n, "Ready")["status"] == "Unknown")  # type: ignore[index]
    with lab_time_stopped_when(scenario.lab, unknown):  # the unreachable taint's 300 s toleration has not run out
        assert core.read_namespaced_pod("running", ns).metadata.deletion_timestamp is None

    scenario.taint_out_of_service(node)  # NoExecute: the taint manager evicts "running" at once, then PodGC
    scenario.advance(25)
    for name in ("terminating", "running"):
        forced = scenario.wait_for_pod(ns, name, lambda p: p is not None and phase(p) == "Failed")
        assert forced["metadata"]["deletionGracePeriodSeconds"] == 0  # type: ignore[index]
        core.patch_namespaced_pod(name, ns, {"metadata": {"finalizers": None}})  # what the Job controller does
        assert scenario.wait_for_pod(ns, name, lambda p: p is None) is None
    assert scenario.wait_for_pod(ns, "plain", lambda p: p is None) is None
    # the taint was put on a node whose machine still runs: the API has no pods, the machine has three processes
    assert _running_processes(scenario, ns) == {"terminating", "running", "plain"}


def test_pods_of_a_deleted_node_go_after_the_quarantine_with_a_disruption_condition(
    scenario: Scenario, core: kubernetes.client.CoreV1Api, zone: Zone, cluster_namespace: str
) -> None:
    ns = cluster_namespace
    node = zone.node("n")
    _started(scenario, core, ns, pod("orphan", node=node, finalizer=True))
    with lab_time_stopped(scenario.lab) as deleted_at:  # the 40 s quarantine is lab time
        scenario.power_off(node)
        scenario.delete_node(node)
        scenario.advance(30)
        assert core.read_namespaced_pod("orphan", ns).status.phase == "Running"  # still in quarantine

    scenario.advance(40)
    failed = scenario.wait_for_pod(ns, "orphan", lambda p: phase(p) == "Failed")
    disruption = condition(failed, "DisruptionTarget")
    assert disruption is not None
    assert (disruption["reason"], disruption["message"]) == ("DeletionByPodGC", "PodGC: node no longer exists")
    assert parse_timestamp(disruption["lastTransitionTime"]) - deleted_at >= 40
    assert failed["metadata"]["deletionGracePeriodSeconds"] == 0  # type: ignore[index]
    core.patch_namespaced_pod("orphan", ns, {"metadata": {"finalizers": None}})
    assert wait_for(core.list_namespaced_pod, "orphan", lambda p: p is None, namespace=ns) is None


def test_unscheduled_terminating_pods_are_force_deleted(
    scenario: Scenario, core: kubernetes.client.CoreV1Api, cluster_namespace: str
) -> None:
    ns = cluster_namespace
    body = pod("never-bound", finalizer=True)
    body["spec"]["nodeSelector"] = {"example.com/no-such-node": "true"}
    core.create_namespaced_pod(ns, body)
    core.delete_namespaced_pod("never-bound", ns)  # unscheduled: grace 0, held by the finalizer
    scenario.advance(25)
    forced = scenario.wait_for_pod(ns, "never-bound", lambda p: phase(p) == "Failed")
    assert forced is not None
    assert forced["metadata"]["deletionTimestamp"]


def _trainjob_pod(name: str, node: str, admission: int) -> Obj:
    return pod(name, node=node, labels=execution_labels("tj", admission))


def test_the_recorder_catches_a_new_execution_starting_while_a_frozen_node_runs_the_old_one(
    scenario: Scenario, core: kubernetes.client.CoreV1Api, zone: Zone, cluster_namespace: str
) -> None:
    ns = cluster_namespace
    frozen, healthy = zone.node("frozen"), zone.node("healthy")
    _started(scenario, core, ns, _trainjob_pod("tj-node-0-0-old", frozen, admission=1))
    scenario.freeze(frozen)
    core.delete_namespaced_pod("tj-node-0-0-old", ns, grace_period_seconds=0)  # forced: the API forgets it
    assert scenario.wait_for_pod(ns, "tj-node-0-0-old", lambda p: p is None) is None
    assert scenario.overlaps(ns, "tj") == []
    _started(scenario, core, ns, _trainjob_pod("tj-node-0-0-new", healthy, admission=2))

    (overlap,) = scenario.overlaps(ns, "tj")
    assert {overlap.first.pod, overlap.second.pod} == {"tj-node-0-0-old", "tj-node-0-0-new"}
    assert overlap.end is None
    assert {e.admission for e in scenario.executions(ns, "tj")} == {"1", "2"}


def test_the_recorder_reports_no_overlap_when_the_old_execution_ended_first(
    scenario: Scenario, core: kubernetes.client.CoreV1Api, zone: Zone, cluster_namespace: str
) -> None:
    ns = cluster_namespace
    node = zone.node("n")
    _started(scenario, core, ns, pod("tj-node-0-0-old", node=node, labels=execution_labels("tj", 1), grace=30))
    core.delete_namespaced_pod("tj-node-0-0-old", ns)
    scenario.advance(5)
    assert scenario.wait_for_pod(ns, "tj-node-0-0-old", lambda p: p is None) is None
    _started(scenario, core, ns, _trainjob_pod("tj-node-0-0-new", node, admission=2))
    assert scenario.overlaps(ns, "tj") == []
    assert {e.admission for e in scenario.executions(ns, "tj")} == {"1", "2"}
    old, new = sorted(scenario.processes(ns, "tj"), key=lambda r: r.start)
    assert old.stop is not None
    assert old.stop <= new.start

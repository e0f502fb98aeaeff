"""Kueue with the whole simulated cluster: Trainer, JobSet, Jobs, the scheduler, kubelets, node lifecycle, PodGC.

The upstream flaw the dispatch rule exists for, end to end (k8s-apis.md §4.6, anchors.md §0.1): a preempted
TrainJob is suspended, its Job stops counting the pod that still terminates on a frozen node, Kueue releases
the quota at once, re-reserves it and, with no admission check, re-admits and unsuspends: new pods start while
the old process still runs. With a check that stays Pending the Workload keeps its quota and is not admitted.

Each test has nodes of its own zone (`nodes_support.Zone`) of 8 cpu, and pods requesting 8 cpu, so one pod fits
a node and the scheduler cannot place a new pod beside the old one on the frozen machine.
"""

from __future__ import annotations

from typing import Any

from airflow_provider_dispatch.dispatch.vocabulary import LABEL_JOB_ID, LABEL_SUBMISSION, POD_LABEL_ADMISSION
from airflow_provider_dispatch_lab.scenario import manifests
from airflow_provider_dispatch_lab.scenario.scenario import Scenario
from airflow_provider_dispatch_lab.simulated.controllers import NODE_CONTROLLERS, WORKLOAD_CONTROLLERS
from airflow_provider_dispatch_lab.simulated.kueue import KueueConfig, kueue_controllers
from airflow_provider_dispatch_lab.simulated.kueue import constants as k
from airflow_provider_dispatch_lab.truth.overlap import ProcessRecord

from .kueue_steps import Kueue, checks, condition, has, kueue_patch
from .nodes_support import Zone
from .workload_steps import trainjob_selector, unique

# The `Admitted=False` reason asserted below is the `UnadmittedWorkloadsObservability` gate's (off in v0.19.2, on
# in Kueue's main branch): turned on, as a cluster that enables it would.
CONTROLLERS = [
    *WORKLOAD_CONTROLLERS,
    *NODE_CONTROLLERS,
    *kueue_controllers(KueueConfig(unadmitted_workloads_observability=True)),
]
LAB_SPEED = 50.0
EXECUTION_MANAGER = "example.com/execution-labels"


def _queued(kueue: Kueue, zone: Zone, **queue_options: Any) -> tuple[str, str, tuple[str, ...], dict[str, Any]]:
    """Nodes a, b, c of the zone; a queue with quota for one TrainJob of two such pods; the TrainJob."""
    for node in ("a", "b", "c"):
        zone.node(node, cpu="8")
    setup = kueue.queues(cpu="16", **queue_options)
    runtime = kueue.zone_runtime(zone.name, pod_replacement_policy=None)  # upstream's runtime: Kueue alone
    name = unique("tj")
    body = manifests.trainjob(name, queue=setup.local_queue, runtime=runtime, num_nodes=2, suspend=False)
    labels = {LABEL_JOB_ID: name, LABEL_SUBMISSION: "1", POD_LABEL_ADMISSION: "1"}  # as dispatch's patch would
    body["spec"]["runtimePatches"] = [
        {
            "manager": EXECUTION_MANAGER,
            "trainingRuntimeSpec": {
                "template": {
                    "spec": {
                        "replicatedJobs": [
                            {"name": "node", "template": {"spec": {"template": {"metadata": {"labels": labels}}}}}
                        ]
                    }
                }
            },
        }
    ]
    created = kueue.create_trainjob(body)
    return name, kueue.workload_name(name), setup.admission_checks, created


def _running(pods: list[Any], count: int) -> bool:
    live = [p for p in pods if not p.metadata.deletion_timestamp]
    return len(live) == count and all(p.status.phase == "Running" for p in live)


def _slot(record: ProcessRecord) -> str:
    """The replica a pod stands for: its name without the generated suffix (`<tj>-node-<job>-<index>`)."""
    return record.pod.rsplit("-", 1)[0]


def _same_replica_overlaps(processes: list[ProcessRecord]) -> list[tuple[ProcessRecord, ProcessRecord]]:
    """Two pods of one replica whose processes ran at once: two executions of that replica."""
    return [
        (a, b)
        for i, a in enumerate(processes)
        for b in processes[i + 1 :]
        if _slot(a) == _slot(b) and a.pod_uid != b.pod_uid and a.intersects(b)
    ]


def test_a_queued_trainjob_is_admitted_and_its_pods_run(kueue: Kueue, scenario: Scenario) -> None:
    zone = Zone(scenario)
    name, wl, _, created = _queued(kueue, zone)
    # Trainer's defaulter (configuration `defaulter.trainer...`) runs before Kueue's (`kueue-mutating-...`):
    # the user's patch is stamped, Kueue's appended entry is not, until Kueue's own update changes it
    stamped = {p["manager"]: "time" in p for p in created["spec"]["runtimePatches"]}
    assert stamped == {EXECUTION_MANAGER: True, k.RUNTIME_PATCH_MANAGER: False}
    assert created["spec"]["suspend"] is True
    pods = kueue.wait_pods(trainjob_selector(name), lambda pods: _running(pods, 2))
    assert {p.metadata.labels[k.PODSET_LABEL] for p in pods} == {"node"}  # Kueue's runtime patch reached the pods
    admitted = kueue.workload(wl)
    assert has(admitted, k.ADMITTED, "True", k.REASON_ADMITTED)
    started = kueue.trainjob(name)
    assert started["spec"]["suspend"] is False
    assert "time" in kueue_patch(started)


def test_preemption_beside_a_frozen_node_readmits_while_the_old_pod_runs(kueue: Kueue, scenario: Scenario) -> None:
    zone = Zone(scenario)
    name, wl, _, _ = _queued(kueue, zone)
    selector = trainjob_selector(name)
    first = kueue.wait_pods(selector, lambda pods: _running(pods, 2))
    frozen = first[0].spec.node_name
    scenario.freeze(frozen)

    kueue.scenario.preempt(kueue.namespace, wl)
    released = kueue.wait_workload(wl, lambda w: has(w, k.REQUEUED, "True", k.EVICTED_BY_PREEMPTION))
    assert condition(released, k.EVICTED)["reason"] == k.EVICTED_BY_PREEMPTION
    stuck = [p for p in kueue.pods(selector) if p.spec.node_name == frozen]
    assert len(stuck) == 1
    assert stuck[0].metadata.deletion_timestamp is not None  # quota released while the pod still terminates

    readmitted = kueue.wait_workload(wl, lambda w: has(w, k.ADMITTED, "True"))
    assert has(readmitted, k.QUOTA_RESERVED, "True")
    kueue.wait_pods(selector, lambda pods: _running(pods, 2))
    old = [p for p in scenario.processes(kueue.namespace, name) if p.pod_uid == stuck[0].metadata.uid]
    assert [p.running for p in old] == [True]  # the frozen machine still runs the first execution's process
    overlaps = _same_replica_overlaps(scenario.processes(kueue.namespace, name))
    assert overlaps, "Kueue re-admitted while the preempted pod's process still ran"
    assert {frozen} <= {record.node for pair in overlaps for record in pair}
    # The recorder's own verdict agrees: it counts Kueue's two admissions from the store, not from the pods'
    # identity labels (which Kueue alone does not change), so the second admission overlapping the first is seen.
    recorded = scenario.overlaps(kueue.namespace, name)
    assert {(o.first.admission, o.second.admission) for o in recorded} == {(1, 2)}
    assert {frozen} <= {record.node for o in recorded for record in (o.first, o.second)}


def test_a_check_that_stays_pending_keeps_the_quota_and_the_trainjob_suspended(
    kueue: Kueue, scenario: Scenario
) -> None:
    zone = Zone(scenario)
    name, wl, check_names, _ = _queued(kueue, zone, checks=("drained",))
    [check_name] = check_names
    kueue.wait_workload(
        wl, lambda w: bool(checks(w)) and has(w, k.ADMITTED, "False", k.REASON_UNSATISFIED_CHECKS)
    )  # Kueue's last write after the reservation (see test_kueue_admission.reserved_and_checked)
    kueue.scenario.set_check_state(kueue.namespace, wl, check_name, k.CHECK_READY, "no pods remain")
    selector = trainjob_selector(name)
    first = kueue.wait_pods(selector, lambda pods: _running(pods, 2))
    frozen = first[0].spec.node_name
    scenario.freeze(frozen)

    kueue.scenario.preempt(kueue.namespace, wl)
    held = kueue.wait_workload(
        wl, lambda w: has(w, k.REQUEUED, "True", k.EVICTED_BY_PREEMPTION) and has(w, k.QUOTA_RESERVED, "True")
    )
    assert has(held, k.ADMITTED, "False", k.REASON_UNSATISFIED_CHECKS)
    assert checks(held)[check_name]["state"] == k.CHECK_PENDING
    assert checks(held)[check_name]["message"] == "Reset to Pending after eviction. Previously: Ready"
    scenario.advance(40)  # past the grace period: the healthy node's pod is gone, the frozen one's is not
    remaining = kueue.wait_pods(selector, lambda pods: len(pods) == 1)
    assert remaining[0].spec.node_name == frozen
    still = kueue.workload(wl)
    assert has(still, k.QUOTA_RESERVED, "True")
    assert not has(still, k.ADMITTED, "True")
    assert kueue.trainjob(name)["spec"]["suspend"] is True
    assert _same_replica_overlaps(scenario.processes(kueue.namespace, name)) == []
    assert scenario.overlaps(kueue.namespace, name) == []

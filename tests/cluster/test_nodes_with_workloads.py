"""The whole simulated cluster at once: a TrainJob through Trainer, JobSet and the Job controller, its pods
scheduled and run by the node side, and the upstream flaw the dispatch rule exists for, seen by the overlap
recorder: suspend a TrainJob whose pod sits on a frozen node, change its runtime patch (accepted: no Job
counts the Terminating pod as active) and resume: the new execution runs beside the old one.
"""

from __future__ import annotations

from typing import Any

from airflow_provider_dispatch.dispatch.vocabulary import LABEL_JOB_ID, LABEL_SUBMISSION, POD_LABEL_ADMISSION
from airflow_provider_dispatch_lab.scenario import manifests
from airflow_provider_dispatch_lab.scenario.scenario import Scenario
from airflow_provider_dispatch_lab.simulated.controllers import NODE_CONTROLLERS, WORKLOAD_CONTROLLERS

from .nodes_support import Zone
from .workload_steps import Workloads, runtime, trainjob_selector, unique

CONTROLLERS = [*WORKLOAD_CONTROLLERS, *NODE_CONTROLLERS]
LAB_SPEED = 20.0
MANAGER = "example.com/execution-labels"


def _execution_patch(admission: int) -> dict[str, Any]:
    """Labels the pods with A, as dispatch's runtime patch does (DESIGN §2)."""
    labels = {LABEL_JOB_ID: "job-1", LABEL_SUBMISSION: "1", POD_LABEL_ADMISSION: str(admission)}
    pod_template = {"metadata": {"labels": labels}}
    return {
        "manager": MANAGER,
        "trainingRuntimeSpec": {
            "template": {
                "spec": {"replicatedJobs": [{"name": "node", "template": {"spec": {"template": pod_template}}}]}
            }
        },
    }


def _running(pods: list[Any], count: int, admission: str) -> bool:
    mine = [p for p in pods if (p.metadata.labels or {}).get(POD_LABEL_ADMISSION) == admission]
    return len(mine) == count and all(p.status.phase == "Running" and not p.metadata.deletion_timestamp for p in mine)


def test_resuming_beside_a_frozen_node_overlaps_two_executions(
    scenario: Scenario, workloads: Workloads, cluster_namespace: str
) -> None:
    ns = cluster_namespace
    zone = Zone(scenario)
    nodes = [zone.node("a"), zone.node("b"), zone.node("c")]
    name = unique("tj")
    workloads.create_runtime(runtime(name, grace_seconds=30))
    body = manifests.trainjob(name, runtime=name, num_nodes=2, suspend=False)
    body["spec"]["runtimePatches"] = [_execution_patch(1)]
    workloads.create_trainjob(body)
    selector = trainjob_selector(name)
    first = workloads.wait_pods(selector, lambda pods: _running(pods, 2, "1"))
    assert {p.spec.node_name for p in first} <= set(nodes)

    stuck = first[0].spec.node_name
    scenario.freeze(stuck)
    workloads.update_trainjob(name, lambda spec: spec.update(suspend=True))
    workloads.wait_trainjob(name, lambda tj: tj is not None and _active(tj) == 0)
    scenario.advance(35)  # the healthy node's pod is gone; the frozen node's stays Terminating
    remaining = workloads.wait_pods(selector, lambda pods: len(pods) == 1)
    assert remaining[0].spec.node_name == stuck
    assert remaining[0].metadata.deletion_timestamp is not None
    assert scenario.overlaps(ns, name) == []

    def readmit(spec: dict[str, Any]) -> None:
        spec["runtimePatches"] = [_execution_patch(2)]
        spec["suspend"] = False

    workloads.update_trainjob(name, readmit)  # accepted by Trainer's webhook: the JobSet counts 0 active
    workloads.wait_pods(selector, lambda pods: _running(pods, 2, "2"))

    overlaps = scenario.overlaps(ns, name)
    assert overlaps, "a new execution started while the old one ran on the frozen machine"
    assert all({o.first.execution.admission, o.second.execution.admission} == {"1", "2"} for o in overlaps)
    assert {e.admission for e in scenario.executions(ns, name)} == {"1", "2"}


def _active(trainjob: dict[str, Any]) -> int:
    return sum(int(entry.get("active") or 0) for entry in (trainjob.get("status") or {}).get("jobsStatus") or [])

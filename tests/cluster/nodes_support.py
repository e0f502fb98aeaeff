"""Helpers for the node-side tests: nodes in a zone of the test's own, and pods shaped for the kubelet.

The tests of one module share a lab, and Nodes are cluster-scoped, so each test makes its nodes in a zone of
its own (`topology.kubernetes.io/zone`) and its pods select that zone: the scheduler never mixes tests, and
the node lifecycle controller judges each test's zone on its own (its disruption modes are per zone).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from airflow_provider_dispatch.dispatch.vocabulary import (
    LABEL_JOB_ID,
    LABEL_JOBSET_NAME,
    LABEL_SUBMISSION,
    POD_LABEL_ADMISSION,
)
from airflow_provider_dispatch_lab.kinds import NODE, POD, ApiCoordinates
from airflow_provider_dispatch_lab.scenario import manifests
from airflow_provider_dispatch_lab.scenario.scenario import Scenario
from airflow_provider_dispatch_lab.simulated.nodes import workload

Obj = dict[str, Any]
ZONE_LABEL = "topology.kubernetes.io/zone"
JOB_TRACKING = "batch.kubernetes.io/job-tracking"


class Zone:
    """Nodes named `<zone>-<name>` in a zone of their own."""

    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario
        self.name = f"z{uuid.uuid4().hex[:8]}"

    def node(self, name: str, **options: Any) -> str:
        full = f"{self.name}-{name}"
        labels = {ZONE_LABEL: self.name, **options.pop("labels", {})}
        self.scenario.add_node(full, labels=labels, **options)
        return full


def pod(
    name: str,
    *,
    node: str | None = None,
    zone: Zone | None = None,
    run_seconds: float | None = None,
    exit_code: int | None = None,
    termination_seconds: float | None = None,
    grace: int | None = 30,
    restart_policy: str = "Never",
    finalizer: bool = False,
    labels: dict[str, str] | None = None,
    cpu: str | None = None,
) -> Obj:
    """A pod bound to `node` (the scheduler is bypassed) or selecting `zone`, with workload annotations."""
    body = manifests.pod(
        name, node_name=node, labels=labels, grace_seconds=grace, finalizers=[JOB_TRACKING] if finalizer else None
    )
    body["spec"]["restartPolicy"] = restart_policy
    if zone is not None:
        body["spec"]["nodeSelector"] = {ZONE_LABEL: zone.name}
    if cpu is not None:
        body["spec"]["containers"][0]["resources"] = {"requests": {"cpu": cpu}}
    annotations: dict[str, str] = {}
    if run_seconds is not None:
        annotations[workload.RUN_SECONDS] = str(run_seconds)
    if exit_code is not None:
        annotations[workload.EXIT_CODE] = str(exit_code)
    if termination_seconds is not None:
        annotations[workload.TERMINATION_SECONDS] = str(termination_seconds)
    if annotations:
        body["metadata"]["annotations"] = annotations
    return body


def execution_labels(trainjob: str, admission: int | None, *, job_id: str = "job-1", submission: str = "1") -> dict:
    labels = {LABEL_JOBSET_NAME: trainjob, LABEL_JOB_ID: job_id, LABEL_SUBMISSION: submission}
    if admission is not None:
        labels[POD_LABEL_ADMISSION] = str(admission)
    return labels


def condition(obj: Obj | None, kind: str) -> Obj | None:
    for entry in ((obj or {}).get("status") or {}).get("conditions") or ():
        if entry.get("type") == kind:
            return dict(entry)
    return None


def phase(obj: Obj | None) -> str | None:
    return None if obj is None else (obj.get("status") or {}).get("phase")


def taint_keys(node: Obj | None) -> set[tuple[str, str]]:
    return {(t["key"], t["effect"]) for t in ((node or {}).get("spec") or {}).get("taints") or ()}


class Appears:
    """For `lab_time.lab_time_stopped_when`: the object once `predicate` holds, through the scenario's watch on the
    lab's loop; its repr says what it waits for and what it saw last (the message of a wait that timed out)."""

    def __init__(
        self,
        scenario: Scenario,
        coords: ApiCoordinates,
        namespace: str | None,
        name: str,
        predicate: Callable[[Obj | None], bool],
    ) -> None:
        self.scenario, self.coords, self.namespace, self.name, self.predicate = (
            scenario,
            coords,
            namespace,
            name,
            predicate,
        )
        self.seen: list[Obj | None] = []

    async def __call__(self) -> Obj | None:
        return await self.scenario.inner.wait_for(self.coords, self.namespace, self.name, self.predicate, self.seen)

    def __repr__(self) -> str:
        last = repr(self.seen[-1])[:2000] if self.seen else "nothing"
        return f"{self.coords.plural} {self.name}; last seen: {last}"

    @classmethod
    def node(cls, scenario: Scenario, name: str, predicate: Callable[[Obj | None], bool]) -> Appears:
        return cls(scenario, NODE, None, name, predicate)

    @classmethod
    def pod(cls, scenario: Scenario, namespace: str, name: str, predicate: Callable[[Obj | None], bool]) -> Appears:
        return cls(scenario, POD, namespace, name, predicate)

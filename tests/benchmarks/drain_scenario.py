"""The namespace a drain check benchmark reads: one TrainJob's pods among many neighbours, grown in place.

One namespace per benchmark run holds the TrainJob `ft-bench` (dispatch-managed, held) with `job_pods` running
ranks on `nodes` Nodes, and neighbour pods of other TrainJobs (`bg-<g>`, `job_pods` each) that the drain check
must skip. `grow(total)` adds neighbours until the namespace holds `total` pods, so 1,000, 10,000 and 50,000
are measured on the same namespace one after the other, and seeding costs 50,000 pods, not 61,000.

The Namespace, the Nodes and the TrainJob are created through the API with the official client, as a user
would; the pods through the lab's bulk seeding (`lab/apiserver/seeding.py`), which runs the API server's own create and
status-write path for each. Nothing here is measured.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import kubernetes

from airflow_provider_dispatch.dispatch import vocabulary as v
from airflow_provider_dispatch.dispatch.selection import Selection
from airflow_provider_dispatch_lab.scenario import manifests

from .pods import neighbour_template, pod_template


class Endpoint(Protocol):
    """What seeding needs of a server: the lab's `harness.lab_process.LabEndpoint`, or the real API server's
    `real_seeding.RealEndpoint`."""

    def call(self, method: str, path: str, body: Mapping[str, Any] | None = None, timeout: float = 600.0) -> Any: ...

    def seed(
        self, path: str, template: Mapping[str, Any], count: int, *, start: int = 0, group_size: int = 1
    ) -> int: ...


TRAINJOB = "ft-bench"
SUBMISSION = "1"


@dataclass
class DrainNamespace:
    """A benchmark namespace and what it holds so far."""

    namespace: str
    job_pods: int
    nodes: tuple[str, ...]
    trainjob: str = TRAINJOB
    neighbours: int = 0
    pod_bytes: int = 0

    @property
    def pods(self) -> int:
        return self.job_pods + self.neighbours

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.trainjob}"

    @property
    def selection(self) -> Selection:
        return Selection(self.namespace, self.trainjob, self.trainjob, SUBMISSION)

    def as_json(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "trainjob": self.trainjob,
            "jobId": self.trainjob,
            "submission": SUBMISSION,
            "jobPods": self.job_pods,
            "pods": self.pods,
        }

    def pods_path(self) -> str:
        return v.POD.path(self.namespace)

    def grow(self, lab: Endpoint, total: int) -> None:
        """Add neighbour pods until the namespace holds `total` pods (never fewer than it has)."""
        wanted = total - self.job_pods - self.neighbours
        if wanted < 0:
            raise ValueError(f"namespace {self.namespace} already holds {self.pods} pods, more than {total}")
        if wanted:
            template = neighbour_template()
            lab.seed(self.pods_path(), template, wanted, start=self.neighbours, group_size=self.job_pods)
            self.neighbours += wanted


def build(
    api: kubernetes.client.ApiClient, lab: Endpoint, namespace: str, *, job_pods: int, nodes: int
) -> DrainNamespace:
    """The namespace with the TrainJob, its Nodes and its `job_pods` ranks (no neighbours yet)."""
    if job_pods < 1 or nodes < 1 or job_pods % nodes:
        raise ValueError(f"job_pods ({job_pods}) must be a positive multiple of nodes ({nodes})")
    core = kubernetes.client.CoreV1Api(api)
    custom = kubernetes.client.CustomObjectsApi(api)
    core.create_namespace({"metadata": {"name": namespace}})
    node_names = tuple(f"{namespace}-node-{k}" for k in range(nodes))
    for name in node_names:
        core.create_node(manifests.node(name, gpus=8))
    trainjob = manifests.trainjob(TRAINJOB, job_id=TRAINJOB, submission=SUBMISSION, num_nodes=job_pods, admission=1)
    custom.create_namespaced_custom_object(v.TRAINJOB.group, v.TRAINJOB.version, namespace, v.TRAINJOB.plural, trainjob)
    built = DrainNamespace(namespace, job_pods, node_names)
    ranks = pod_template(
        TRAINJOB,
        job_id=TRAINJOB,
        submission=SUBMISSION,
        name=f"{TRAINJOB}-node-0-{{i}}-x7k2p",
        node=f"{namespace}-node-{{g}}",
    )
    lab.seed(built.pods_path(), ranks, job_pods, group_size=job_pods // nodes)
    first = lab.call("GET", v.POD.path(namespace, f"{TRAINJOB}-node-0-0-x7k2p"))
    built.pod_bytes = len(json.dumps(first, separators=(",", ":")).encode())  # one pod as the API serves it
    return built

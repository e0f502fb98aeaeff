"""A held TrainJob for the benchmarks that time how its drain is seen (detection latency, slot seconds).

One shape for both, so their figures are of the same cluster state: TrainJob `TRAINJOB` held after its second
execution, with one Terminating pod on a Ready node, in a fresh namespace of its own.
"""

from __future__ import annotations

import uuid
from typing import Final

import kubernetes

TRAINJOB: Final = "ft-7"


def held_trainjob(admin: kubernetes.client.ApiClient, prefix: str) -> tuple[str, str]:
    """A fresh namespace `<prefix>-...` holding TrainJob `TRAINJOB`, held, with one Terminating pod on a Ready
    node. Returns (namespace, pod)."""
    from dispatch_lab.cluster import Cluster  # tests/ is on the worker's path (harness.workers)

    cluster = Cluster(admin, "")
    cluster.namespace = f"{prefix}-{cluster.suffix}-{uuid.uuid4().hex[:4]}"
    cluster.core.create_namespace({"metadata": {"name": cluster.namespace}})
    node = cluster.node("n1")
    _, (pod,) = cluster.held_after_execution(TRAINJOB, runtime=cluster.runtime(), admission=2, pods_on=[node])
    return cluster.namespace, pod

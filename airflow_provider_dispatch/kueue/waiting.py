"""Which waiting Workloads a pod or node event concerns, so the check runs again when something changed.

While pods of the previous execution remain, the check stays Pending and is looked at again after a backoff;
but the moment it can pass is a pod event (the last pod is deleted) or a node event (the node is deleted, or
tainted out-of-service and not Ready, which lets PodGC delete its pods). This index maps those events to the
Workloads that wait: by the TrainJob (namespace and the `jobset.sigs.k8s.io/jobset-name` label every pod of it
carries), by its execution labels (job id and submission, the other half of the selection, DESIGN §3.3), and by
the nodes the remaining pods are on. It only ever makes the controller look sooner; a missed event costs a
backoff, never a wrong verdict, since the check reads the pods itself.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_dispatch.dispatch import vocabulary as v
from airflow_provider_dispatch.dispatch.nodes import NodeRead, node_state

Key = tuple[str, str]


@dataclass
class _Waiter:
    trainjob: Key
    identity: tuple[str, str, str] | None
    nodes: frozenset[str]


@dataclass
class WaitingIndex:
    _waiters: dict[Key, _Waiter] = field(default_factory=dict)

    def wait(
        self, workload: Key, trainjob: Key, identity: tuple[str, str, str] | None, nodes: Iterable[str | None]
    ) -> None:
        self._waiters[workload] = _Waiter(trainjob, identity, frozenset(n for n in nodes if n))

    def clear(self, workload: Key) -> None:
        self._waiters.pop(workload, None)

    def __contains__(self, workload: Key) -> bool:
        return workload in self._waiters

    def all(self) -> set[Key]:
        return set(self._waiters)

    def for_pod(self, pod: Mapping[str, Any]) -> set[Key]:
        namespace = v.namespace_of(pod)
        labels = v.labels_of(pod)
        trainjob = (namespace, labels.get(v.LABEL_JOBSET_NAME, ""))
        identity = (namespace, labels.get(v.LABEL_JOB_ID, ""), labels.get(v.LABEL_SUBMISSION, ""))
        return {key for key, w in self._waiters.items() if w.trainjob == trainjob or w.identity == identity}

    def for_node(self, node: str) -> set[Key]:
        return {key for key, w in self._waiters.items() if node in w.nodes}


def node_signature(node: Mapping[str, Any] | None) -> str:
    """What of a Node can change the drain check's verdict (`NodeState.change_key`, the one the triggers compare
    too): its Ready status and for how long it has reported it (fencing.py: a node back from a partition), the
    out-of-service taint; a deleted Node (None) is gone."""
    name = v.name_of(node) or "(deleted)"
    return node_state(name, NodeRead.GONE if node is None else node).change_key


__all__ = ["WaitingIndex", "node_signature"]

"""Which selected pods remain, i.e. block an admission (DESIGN §3.4).

A selected pod remains unless its phase is Succeeded or Failed: a terminal pod has no running container, even
while it waits to be deleted, and without this exception a Job that keeps a finished rank's pod across a
suspend would block re-admission for good (the seed). Everything else remains: Pending, Running, the
deprecated Unknown, a missing phase, and in particular a Running or Pending pod with a deletionTimestamp
(Terminating), since its containers may still run until its kubelet confirms termination (k8s-apis §5.2).

The exception to the exception: a pod that Kueue's failure recovery marked Failed (condition
`KueueFailureRecovery` True, k8s-apis §4.7) got that phase from a controller without any proof that its
containers stopped. It remains until its node is ceased (nodes.py), which is exactly when such proof exists.

Decision on PodGC's Failed pods (condition `DisruptionTarget`, reason `DeletionByPodGC`, and the pods PodGC
fails in `gcTerminating`): they do NOT block. PodGC writes Failed only once cessation is proven by our own
definition, the node is deleted (`gcOrphaned`, after a 40s quarantine and a live GET) or it is out-of-service
and not Ready (`gcTerminating`) (k8s-apis §5.4, §5.5), and it force-deletes the pod right after. Making them
wait for the node again would add nothing but a stall if a node of the same name came back Ready. Any other
`DisruptionTarget` reason (preemption, eviction, taint manager) does not write the phase; a Failed phase there
came from the kubelet.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from airflow_provider_dispatch.dispatch.nodes import NodeLookup, NodeState, node_state
from airflow_provider_dispatch.dispatch.vocabulary import (
    CONDITION_KUEUE_FAILURE_RECOVERY,
    PHASE_FAILED,
    TERMINAL_PHASES,
    condition_is_true,
    field,
    name_of,
    namespace_of,
)


class Blocking(StrEnum):
    """Why a selected pod remains."""

    #: its phase is not Succeeded or Failed: its containers may run
    NOT_FINISHED = "not finished"
    #: phase Failed written by Kueue's failure recovery, not by a kubelet: no proof its containers stopped
    FAILED_WITHOUT_PROOF = "marked Failed by Kueue failure recovery without proof of cessation"
    #: recorded at the hold, its object is gone, and its node never confirmed its end (fencing.py)
    VANISHED = "deleted from the API while its node could not confirm that it stopped"


def phase_of(pod: Mapping[str, Any]) -> str:
    phase = field(pod, "status", "phase")
    return phase if isinstance(phase, str) else ""


def blocking(pod: Mapping[str, Any]) -> Blocking | None:
    """Why this pod may block, before its node is considered; None when it never blocks."""
    phase = phase_of(pod)
    if phase not in TERMINAL_PHASES:
        return Blocking.NOT_FINISHED
    if phase == PHASE_FAILED and condition_is_true(pod, CONDITION_KUEUE_FAILURE_RECOVERY):
        return Blocking.FAILED_WITHOUT_PROOF
    return None


def node_name_of(pod: Mapping[str, Any]) -> str | None:
    value = field(pod, "spec", "nodeName")
    return value if isinstance(value, str) and value else None


@dataclass(frozen=True)
class RemainingPod:
    """A pod of the object that blocks, with the state of its node."""

    name: str
    namespace: str
    uid: str | None
    phase: str
    node: NodeState
    blocking: Blocking
    deletion_timestamp: str | None = None
    #: the pod's deletion grace; for a vanished pod, the longest grace its record kept for the node (fencing.py)
    deletion_grace_period_seconds: int | None = None
    #: recorded at the hold, no longer carries the labels the drain check selects by (fencing.py)
    relabelled: bool = False

    @property
    def ceased(self) -> bool:
        return self.node.ceased

    @property
    def terminating(self) -> bool:
        return self.deletion_timestamp is not None

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "namespace": self.namespace,
            "uid": self.uid,
            "phase": self.phase,
            "node": self.node.name,
            "node_state": self.node.label,
            "out_of_service": self.node.out_of_service,
            "ceased": self.ceased,
            "blocking": self.blocking.value,
            "deletion_timestamp": self.deletion_timestamp,
            "relabelled": self.relabelled,
        }


def nodes_to_read(pods: Iterable[Mapping[str, Any]]) -> tuple[str, ...]:
    """The distinct nodes of the pods that may block, in first-seen order: the only Nodes worth a GET."""
    seen: dict[str, None] = {}
    for pod in pods:
        node = node_name_of(pod)
        if node is not None and blocking(pod) is not None:
            seen.setdefault(node, None)
    return tuple(seen)


def remaining_pods(
    pods: Iterable[Mapping[str, Any]], nodes: Mapping[str, NodeLookup], *, relabelled: bool = False
) -> tuple[RemainingPod, ...]:
    """The selected pods that remain, given what was read of their nodes (one not in `nodes` is unknown).
    `relabelled`: the pods were found by the hold's record, not by the labels (fencing.py)."""
    result: list[RemainingPod] = []
    for pod in pods:
        reason = blocking(pod)
        if reason is None:
            continue
        node = node_name_of(pod)
        state = node_state(node, nodes.get(node) if node is not None else None)
        if reason is Blocking.FAILED_WITHOUT_PROOF and state.ceased:
            continue
        uid = field(pod, "metadata", "uid")
        deletion = field(pod, "metadata", "deletionTimestamp")
        grace = field(pod, "metadata", "deletionGracePeriodSeconds")
        result.append(
            RemainingPod(
                name=name_of(pod),
                namespace=namespace_of(pod),
                uid=uid if isinstance(uid, str) else None,
                phase=phase_of(pod) or "unknown",
                node=state,
                blocking=reason,
                deletion_timestamp=deletion if isinstance(deletion, str) else None,
                deletion_grace_period_seconds=grace if isinstance(grace, int) else None,
                relabelled=relabelled,
            )
        )
    return tuple(result)

"""Fencing on nodes, not only on pod objects (anchors §8.1): the pods a hold saw, and those that vanished since.

A listing of pods cannot see a pod whose object was deleted while its process runs on: a force deletion
(`kubectl delete pod --force --grace-period=0`), Kueue's failure recovery deleting what it marked Failed
(k8s-apis §4.7), a third-party cleaner. On a lost node that process is exactly the one the rule is for
(anchors §0.5). So the plain-mode hold records, in the same conditional write that suspends, which pods of the
execution were not finished and on which node (`dispatch.phpboyscout.uk/execution-pods`, tagged with the
admission number A). Every later drain check compares the record with what it lists:

* a recorded pod that is still listed is judged as always (blocking.py);
* a recorded pod that is no longer listed blocks while its node is in a state where nobody confirmed that its
  containers stopped: `Ready=False`, `Ready=Unknown` or `not readable`, without being ceased (nodes.py). It
  stops blocking once the node is `Ready=True` (a live kubelet acts on the deletion it sees and kills
  containers of pods no longer in the API: `kubelet.go` `HandlePodCleanups`, k8s-apis §5.2), ceased
  (out-of-service and not Ready, PodGC's own test) or gone (deleted: DESIGN §4).

Decisions and their limits:

* The record names the pods of execution A only; an admission raises A, so a record of an earlier execution
  is never consulted (the admission write also drops it).
* A pod whose object vanished normally (the kubelet confirmed its end) and whose node then stopped reporting is
  indistinguishable, by listing, from a force-deleted one: it blocks too, until its node is Ready, ceased or
  gone. That is the price of closing the gap, paid only when a node of the previous execution is unhealthy.
* A reader that may not read Nodes never sees a vanished pod's node as Ready, so after a hold it waits until
  it is granted `get` on nodes (the explanation says so).
* What the hold cannot see it cannot record: a pod force-deleted before the hold, or created between the
  hold's read and the moment the Jobs observe the suspension (the hold is not yet observed then, and release
  refuses until it is, so such a pod is listed unless it, too, is force-deleted).
* Kueue mode: Kueue suspends on its own (preemption, eviction) without a dispatch hold, so there is no record
  there; the admission check judges the pods it lists.
* Size: a record holds at most `MAX_RECORDED_NAMES` names (annotations share 256 KiB per object); beyond, it
  keeps the nodes with no names, and a recorded node without names blocks, while it is unhealthy, unless a
  listed pod of the object on it already does.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from airflow_provider_dispatch.dispatch.blocking import (
    Blocking,
    RemainingPod,
    blocking,
    node_name_of,
    nodes_to_read,
    remaining_pods,
)
from airflow_provider_dispatch.dispatch.errors import NotManagedError
from airflow_provider_dispatch.dispatch.nodes import NodeLookup, NodeState, Readiness, node_state
from airflow_provider_dispatch.dispatch.vocabulary import ANNOTATION_EXECUTION_PODS, annotations_of, name_of

#: names kept in one record; beyond, only the nodes are kept (module docstring)
MAX_RECORDED_NAMES: Final = 2000
#: the name shown for the pods of a recorded node whose names were not kept
UNNAMED: Final = "(unnamed pods of the execution)"


@dataclass(frozen=True)
class ExecutionPods:
    """What a hold saw: per node, the names of the execution's pods that were not finished (empty: not kept)."""

    admission: int
    nodes: Mapping[str, tuple[str, ...]]

    def to_annotation(self) -> str:
        body = {"admission": self.admission, "nodes": {node: list(names) for node, names in self.nodes.items()}}
        return json.dumps(body, sort_keys=True, separators=(",", ":"))


def record(admission: int, pods: Iterable[Mapping[str, Any]]) -> ExecutionPods:
    """The record of the selected `pods` that block (not finished), by node; pods on no node run nothing."""
    by_node: dict[str, list[str]] = {}
    for pod in pods:
        node = node_name_of(pod)
        if node is not None and blocking(pod) is not None:
            by_node.setdefault(node, []).append(name_of(pod))
    total = sum(len(names) for names in by_node.values())
    keep = total <= MAX_RECORDED_NAMES
    return ExecutionPods(
        admission, {node: tuple(sorted(names)) if keep else () for node, names in sorted(by_node.items())}
    )


def _malformed(ref: str, why: str) -> NotManagedError:
    return NotManagedError(
        f"TrainJob {ref} carries a malformed {ANNOTATION_EXECUTION_PODS} annotation ({why}). dispatch writes it "
        "when it holds the TrainJob, to remember the nodes of the previous execution; nothing else should. "
        "Confirm that no pod of the previous execution still runs on its nodes, then remove the annotation.",
        ref=ref,
    )


def recorded(trainjob: Mapping[str, Any], admission: int, ref: str) -> ExecutionPods | None:
    """The hold's record for execution `admission`, or None (no record, or one of another execution)."""
    raw = annotations_of(trainjob).get(ANNOTATION_EXECUTION_PODS)
    if raw is None:
        return None
    try:
        body = json.loads(raw)
    except ValueError:
        raise _malformed(ref, "not JSON") from None
    if not isinstance(body, dict) or not isinstance(body.get("admission"), int) or isinstance(body["admission"], bool):
        raise _malformed(ref, "no integer admission")
    nodes = body.get("nodes")
    if not isinstance(nodes, dict) or not all(
        isinstance(node, str) and isinstance(names, list) and all(isinstance(n, str) for n in names)
        for node, names in nodes.items()
    ):
        raise _malformed(ref, "nodes is not a map of node names to lists of pod names")
    if body["admission"] != admission:
        return None
    return ExecutionPods(body["admission"], {node: tuple(names) for node, names in nodes.items()})


def unconfirmed(state: NodeState) -> bool:
    """Nobody confirmed that containers of a pod deleted on this node stopped (module docstring)."""
    return not state.ceased and state.ready is not Readiness.TRUE


def vanished_pods(
    execution_pods: ExecutionPods | None,
    namespace: str,
    listed: Iterable[Mapping[str, Any]],
    remaining: Iterable[RemainingPod],
    nodes: Mapping[str, NodeLookup],
) -> tuple[RemainingPod, ...]:
    """The recorded pods that are no longer listed and whose node did not confirm their end: they remain.

    `listed` are the object's selected pods as read now; `remaining` those of them that block (blocking.py);
    `nodes` what was read of the recorded nodes (one not in it reads as not readable: never confirmed).
    """
    if execution_pods is None:
        return ()
    names = {name_of(pod) for pod in listed}
    blocked_nodes = {pod.node.name for pod in remaining}
    result: list[RemainingPod] = []
    for node, recorded_names in execution_pods.nodes.items():
        state = node_state(node, nodes.get(node))
        if not unconfirmed(state):
            continue
        if not recorded_names:
            if node not in blocked_nodes:
                result.append(_vanished(UNNAMED, namespace, state))
            continue
        result.extend(_vanished(name, namespace, state) for name in recorded_names if name not in names)
    return tuple(result)


def _vanished(name: str, namespace: str, state: NodeState) -> RemainingPod:
    return RemainingPod(
        name=name, namespace=namespace, uid=None, phase="deleted", node=state, blocking=Blocking.VANISHED
    )


def nodes_to_check(pods: Iterable[Mapping[str, Any]], execution_pods: ExecutionPods | None) -> tuple[str, ...]:
    """The Nodes a drain check reads: those of the pods that may block, then the recorded nodes where a
    recorded pod is no longer listed (or whose names were not kept): only there can a vanished pod hide."""
    listed = list(pods)
    seen = dict.fromkeys(nodes_to_read(listed))
    if execution_pods is not None:
        names = {name_of(pod) for pod in listed}
        for node, recorded_names in execution_pods.nodes.items():
            if not recorded_names or any(name not in names for name in recorded_names):
                seen.setdefault(node, None)
    return tuple(seen)


def blocking_pods(
    selected: Iterable[Mapping[str, Any]],
    nodes: Mapping[str, NodeLookup],
    execution_pods: ExecutionPods | None,
    namespace: str,
) -> tuple[RemainingPod, ...]:
    """Everything that blocks an admission: the selected pods that remain (blocking.py), then the recorded
    pods that vanished on a node that did not confirm their end. The one place the two are joined."""
    listed = list(selected)
    remaining = remaining_pods(listed, nodes)
    return remaining + vanished_pods(execution_pods, namespace, listed, remaining, nodes)

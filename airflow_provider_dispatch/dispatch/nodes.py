"""Node states and cessation (DESIGN §4, §7).

A remaining pod's processes are proven gone ("ceased") when its node is deleted, or carries the taint
`node.kubernetes.io/out-of-service` (any value, any effect) AND its Ready condition is not True. The second
half is PodGC's own test (`kubernetes/kubernetes:pkg/controller/podgc/gc_controller.go` `gcTerminating`: not
Ready and the taint key present; k8s-apis §5.4): a taint on a Ready node is a mistake, not proof.

Decisions recorded here:

* A Node without a Ready condition is shown as `Ready=Unknown` and is not Ready. PodGC treats the absence as
  not ready (k8s-apis §5.3), and "the kubelet has not reported" is what Unknown means, so the five states of
  DESIGN §7 stay five. `NodeState.ready_reported` keeps the difference for explanations.
* A Ready status other than True/False/Unknown (which the API does not produce) reads as Unknown.
* A node that could not be read for lack of permission is `not readable` and never ceases: cessation is not
  proven where Nodes cannot be read (DESIGN §4).
* A deleted Node ceases, but not on a single 404: a Node deleted while its machine runs (`kubectl delete node`
  on a node that was Ready a moment ago) leaves the machine running its pods until their objects are deleted
  (the Job controller, or PodGC 40 to 80 s after the Node's deletion) and the kubelet, if it still hears the API,
  stops them within their grace. So a 404 is `DELETED_RECENTLY` (`gone, not yet proof`, never ceased) until the
  pods' grace plus `RETURN_MARGIN_SECONDS` have passed since a writer's check first found the node gone with no
  pod that may run listed on it, a time the hold's record keeps (fencing.py `judged_nodes`). A machine cut off or
  frozen when its Node was deleted cannot hear the deletion: that stays the operator's assertion
  (docs/reliability.md, the precondition).
* A node name we have no answer for at all (not looked up) reads as `not readable` too: unknown is never
  ceased.
* `NodeState.ready_for` is how long the node's kubelet has reported `Ready=True`, by the kubelet's own clock:
  the Ready condition's `lastHeartbeatTime` minus its `lastTransitionTime`. The kubelet writes both from one
  clock in one status report (`pkg/kubelet/nodestatus/setters.go` `ReadyCondition`: the heartbeat is the
  report's time, the transition time is kept unless the status changes), so the difference is free of any
  skew between the kubelet and the reader; it lags the truth by up to one report (`nodeStatusReportFrequency`,
  5 minutes, while nothing changes), which only makes it smaller. None when the node is not Ready or either
  time is missing. fencing.py needs it: a node that just came back has not yet stopped what was deleted while
  it was away.
* A pod with no `spec.nodeName` was never scheduled and runs nothing (DESIGN §4): its state is `not scheduled`
  and it counts as ceased. It still *remains* for the drain check (blocking.py): it could still be bound to a
  node, so release waits until it is deleted.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum, StrEnum
from typing import Any, Final, TypeAlias

from airflow_provider_dispatch.dispatch.vocabulary import (
    CONDITION_READY,
    TAINT_OUT_OF_SERVICE,
    condition,
    field,
    parse_time,
)


class Readiness(StrEnum):
    """`status.conditions[type=Ready].status` of a Node."""

    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


class NodeRead(Enum):
    """What a driver learnt instead of a Node object: it does not exist (404), or we may not read it (403).
    `DELETED_RECENTLY` is a 404 not yet taken as proof (fencing.py `judged_nodes`: a Node deleted while its machine
    runs is not proof until the pods' grace plus `RETURN_MARGIN_SECONDS` have passed since a writer first saw it)."""

    GONE = "gone"
    NOT_READABLE = "not readable"
    DELETED_RECENTLY = "deleted recently"


class Presence(StrEnum):
    PRESENT = "present"
    GONE = "gone"
    #: the Node object is gone, but its deletion is not proof yet (`NodeRead.DELETED_RECENTLY`): never ceased
    DELETED_RECENTLY = "gone, not yet proof"
    NOT_READABLE = "not readable"
    UNSCHEDULED = "not scheduled"


#: the kubelet's wait between its first Ready report after a return and its relist of pods (fencing.py); the real
#: kubelet took at most 3.1 s (docs/fidelity.md, "The returned node, measured")
RETURN_MARGIN_SECONDS: Final = 60.0
#: a pod's `terminationGracePeriodSeconds` when it sets none (the API's default), and a record's without grace
DEFAULT_GRACE_SECONDS: Final = 30
#: the assumed bound on how far the clocks of two API server replicas differ (evidence.py, fencing.py): every
#: comparison of two times the API server wrote waits this much longer. NTP keeps a control plane's clocks within
#: milliseconds; 5 s allows for a replica whose time sync lapsed for a while. Raise it where they may differ more.
DEFAULT_CLOCK_SKEW_SECONDS: Final = 5.0

#: per node name: the Node object as the API returned it, or what stood in for it
NodeLookup: TypeAlias = Mapping[str, Any] | NodeRead


@dataclass(frozen=True)
class NodeState:
    """What we know about the node a pod is bound to, for cessation and for the explanation."""

    name: str | None
    presence: Presence
    ready: Readiness | None = None
    ready_reported: bool = True
    out_of_service: bool = False
    #: seconds the kubelet has reported Ready=True, by its own clock (module docstring); None when unknown
    ready_for: float | None = None
    #: the Ready condition's `lastTransitionTime` as written, while it is True: fencing.py compares it with the
    #: one its record kept, to tell a node Ready throughout from one that went away and came back
    ready_since: str | None = None

    @property
    def ceased(self) -> bool:
        """The pod's processes on this node are proven gone (DESIGN §4)."""
        if self.presence in (Presence.GONE, Presence.UNSCHEDULED):
            return True
        if self.presence is Presence.NOT_READABLE:
            return False
        return self.out_of_service and self.ready is not Readiness.TRUE

    @property
    def label(self) -> str:
        """The node state as DESIGN §7 spells it: `Ready=True`, `Ready=Unknown, out-of-service`, `gone`..."""
        if self.presence is not Presence.PRESENT:
            return self.presence.value
        text = f"Ready={(self.ready or Readiness.UNKNOWN).value}"
        return f"{text}, out-of-service" if self.out_of_service else text

    @property
    def change_key(self) -> str:
        """What a watcher compares to tell that the node's state moved: the label, and how long it has been Ready
        (a pod that vanished while it was away stops blocking as that grows: fencing.py)."""
        return self.label if self.ready_for is None else f"{self.label} for {self.ready_for:.0f}s"

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "state": self.label,
            "ready": self.ready.value if self.ready is not None else None,
            "out_of_service": self.out_of_service,
            "ceased": self.ceased,
        }


def ready_since(node: Mapping[str, Any]) -> str | None:
    """The Ready condition's `lastTransitionTime` as written, while the condition is True; else None."""
    ready = condition(node, CONDITION_READY)
    if ready is None or ready.get("status") != Readiness.TRUE.value:
        return None
    since = ready.get("lastTransitionTime")
    return since if isinstance(since, str) and since else None


def ready_for(node: Mapping[str, Any]) -> float | None:
    """How long the kubelet has reported Ready=True, by its own clock (module docstring), or None."""
    ready = condition(node, CONDITION_READY)
    if ready is None or ready.get("status") != Readiness.TRUE.value:
        return None
    heartbeat, transition = parse_time(ready.get("lastHeartbeatTime")), parse_time(ready.get("lastTransitionTime"))
    if heartbeat is None or transition is None:
        return None
    return max((heartbeat - transition).total_seconds(), 0.0)


def readiness(node: Mapping[str, Any]) -> tuple[Readiness, bool]:
    """The Ready condition's status, and whether the node reported one at all."""
    ready = condition(node, CONDITION_READY)
    if ready is None:
        return Readiness.UNKNOWN, False
    status = ready.get("status")
    if status == Readiness.TRUE.value:
        return Readiness.TRUE, True
    if status == Readiness.FALSE.value:
        return Readiness.FALSE, True
    return Readiness.UNKNOWN, True


def has_out_of_service_taint(node: Mapping[str, Any]) -> bool:
    """The taint key is present, whatever its value and effect (PodGC checks only the key, k8s-apis §5.4)."""
    taints = field(node, "spec", "taints")
    if not isinstance(taints, list):
        return False
    return any(isinstance(t, Mapping) and t.get("key") == TAINT_OUT_OF_SERVICE for t in taints)


def node_state(node_name: str | None, lookup: NodeLookup | None) -> NodeState:
    """The state of the node a pod is bound to. `lookup` is None when nobody read that node."""
    if not node_name:
        return NodeState(name=None, presence=Presence.UNSCHEDULED)
    if lookup is NodeRead.GONE:
        return NodeState(name=node_name, presence=Presence.GONE)
    if lookup is NodeRead.DELETED_RECENTLY:
        return NodeState(name=node_name, presence=Presence.DELETED_RECENTLY)
    if lookup is None or lookup is NodeRead.NOT_READABLE:
        return NodeState(name=node_name, presence=Presence.NOT_READABLE)
    ready, reported = readiness(lookup)
    return NodeState(
        name=node_name,
        presence=Presence.PRESENT,
        ready=ready,
        ready_reported=reported,
        out_of_service=has_out_of_service_taint(lookup),
        ready_for=ready_for(lookup),
        ready_since=ready_since(lookup),
    )


def unconfirmed(state: NodeState, grace_seconds: int, ready_since_record: str | None) -> bool:
    """Nobody confirmed that containers of a pod deleted on this node stopped (fencing.py): it is not ceased, and
    it is not Ready, or it became Ready since the record (`ready_since_record`: the Ready transition the record
    kept, None when the node was not Ready then or nothing was kept) and its kubelet has not reported Ready for
    longer than the pod's grace plus the margin since."""
    if state.ceased:
        return False
    if state.ready is not Readiness.TRUE:
        return True
    if ready_since_record is not None and state.ready_since == ready_since_record:
        return False  # Ready throughout since the record: its kubelet saw every deletion as it happened
    if state.ready_for is None:
        return True
    return state.ready_for < confirming_seconds(grace_seconds)


def confirming_seconds(grace_seconds: int) -> float:
    """How long a node's kubelet must have reported Ready before it has stopped a pod of that grace that left
    the API while it was away (fencing.py)."""
    return grace_seconds + RETURN_MARGIN_SECONDS

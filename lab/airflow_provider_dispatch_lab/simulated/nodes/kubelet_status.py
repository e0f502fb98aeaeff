"""The status a kubelet writes: pod status for the run it manages, node conditions for its heartbeat.

Pure builders over plain JSON, so the shape can be read (and tested) apart from the kubelet's timing.

Pod status (`pkg/kubelet/kubelet_pods.go` `generateAPIPodStatus`, `pkg/kubelet/status/generate.go`,
`status_manager.go` `mergePodStatus`): the kubelet owns the conditions `PodReadyToStartContainers`,
`Initialized`, `ContainersReady` and `Ready` (`kubetypes.PodConditionByKubelet`) and leaves the others
(`PodScheduled`, `DisruptionTarget`) alone; in a terminal phase `Ready` and `ContainersReady` are False with
reason `PodCompleted` or `PodFailed` (`generatePodReadyConditionForTerminalPhase`). A container that was running
and is gone without an exit status (its machine lost power) is reported terminated, reason
`ContainerStatusUnknown`, exit code 137, message `The container could not be located when the pod was
terminated` (`convertToAPIContainerStatuses`). A terminated container's reason is `Completed` for exit 0 and
`Error` otherwise, as containerd reports it.

Node conditions (`pkg/kubelet/nodestatus/setters.go` `MemoryPressureCondition`, `DiskPressureCondition`,
`PIDPressureCondition`, `ReadyCondition`): reasons `KubeletHasSufficientMemory`, `KubeletHasNoDiskPressure`,
`KubeletHasSufficientPID`, `KubeletReady` / `KubeletNotReady`. The not-ready message here is an example of a
runtime network error; the kubelet writes whichever error it has.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_provider_dispatch_lab.simulated.support import find_condition, spec

Obj = dict[str, Any]

UNKNOWN_CONTAINER_REASON = "ContainerStatusUnknown"
UNKNOWN_CONTAINER_MESSAGE = "The container could not be located when the pod was terminated"
VANISHED_CONTAINER_MESSAGE = (
    "The container could not be located when the pod was deleted.  The container used to be Running"
)
NOT_READY_MESSAGE = (
    "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady "
    "message:Network plugin returns error: cni plugin not initialized"
)


@dataclass(frozen=True)
class Termination:
    """A terminated container as the kubelet reports it; one that vanished with its runtime's state has no times
    and no container ID."""

    exit_code: int
    reason: str
    started_at: str | None = None
    finished_at: str | None = None
    container_id: str = ""
    message: str | None = None

    def as_state(self) -> Obj:
        state: Obj = {"exitCode": self.exit_code, "reason": self.reason}
        if self.finished_at:
            state["finishedAt"] = self.finished_at
        if self.started_at:
            state["startedAt"] = self.started_at
        if self.container_id:
            state["containerID"] = self.container_id
        if self.message:
            state["message"] = self.message
        return {"terminated": state}


def termination_reason(exit_code: int) -> str:
    return "Completed" if exit_code == 0 else "Error"


@dataclass(frozen=True)
class ContainerView:
    """What the runtime says of the pod's containers (all of them share the pod's one simulated process)."""

    state: str  # "waiting", "running" or "terminated"
    restart_count: int = 0
    container_id: str = ""
    started_at: str | None = None
    waiting_reason: str = "ContainerCreating"
    terminated: Termination | None = None
    last_termination: Termination | None = None

    def as_state(self) -> Obj:
        if self.state == "running":
            return {"running": {"startedAt": self.started_at}}
        if self.state == "terminated" and self.terminated is not None:
            return self.terminated.as_state()
        return {"waiting": {"reason": self.waiting_reason}}


def _condition(pod: Mapping[str, Any], kind: str, value: bool, now: str, reason: str | None = None) -> Obj:
    status = "True" if value else "False"
    old = find_condition(pod, kind)
    transition = old.get("lastTransitionTime") if old and old.get("status") == status else None
    return {
        "type": kind,
        "status": status,
        "lastProbeTime": None,
        "lastTransitionTime": transition or now,
        "reason": reason,
        "message": None,
    }


def pod_status(pod: Mapping[str, Any], *, phase: str, view: ContainerView, start_time: str | None, now: str) -> Obj:
    """The `status` a kubelet patches for this pod (conditions merge by type; containerStatuses replace)."""
    containers = [c for c in spec(pod).get("containers") or () if isinstance(c, Mapping)]
    names = [str(c.get("name")) for c in containers]
    running = view.state == "running" and phase == "Running"
    statuses = []
    for container in containers:
        entry: Obj = {
            "name": container.get("name"),
            "image": container.get("image", ""),
            "imageID": "",
            "ready": running,
            "started": running,
            "restartCount": view.restart_count,
            "state": view.as_state(),
            "lastState": view.last_termination.as_state() if view.last_termination else {},
        }
        if view.container_id:
            entry["containerID"] = view.container_id
        statuses.append(entry)
    terminal = phase in ("Succeeded", "Failed")
    unready = ("PodCompleted" if phase == "Succeeded" else "PodFailed") if terminal else "ContainersNotReady"
    conditions = [
        _condition(pod, "PodReadyToStartContainers", not terminal, now),
        _condition(pod, "Initialized", True, now),
        _condition(pod, "ContainersReady", running, now, None if running else unready),
        _condition(pod, "Ready", running, now, None if running else unready),
    ]
    if not running and not terminal:
        for entry in conditions[2:]:
            entry["message"] = f"containers with unready status: [{' '.join(names)}]"
    body: Obj = {"phase": phase, "conditions": conditions, "containerStatuses": statuses}
    if start_time:
        body["startTime"] = start_time
    return body


def status_summary(pod: Mapping[str, Any] | None) -> tuple[Any, ...]:
    """What the kubelet compares to decide whether the API already shows its view (`needsReconcile`)."""
    status = (pod or {}).get("status") or {}
    containers = status.get("containerStatuses") or [{}]
    first = containers[0] if isinstance(containers[0], Mapping) else {}
    ready = find_condition(pod, "Ready")
    return (
        status.get("phase"),
        first.get("restartCount"),
        first.get("containerID"),
        tuple(sorted((first.get("state") or {}).keys())),
        None if ready is None else ready.get("status"),
    )


_PRESSURE = (
    ("MemoryPressure", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
    ("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    ("PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
)


def desired_node_conditions(ready: bool) -> list[tuple[str, str, str, str]]:
    """(type, status, reason, message) of the conditions a healthy machine's kubelet reports."""
    conditions = [(kind, "False", reason, message) for kind, reason, message in _PRESSURE]
    if ready:
        conditions.append(("Ready", "True", "KubeletReady", "kubelet is posting ready status"))
    else:
        conditions.append(("Ready", "False", "KubeletNotReady", NOT_READY_MESSAGE))
    return conditions


def node_conditions_changed(node: Mapping[str, Any] | None, ready: bool) -> bool:
    """`nodeStatusHasChanged`, on conditions only: anything but the heartbeat time differs."""
    for kind, status, reason, message in desired_node_conditions(ready):
        old = find_condition(node, kind)
        if old is None or (old.get("status"), old.get("reason"), old.get("message")) != (status, reason, message):
            return True
    return False


def node_conditions(node: Mapping[str, Any] | None, ready: bool, now: str) -> list[Obj]:
    conditions = []
    for kind, status, reason, message in desired_node_conditions(ready):
        old = find_condition(node, kind)
        transition = old.get("lastTransitionTime") if old and old.get("status") == status else None
        conditions.append(
            {
                "type": kind,
                "status": status,
                "reason": reason,
                "message": message,
                "lastHeartbeatTime": now,
                "lastTransitionTime": transition or now,
            }
        )
    return conditions

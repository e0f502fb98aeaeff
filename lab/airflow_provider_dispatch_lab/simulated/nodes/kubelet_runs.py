"""What a kubelet remembers of each pod it runs, and the pod status that follows from it.

Split from `kubelet.py` (which has the sources): the machine states, the per-pod record (`PodRun`: the last view
of the pod the kubelet had while connected, its process, restarts, and the local outcome once the process is
over), and `desired_status`, the status the kubelet wants the API to show for that record.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from airflow_provider_dispatch_lab.clock import format_timestamp
from airflow_provider_dispatch_lab.simulated.nodes.kubelet_status import ContainerView, Termination, pod_status
from airflow_provider_dispatch_lab.simulated.nodes.workload import LAB_PREFIX
from airflow_provider_dispatch_lab.simulated.support import meta, pod_key, spec
from airflow_provider_dispatch_lab.truth.process import Process

Obj = dict[str, Any]

STATE_ANNOTATION = LAB_PREFIX + "state"
BACKOFF_INITIAL = 10.0
BACKOFF_MAX = 300.0
MINIMUM_GRACE_SECONDS = 2


class MachineState(StrEnum):
    READY = "ready"
    NOT_READY = "not-ready"
    FROZEN = "frozen"
    LOST = "lost"
    POWERED_OFF = "powered-off"


CONNECTED = frozenset({MachineState.READY, MachineState.NOT_READY})


class MachineUnavailable(RuntimeError):
    """A control that needs the machine to act (a process to exit) on a machine that is paused or off."""


@dataclass
class PodRun:
    """What the kubelet knows of one pod (by UID): the last view it had of it and what its process did."""

    uid: str
    pod: Obj
    admitted_at: float
    process: Process | None = None
    restarts: int = 0
    ever_started: bool = False
    starting: bool = False
    last_termination: Termination | None = None
    outcome: tuple[str, Termination | None] | None = None
    deleting: bool = False
    removed: bool = False
    config_error: str | None = None
    exit_now_applied: str | None = None

    @property
    def key(self) -> tuple[str, str]:
        return pod_key(self.pod)

    @property
    def restart_policy(self) -> str:
        return str(spec(self.pod).get("restartPolicy") or "Always")

    def container_id(self) -> str:
        return f"containerd://{self.uid[:8]}-{self.restarts}"


def newer(candidate: Obj, known: Obj) -> bool:
    """Whether the informer's copy is newer than the one the kubelet last wrote (the lab's resourceVersions
    are one global counter, so they compare; a real client would treat them as opaque and re-read)."""
    try:
        return int(meta(candidate).get("resourceVersion") or 0) >= int(meta(known).get("resourceVersion") or 0)
    except ValueError:
        return True


def desired_status(run: PodRun, now: str) -> Obj:
    """The status the kubelet wants the API to show for this pod."""
    start_time = format_timestamp(run.admitted_at)
    if run.outcome is not None:
        phase, termination = run.outcome
        if termination is None:
            view = ContainerView("waiting", run.restarts, last_termination=run.last_termination)
        else:
            last = run.last_termination if run.last_termination != termination else None
            view = ContainerView(
                "terminated", run.restarts, termination.container_id, terminated=termination, last_termination=last
            )
        return pod_status(run.pod, phase=phase, view=view, start_time=start_time, now=now)
    process = run.process
    if process is not None and process.running:
        view = ContainerView(
            "running",
            run.restarts,
            run.container_id(),
            started_at=format_timestamp(process.started_at),
            last_termination=run.last_termination,
        )
        return pod_status(run.pod, phase="Running", view=view, start_time=start_time, now=now)
    if run.ever_started:
        view = ContainerView(
            "waiting", run.restarts, waiting_reason="CrashLoopBackOff", last_termination=run.last_termination
        )
        return pod_status(run.pod, phase="Running", view=view, start_time=start_time, now=now)
    reason = "CreateContainerConfigError" if run.config_error else "ContainerCreating"
    view = ContainerView("waiting", waiting_reason=reason)
    return pod_status(run.pod, phase="Pending", view=view, start_time=start_time, now=now)


def kill_grace(pod: Obj) -> int:
    """The grace the kubelet gives a pod it stops: its deletion grace, else its spec's, at least 2 s."""
    grace = meta(pod).get("deletionGracePeriodSeconds")
    if grace is None:
        grace = spec(pod).get("terminationGracePeriodSeconds")
    return max(int(30 if grace is None else grace), MINIMUM_GRACE_SECONDS)

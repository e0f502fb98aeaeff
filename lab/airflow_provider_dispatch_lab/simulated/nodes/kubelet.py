"""One kubelet and the machine it runs on: runs the pods bound to its node, heartbeats, and fails as machines do.

Pods (the pod worker, `pkg/kubelet/pod_workers.go`, and the status manager, `pkg/kubelet/status/status_manager.go`):

- a pod bound here starts one simulated process (`lab/truth/process.py`) after its `start-seconds`; the status shows
  `Pending` with `startTime`, then `Running` with the container running, then the terminal phase when the process
  exits by itself and the restart policy says not to restart it (`Never`; `OnFailure` after exit 0). Otherwise
  the container restarts after a back-off of 10 s doubling to 5 min (`backOffPeriod`, `MaxContainerBackOff` in
  `pkg/kubelet/kubelet.go`), `restartCount` rising;
- a pod given a deletionTimestamp gets SIGTERM; its process stops after `termination-seconds`, or is killed
  once `deletionGracePeriodSeconds` (at least 2 s: `minimumGracePeriodInSeconds = 2` in
  `pkg/kubelet/kuberuntime/kuberuntime_manager.go`, applied by `killContainer` in `kuberuntime_container.go`,
  read at k8s.io/kubernetes v1.36.3) have passed since the SIGTERM;
  the grace is counted from when the kubelet acts, not from the deletionTimestamp. The kubelet then writes the
  terminal phase and only then deletes the pod with grace 0 and a UID precondition (`status_manager.go`
  `syncPod` / `canBeDeleted`: "Delay deletion of pods until the phase is terminal", verified at
  kubernetes/kubernetes `0033cb0a31e9`). Finalizers (the Job controller's `batch.kubernetes.io/job-tracking`)
  keep the object until their owner removes them;
- a pod that disappears from the API while its process runs (force-deleted) is killed with its last known grace
  (`HandlePodRemoves`); a pod deleted before its process started ends `Failed`;
- every 10 s the kubelet re-syncs the pods it runs, so a status write the API refused is made again (the status
  manager's `syncPeriod`).

States of the machine (the node annotation `lab.dispatch.phpboyscout.uk/state`, driven by `scenario.py`):

| state | kubelet | processes |
|---|---|---|
| `ready` | heartbeats, Ready=True, syncs pods | run |
| `not-ready` | heartbeats, Ready=False (`KubeletNotReady`), syncs pods | run |
| `frozen` | paused: no heartbeat, no status, no deletion confirmed | paused: still running, their exits postponed |
| `lost` | partitioned: nothing reaches the API, it sees no change | run, exit and restart on their own |
| `powered-off` | off | stopped at that instant; nothing tells the API |

Back to a connected state, the kubelet heartbeats at once and syncs every pod it knows or the API binds to it:
pending deletions are confirmed, exits that happened meanwhile are reported. A machine that was powered off
reboots: its processes are gone. For each pod still bound to it the kubelet decides as for a lost pod sandbox
(`pkg/kubelet/kuberuntime/kuberuntime_manager.go` `computePodActions`: with restart policy `Never` and
containers that already ran no new sandbox is made; otherwise the containers start again). The runtime no longer
knows the container that was running, so the kubelet reports it gone (`kubelet_pods.go`
`convertToAPIContainerStatuses`): its last state `ContainerStatusUnknown` / 137, "The container could not be
located when the pod was deleted.  The container used to be Running", with no times, and `restartCount + 1` unless
the pod is being deleted. `Never`, or a pod being deleted, then ends `Failed` with the container terminated
`ContainerStatusUnknown` / 137, "... when the pod was terminated"; `OnFailure` and `Always` start a new process.
This is what the real kubelet v1.36.3 wrote on the real cluster (a hollow kubelet whose runtime forgot its
containers at power-off, docs/fidelity.md); a runtime that keeps its records across a reboot (containerd) would
report the container exited instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Callable
from typing import Any

from airflow_provider_dispatch_lab.client import Informer, LabClient
from airflow_provider_dispatch_lab.clock import LabClock, format_timestamp
from airflow_provider_dispatch_lab.kinds import POD
from airflow_provider_dispatch_lab.simulated.nodes.kubelet_heartbeat import RENEW_INTERVAL, Heartbeat
from airflow_provider_dispatch_lab.simulated.nodes.kubelet_runs import (
    BACKOFF_INITIAL,
    BACKOFF_MAX,
    CONNECTED,
    STATE_ANNOTATION,
    MachineState,
    MachineUnavailable,
    PodRun,
    desired_status,
    kill_grace,
    newer,
)
from airflow_provider_dispatch_lab.simulated.nodes.kubelet_status import (
    UNKNOWN_CONTAINER_MESSAGE,
    UNKNOWN_CONTAINER_REASON,
    VANISHED_CONTAINER_MESSAGE,
    Termination,
    status_summary,
    termination_reason,
)
from airflow_provider_dispatch_lab.simulated.nodes.workload import EXIT_NOW, EXIT_SIGKILL, WorkloadError, WorkloadSpec
from airflow_provider_dispatch_lab.simulated.support import WorkQueue, is_terminal, meta, pod_key, spec, tolerant
from airflow_provider_dispatch_lab.truth.overlap import OverlapRecorder
from airflow_provider_dispatch_lab.truth.process import Process, Spawn

Obj = dict[str, Any]
__all__ = ["CONNECTED", "STATE_ANNOTATION", "Kubelet", "MachineState", "MachineUnavailable"]
logger = logging.getLogger(__name__)


class Kubelet:
    """The kubelet of one node and the machine under it."""

    def __init__(
        self,
        node_name: str,
        client: LabClient,
        clock: LabClock,
        recorder: OverlapRecorder,
        pods: Informer,
        nodes: Informer,
        spawn: Spawn,
    ) -> None:
        self.node_name = node_name
        self.client = client
        self.clock = clock
        self.recorder = recorder
        self.pods = pods
        self.spawn = spawn
        self.state = MachineState.READY
        self.registered = True
        self.runs: dict[str, PodRun] = {}
        self.queue: WorkQueue[tuple[str, str]] = WorkQueue()
        self.heartbeat = Heartbeat(node_name, client, clock, nodes)
        self.heartbeats = 0
        self._changed = asyncio.Condition()
        self._wake = asyncio.Event()
        self._beat_lock = asyncio.Lock()

    @property
    def connected(self) -> bool:
        return self.state in CONNECTED

    # ------------------------------------------------------------------------------------------- loops

    async def run(self) -> None:
        self._requeue_all()
        async with asyncio.TaskGroup() as tasks:
            tasks.create_task(self._heartbeats())
            tasks.create_task(self._sync_loop())

    async def _heartbeats(self) -> None:
        while True:
            await self.heartbeat_now()
            if self.connected:
                for run in self.runs.values():
                    self.queue.add(run.key)  # the status manager's periodic sync retries failed writes
            await self._pause(RENEW_INTERVAL)

    async def heartbeat_now(self) -> None:
        """Renew the lease and report status now, if the kubelet can reach the API."""
        async with self._beat_lock:
            if self.connected:
                await self.heartbeat.beat(self.state == MachineState.READY)
                self.heartbeats += 1
        await self._notify()

    async def _pause(self, seconds: float) -> None:
        """Sleep `seconds` of lab time, or until the state changes (a recovered kubelet heartbeats at once)."""
        sleeper = asyncio.ensure_future(self.clock.sleep(seconds))
        waker = asyncio.ensure_future(self._wake.wait())
        try:
            await asyncio.wait({sleeper, waker}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            sleeper.cancel()
            waker.cancel()
        self._wake.clear()

    async def _sync_loop(self) -> None:
        while True:
            keys = await self.queue.take()
            for key in keys:
                if not self.connected:
                    break  # the rest are synced again when it reconnects
                await self._sync(key)

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    async def wait(self, predicate: Callable[[], bool]) -> None:
        """Until `predicate()` holds after a state change or a heartbeat (no timeout here: callers bound it)."""
        async with self._changed:
            await self._changed.wait_for(predicate)

    # ------------------------------------------------------------------------------------ from the API

    def pod_event(self, pod: Obj) -> None:
        self.queue.add(pod_key(pod))

    async def node_seen(self, node: Obj) -> None:
        self.registered = True
        raw = (meta(node).get("annotations") or {}).get(STATE_ANNOTATION, MachineState.READY.value)
        try:
            wanted = MachineState(raw)
        except ValueError:
            logger.warning("node %s: unknown lab state %r ignored", self.node_name, raw)
            return
        await self.set_state(wanted)

    def node_deleted(self) -> None:
        """The Node object went; the machine (if on) runs on and cannot post status (it does not re-register)."""
        self.registered = False

    def _requeue_all(self) -> None:
        for run in self.runs.values():
            self.queue.add(run.key)
        for pod in self.pods.items():
            if spec(pod).get("nodeName") == self.node_name:
                self.queue.add(pod_key(pod))

    # ------------------------------------------------------------------------------------ machine state

    async def set_state(self, new: MachineState) -> None:
        old = self.state
        if new != old:
            logger.info("node %s: %s -> %s", self.node_name, old, new)
            if old == MachineState.POWERED_OFF:
                self._reboot()
            elif old == MachineState.FROZEN and new != MachineState.POWERED_OFF:
                for run in self.runs.values():
                    if run.process is not None:
                        run.process.resume()
            if new == MachineState.FROZEN:
                for run in self.runs.values():
                    if run.process is not None:
                        run.process.pause()
            if new == MachineState.POWERED_OFF:
                for run in self.runs.values():
                    if run.process is not None:
                        run.process.power_off()
            self.state = new
            if self.connected:
                self._requeue_all()
                self._wake.set()
        await self._notify()

    def _still_bound(self, run: PodRun) -> Obj | None:
        """The API's current copy of the run's pod, if the API still binds that pod (same uid) to this node."""
        current = self.pods.get(*run.key)
        if current is None or str(meta(current).get("uid") or "") != run.uid:
            return None
        return current if spec(current).get("nodeName") == self.node_name else None

    def _reboot(self) -> None:
        self.heartbeat.forget()
        for run in list(self.runs.values()):
            process = run.process
            if run.outcome is not None or (process is not None and process.running):
                continue
            current = self._still_bound(run)
            if current is None:
                # A rebooted kubelet knows its pods only from its sources, the API server first
                # (`pkg/kubelet/config`); one deleted meanwhile (PodGC, a force deletion) is not started again:
                # its containers died with the machine and nothing asks for new ones.
                run.removed = True
                run.starting = False
                self.runs.pop(run.uid, None)
                continue
            if newer(current, run.pod):
                run.pod = current
            deleting = run.deleting or bool(meta(run.pod).get("deletionTimestamp"))
            if not run.ever_started:
                if run.starting or run.config_error is None:
                    run.starting = False
                    if deleting:
                        run.outcome = ("Failed", None)
                    else:
                        self._start_process(run)
                continue
            run.last_termination = Termination(
                EXIT_SIGKILL, UNKNOWN_CONTAINER_REASON, message=VANISHED_CONTAINER_MESSAGE
            )
            if not deleting:
                run.restarts += 1
            if deleting or run.restart_policy == "Never":
                run.outcome = (
                    "Failed",
                    Termination(EXIT_SIGKILL, UNKNOWN_CONTAINER_REASON, message=UNKNOWN_CONTAINER_MESSAGE),
                )
            else:
                self._start_process(run)

    async def _machine_up(self) -> bool:
        """Wait while the machine is paused; False if it is off."""
        await self.wait(lambda: self.state != MachineState.FROZEN)
        return self.state != MachineState.POWERED_OFF

    # ------------------------------------------------------------------------------------ the scenario

    def running_process(self, namespace: str, name: str) -> Process | None:
        for run in self.runs.values():
            if run.key == (namespace, name) and run.process is not None and run.process.running:
                return run.process
        return None

    def exit_process(self, namespace: str, name: str, code: int) -> None:
        """The pod's process exits now with `code` (the machine acts, whether or not the API is reachable)."""
        if self.state in (MachineState.FROZEN, MachineState.POWERED_OFF):
            raise MachineUnavailable(f"node {self.node_name} is {self.state}: its processes cannot act")
        process = self.running_process(namespace, name)
        if process is None:
            raise LookupError(f"no running process of pod {namespace}/{name} on node {self.node_name}")
        process.exit_now(code)

    def set_termination_seconds(self, namespace: str, name: str, seconds: float) -> None:
        process = self.running_process(namespace, name)
        if process is not None and not process.terminating:
            process.spec = dataclasses.replace(process.spec, termination_seconds=seconds)

    # ------------------------------------------------------------------------------------ pod lifecycle

    async def _sync(self, key: tuple[str, str]) -> None:
        pod = self.pods.get(*key)
        if pod is not None and spec(pod).get("nodeName") != self.node_name:
            pod = None
        uid = str(meta(pod).get("uid") or "") if pod is not None else None
        for stale in [r for r in self.runs.values() if r.key == key and r.uid != uid]:
            self._gone(stale)
        if pod is None or uid is None:
            return
        run = self.runs.get(uid)
        if run is None:
            if is_terminal(pod):
                return  # nothing to run: it finished before this kubelet knew it, or someone else ended it
            run = self._admit(pod)
        elif newer(pod, run.pod):
            run.pod = pod
        await self._reconcile(run)

    def _admit(self, pod: Obj) -> PodRun:
        run = PodRun(str(meta(pod).get("uid")), pod, self.clock.now())
        self.runs[run.uid] = run
        if meta(pod).get("deletionTimestamp"):
            run.outcome = ("Failed", None)
            return run
        try:
            delay = WorkloadSpec.of_pod(pod).start_seconds
        except WorkloadError as error:
            run.config_error = str(error)
            return run
        run.starting = True
        if delay > 0:
            self.spawn(self._start_after(run, delay))
        else:
            run.starting = False
            self._start_process(run)
        return run

    async def _start_after(self, run: PodRun, delay: float) -> None:
        await self.clock.sleep(delay)
        if await self._machine_up() and run.starting:
            run.starting = False
            self._start_process(run)

    def _start_process(self, run: PodRun) -> None:
        if run.removed or run.outcome is not None or (run.process is not None and run.process.running):
            return
        try:
            workload = WorkloadSpec.of_pod(run.pod)
        except WorkloadError as error:
            run.config_error = str(error)
            return
        namespace, name = run.key
        record = self.recorder.started(
            namespace=namespace,
            pod=name,
            pod_uid=run.uid,
            node=self.node_name,
            labels=meta(run.pod).get("labels") or {},
            at=self.clock.now(),
            restart=run.restarts,
            annotations=meta(run.pod).get("annotations") or {},
        )
        run.exit_now_applied = (meta(run.pod).get("annotations") or {}).get(EXIT_NOW)
        run.process = Process(self.clock, self.recorder, record, workload, self.spawn, lambda p: self._exited(run, p))
        run.ever_started = True
        self.queue.add(run.key)

    def _exited(self, run: PodRun, process: Process) -> None:
        if process.lost_with_machine or process.exit_code is None:
            return  # the machine went off: decided when it boots again
        code = process.exit_code
        termination = Termination(
            code,
            termination_reason(code),
            format_timestamp(process.started_at),
            format_timestamp(process.finished_at or self.clock.now()),
            run.container_id(),
        )
        if run.removed:
            self.runs.pop(run.uid, None)
            return
        restart = run.restart_policy == "Always" or (run.restart_policy == "OnFailure" and code != 0)
        if restart and not run.deleting:
            run.last_termination = termination
            delay = min(BACKOFF_INITIAL * 2 ** min(run.restarts, 8), BACKOFF_MAX)
            self.spawn(self._restart_after(run, delay))
        else:
            run.outcome = ("Succeeded" if code == 0 else "Failed", termination)
        self.queue.add(run.key)

    async def _restart_after(self, run: PodRun, delay: float) -> None:
        await self.clock.sleep(delay)
        if not await self._machine_up() or run.deleting or run.removed or run.outcome is not None:
            return
        if run.process is not None and run.process.running:
            return
        run.restarts += 1
        self._start_process(run)

    def _gone(self, run: PodRun) -> None:
        """The pod left the API (or was replaced by a new pod of the same name)."""
        run.removed = True
        run.starting = False
        if run.process is not None and run.process.running:
            run.process.terminate(kill_grace(run.pod))
        else:
            self.runs.pop(run.uid, None)

    async def _reconcile(self, run: PodRun) -> None:
        pod = run.pod
        process = run.process
        raw_exit = (meta(pod).get("annotations") or {}).get(EXIT_NOW)
        if raw_exit is not None and raw_exit != run.exit_now_applied and process is not None and process.running:
            run.exit_now_applied = raw_exit
            with contextlib.suppress(WorkloadError):
                code = WorkloadSpec.of_pod(pod).exit_now
                if code is not None:
                    process.exit_now(code)
        if meta(pod).get("deletionTimestamp") and not run.deleting:
            run.deleting = True
            if process is not None and process.running:
                process.terminate(kill_grace(pod))
            elif run.outcome is None:
                run.starting = False
                run.outcome = ("Failed", run.last_termination)
        await self._write_status(run)
        if run.outcome is not None and meta(run.pod).get("deletionTimestamp"):
            await self._final_delete(run)

    async def _write_status(self, run: PodRun) -> None:
        if is_terminal(run.pod):
            return  # a terminal phase is final: the kubelet never moves a pod back
        desired = desired_status(run, self.clock.timestamp())
        if status_summary({"status": desired}) == status_summary(run.pod):
            return
        namespace, name = run.key
        written = await tolerant(
            f"kubelet {self.node_name}: status of {namespace}/{name}",
            lambda: self.client.patch(
                POD,
                namespace,
                name,
                {"metadata": {"uid": run.uid}, "status": desired},
                patch_type="strategic",
                subresource="status",
            ),
        )
        if written is not None:
            run.pod = written

    async def _final_delete(self, run: PodRun) -> None:
        """`canBeDeleted`: only once the API shows the terminal phase; grace 0, UID precondition."""
        if not is_terminal(run.pod) or meta(run.pod).get("deletionGracePeriodSeconds") == 0:
            return
        namespace, name = run.key
        await tolerant(
            f"kubelet {self.node_name}: delete {namespace}/{name}",
            lambda: self.client.delete(POD, namespace, name, grace_period_seconds=0, uid=run.uid),
        )

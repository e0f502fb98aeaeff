"""The container runtime of one hollow machine: its pod sandboxes and containers, whose processes are the lab's.

The hollow kubelet (`controlplane/kubelet`) runs the pods bound to its node through CRI calls (`cri.py` serves
them); this is what those calls act on. A container is one simulated process (`lab/truth/process.py`) doing what
the pod's workload annotations say (`lab/simulated/nodes/workload.py`: its run time, exit code, the seconds it
takes to stop after SIGTERM, its exit code then): the rules are the lab's, in one place, and the runtime only
decides when they start. The kubelet passes the pod's labels and annotations with every sandbox
(`kuberuntime_sandbox.go` `generatePodSandboxConfig`), so the runtime reads them there, as it reads the pod's
namespace, name and uid. Every process start and stop goes to the overlap recorder at the instant it happens.

How the calls act, after containerd's CRI plugin (`internal/cri/server`, v2.x):

- `StartContainer` starts the process, after the pod's `start-seconds` (image pull and start);
- `StopContainer(timeout)` sends SIGTERM and SIGKILL after `timeout` seconds (at once when it is 0): the process
  stops after its `termination-seconds` if that is within the timeout (its `sigterm-exit-code`), else it is
  killed at the timeout (137); the call returns once it stopped;
- `StopPodSandbox` kills what still runs in the sandbox (SIGKILL) and marks it not ready; `RemoveContainer` of a
  running container kills it first;
- a process that exits by itself is reported `EXITED` with its code, reason `Completed` (0) or `Error`.

The machine's states act on the processes, not through the kubelet: `freeze()` pauses every process (their
exits are postponed by the pause, as a suspended VM's would be), `thaw()` resumes them, and `power_off()` ends
them all at that instant and forgets the runtime's state, as a runtime that keeps it under /run does after a
reboot (containerd keeps its container records on disk instead and reports such containers exited; which of the
two the kubelet meets changes only the reason it reports for a pod's lost container, issue 27).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import itertools
import logging
import secrets
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_dispatch_lab.clock import LabClock
from airflow_provider_dispatch_lab.simulated.nodes.workload import EXIT_SIGKILL, WorkloadError, WorkloadSpec
from airflow_provider_dispatch_lab.truth.overlap import OverlapRecorder
from airflow_provider_dispatch_lab.truth.process import Process

logger = logging.getLogger(__name__)

#: the labels the kubelet puts on every sandbox and container (`pkg/kubelet/types/labels.go`)
POD_NAME = "io.kubernetes.pod.name"
POD_NAMESPACE = "io.kubernetes.pod.namespace"
POD_UID = "io.kubernetes.pod.uid"
CONTAINER_NAME = "io.kubernetes.container.name"


class CriError(Exception):
    """A CRI call the runtime refuses: `code` is the gRPC status name (`NOT_FOUND`, `FAILED_PRECONDITION`...)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def _new_id() -> str:
    return secrets.token_hex(32)


@dataclass
class Sandbox:
    """A pod sandbox: the pod's identity as the kubelet passed it, and its (made-up) IP."""

    id: str
    name: str
    namespace: str
    uid: str
    attempt: int
    labels: dict[str, str]
    annotations: dict[str, str]
    pod_labels: dict[str, str]
    created_at: float
    ip: str
    host_network: bool
    runtime_handler: str
    ready: bool = True
    config: Any = None
    """The `PodSandboxConfig` the kubelet sent (its linux namespace options are echoed back in the status)."""


@dataclass
class Container:
    """One container of a sandbox: CREATED, then RUNNING with its process, then EXITED."""

    id: str
    sandbox: Sandbox
    name: str
    attempt: int
    image: str
    labels: dict[str, str]
    annotations: dict[str, str]
    log_path: str
    created_at: float
    started_at: float | None = None
    finished_at: float | None = None
    exit_code: int | None = None
    reason: str = ""
    message: str = ""
    process: Process | None = None
    starting: bool = False
    stopped: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def state(self) -> str:
        if self.finished_at is not None:
            return "EXITED"
        if self.started_at is not None:
            return "RUNNING"
        return "CREATED"


def image_id(image: str) -> str:
    """A stable made-up image digest (the runtime pulls nothing)."""
    return "sha256:" + hashlib.sha256(image.encode()).hexdigest()


def pod_labels(sandbox_labels: Mapping[str, str]) -> dict[str, str]:
    """The pod's own labels: the sandbox's labels less the kubelet's `io.kubernetes.*` ones."""
    return {k: v for k, v in sandbox_labels.items() if not k.startswith("io.kubernetes.")}


class ContainerRuntime:
    """The sandboxes, containers, images and processes of one machine, on the machines' event loop."""

    def __init__(self, node: str, clock: LabClock, recorder: OverlapRecorder, subnet: int) -> None:
        self.node = node
        self.clock = clock
        self.recorder = recorder
        self.subnet = subnet
        self.sandboxes: dict[str, Sandbox] = {}
        self.containers: dict[str, Container] = {}
        self.images: dict[str, int] = {}
        self.network_ready = True
        self._hosts = itertools.count(2)
        self._tasks: set[asyncio.Task[None]] = set()
        self._awake = asyncio.Event()
        self._awake.set()

    # ------------------------------------------------------------------------------------------ machine

    @property
    def frozen(self) -> bool:
        return not self._awake.is_set()

    def freeze(self) -> None:
        self._awake.clear()
        for container in self.containers.values():
            if container.process is not None and container.process.running:
                container.process.pause()

    def thaw(self) -> None:
        for container in self.containers.values():
            if container.process is not None and container.process.running:
                container.process.resume()
        self._awake.set()

    async def awake(self) -> None:
        """Until the machine runs (a call made to a frozen machine is answered once it thaws)."""
        await self._awake.wait()

    def power_off(self) -> None:
        """Every process ends now; the runtime's state (under /run) is gone."""
        for container in self.containers.values():
            if container.process is not None and container.process.running:
                container.process.power_off()
        for task in list(self._tasks):
            task.cancel()
        self._tasks.clear()
        self.sandboxes.clear()
        self.containers.clear()
        self._awake.set()

    def spawn(self, coroutine: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def running(self) -> list[Container]:
        return [c for c in self.containers.values() if c.process is not None and c.process.running]

    def find_running(self, namespace: str, pod: str) -> Container:
        for container in self.running():
            if (container.sandbox.namespace, container.sandbox.name) == (namespace, pod):
                return container
        raise LookupError(f"no running process of pod {namespace}/{pod} on node {self.node}")

    # ------------------------------------------------------------------------------------------ sandboxes

    def run_sandbox(
        self,
        *,
        name: str,
        namespace: str,
        uid: str,
        attempt: int,
        labels: Mapping[str, str],
        annotations: Mapping[str, str],
        host_network: bool,
        runtime_handler: str,
        config: Any,
    ) -> Sandbox:
        if not self.network_ready and not host_network:
            raise CriError("UNKNOWN", "failed to setup network for sandbox: cni plugin not initialized")
        sandbox = Sandbox(
            _new_id(),
            name,
            namespace,
            uid,
            attempt,
            dict(labels),
            dict(annotations),
            pod_labels(labels),
            self.clock.now(),
            f"10.{100 + self.subnet // 250}.{self.subnet % 250}.{next(self._hosts) % 250 + 2}",
            host_network,
            runtime_handler,
            config=config,
        )
        self.sandboxes[sandbox.id] = sandbox
        return sandbox

    def sandbox(self, sandbox_id: str) -> Sandbox:
        found = self.sandboxes.get(sandbox_id)
        if found is None:
            raise CriError("NOT_FOUND", f"an error occurred when try to find sandbox {sandbox_id!r}: not found")
        return found

    def stop_sandbox(self, sandbox_id: str) -> None:
        sandbox = self.sandboxes.get(sandbox_id)
        if sandbox is None:
            return  # idempotent: already reclaimed
        for container in self.containers.values():
            if container.sandbox is sandbox:
                self._kill(container)
        sandbox.ready = False

    def remove_sandbox(self, sandbox_id: str) -> None:
        sandbox = self.sandboxes.pop(sandbox_id, None)
        if sandbox is None:
            return
        for container in [c for c in self.containers.values() if c.sandbox is sandbox]:
            self._kill(container)
            self.containers.pop(container.id, None)

    # ------------------------------------------------------------------------------------------ containers

    def create_container(
        self,
        sandbox_id: str,
        *,
        name: str,
        attempt: int,
        image: str,
        labels: Mapping[str, str],
        annotations: Mapping[str, str],
        log_path: str,
    ) -> Container:
        sandbox = self.sandbox(sandbox_id)
        if not sandbox.ready:
            raise CriError("FAILED_PRECONDITION", f"sandbox {sandbox_id} is not ready")
        try:
            WorkloadSpec.from_annotations(sandbox.annotations, sandbox.pod_labels)
        except WorkloadError as error:
            raise CriError("INVALID_ARGUMENT", f"the lab's workload annotations: {error}") from error
        container = Container(
            _new_id(), sandbox, name, attempt, image, dict(labels), dict(annotations), log_path, self.clock.now()
        )
        self.containers[container.id] = container
        return container

    def container(self, container_id: str) -> Container:
        found = self.containers.get(container_id)
        if found is None:
            raise CriError("NOT_FOUND", f"an error occurred when try to find container {container_id!r}: not found")
        return found

    async def start_container(self, container_id: str) -> None:
        container = self.container(container_id)
        if container.state != "CREATED" or container.starting:
            raise CriError("FAILED_PRECONDITION", f"container {container_id} is in {container.state} state")
        sandbox = container.sandbox
        spec = WorkloadSpec.from_annotations(sandbox.annotations, sandbox.pod_labels)
        container.starting = True
        try:
            if spec.start_seconds > 0:
                await self.clock.sleep(spec.start_seconds)
            await self.awake()
            if self.containers.get(container_id) is not container or container.state != "CREATED":
                raise CriError("FAILED_PRECONDITION", f"container {container_id} went while it started")
            self._start_process(container, spec)
        finally:
            container.starting = False

    def _start_process(self, container: Container, spec: WorkloadSpec) -> None:
        sandbox = container.sandbox
        now = self.clock.now()
        record = self.recorder.started(
            namespace=sandbox.namespace,
            pod=sandbox.name,
            pod_uid=sandbox.uid,
            node=self.node,
            labels=sandbox.pod_labels,
            at=now,
            restart=container.attempt,
            annotations=sandbox.annotations,
        )
        container.started_at = now
        container.process = Process(
            self.clock, self.recorder, record, spec, self.spawn, lambda process: self._exited(container, process)
        )

    def _exited(self, container: Container, process: Process) -> None:
        container.finished_at = process.finished_at or self.clock.now()
        if process.exit_code is None:  # the machine went off: nobody reads it, the state is forgotten
            container.exit_code = EXIT_SIGKILL
            container.reason = "Unknown"
        else:
            container.exit_code = process.exit_code
            container.reason = "Completed" if process.exit_code == 0 else "Error"
        container.stopped.set()

    async def stop_container(self, container_id: str, grace_seconds: int) -> None:
        """SIGTERM, SIGKILL after `grace_seconds` (the call's timeout); returns once the process stopped
        (containerd's `stopContainer`: a timeout of 0 is SIGKILL at once)."""
        container = self.container(container_id)
        process = container.process
        if process is None or not process.running:
            self._end_unstarted(container)
            return
        if grace_seconds <= 0:
            process.exit_now(EXIT_SIGKILL)
        else:
            process.terminate(grace_seconds)
        await container.stopped.wait()
        await self.awake()

    def _kill(self, container: Container) -> None:
        if container.process is not None and container.process.running:
            container.process.exit_now(EXIT_SIGKILL)
        else:
            self._end_unstarted(container)

    def _end_unstarted(self, container: Container) -> None:
        """A container stopped before its process started: exited, 137, as a runtime reports a killed one."""
        if container.state != "CREATED":
            return
        container.finished_at = self.clock.now()
        container.exit_code = EXIT_SIGKILL
        container.reason = "Error"
        container.stopped.set()

    def remove_container(self, container_id: str) -> None:
        container = self.containers.pop(container_id, None)
        if container is not None:
            self._kill(container)

    # ------------------------------------------------------------------------------------------ controls

    def exit_process(self, namespace: str, pod: str, code: int) -> None:
        """The pod's running process exits now with `code` (the lab's `exit-now`, as a machine control)."""
        if self.frozen:
            raise CriError("FAILED_PRECONDITION", f"node {self.node} is frozen: its processes cannot act")
        container = self.find_running(namespace, pod)
        assert container.process is not None
        container.process.exit_now(code)

    def set_termination_seconds(self, namespace: str, pod: str, seconds: float) -> None:
        container = self.find_running(namespace, pod)
        process = container.process
        if process is not None and not process.terminating:
            process.spec = dataclasses.replace(process.spec, termination_seconds=seconds)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

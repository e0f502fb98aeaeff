"""Scenario controls: what a test, a drill or a person does to the simulated cluster's machines.

Two ways in:

- through the Kubernetes API, where it is natural: the Node annotation `lab.dispatch.phpboyscout.uk/state`
  (`ready`, `not-ready`, `frozen`, `lost`, `powered-off`) that the node's kubelet follows, and the pod workload
  annotations (`simulated/nodes/workload.py`: `run-seconds`, `exit-code`, `termination-seconds`, `exit-now`, ...);
  `kubectl annotate node n1 lab.dispatch.phpboyscout.uk/state=frozen --overwrite` freezes a node;
- in Python: `AsyncScenario(async_lab)` on the lab's loop, or `Scenario(lab)` from a test thread, whose methods
  do the same and wait until the lab has carried them out (the kubelet changed state and, if it can reach the
  API, heartbeated), so a test never sleeps to let a control take effect.

`advance(seconds)` moves lab time forward in steps no longer than the kubelets' lease renew interval (10 s).
Before each step every kubelet that can reach the API renews its lease and the node lifecycle controller's cache
holds the renewal: the jump then stands for time in which the healthy machines kept heartbeating, and only the
silent ones go Unknown. (A bare `LabClock.advance(3600)` is a controller-manager stall of an hour: every node
would look silent.)

The overlap recorder (`lab/truth/overlap.py`), the truth about which processes ran when, is `scenario.recorder`.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from airflow_provider_dispatch.dispatch.vocabulary import TAINT_OUT_OF_SERVICE, TAINT_OUT_OF_SERVICE_VALUE
from airflow_provider_dispatch_lab.client import ApiStatusError, LabClient, is_conflict
from airflow_provider_dispatch_lab.kinds import NODE, POD, ApiCoordinates
from airflow_provider_dispatch_lab.runtime import AsyncLab, Lab
from airflow_provider_dispatch_lab.scenario import manifests
from airflow_provider_dispatch_lab.simulated.nodes.kubelet import CONNECTED, STATE_ANNOTATION, Kubelet, MachineState
from airflow_provider_dispatch_lab.simulated.nodes.kubelet_heartbeat import RENEW_INTERVAL
from airflow_provider_dispatch_lab.simulated.nodes.kubelet_manager import KubeletManager
from airflow_provider_dispatch_lab.simulated.nodes.node_lifecycle import NodeLifecycleController
from airflow_provider_dispatch_lab.simulated.nodes.workload import TERMINATION_SECONDS
from airflow_provider_dispatch_lab.truth.overlap import ExecutionKey, Overlap, OverlapRecorder, ProcessRecord

T = TypeVar("T")
Obj = dict[str, Any]
DEFAULT_TIMEOUT = 30.0
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


class AsyncScenario:
    """Scenario controls on the lab's own event loop."""

    def __init__(self, lab: AsyncLab) -> None:
        self.lab = lab
        self.client: LabClient = lab.context().client("lab-scenario")

    async def close(self) -> None:
        await self.client.close()

    # ------------------------------------------------------------------------------------------ lookups

    @property
    def manager(self) -> KubeletManager:
        manager = self._kubelet_manager()
        if manager is None:
            raise RuntimeError("the lab runs no kubelets: start it with controllers=NODE_CONTROLLERS")
        return manager

    def _kubelet_manager(self) -> KubeletManager | None:
        return next((c for c in self.lab.controllers if isinstance(c, KubeletManager)), None)

    @property
    def lifecycle(self) -> NodeLifecycleController | None:
        return next((c for c in self.lab.controllers if isinstance(c, NodeLifecycleController)), None)

    @property
    def recorder(self) -> OverlapRecorder:
        return self.manager.recorder

    def kubelet(self, node: str) -> Kubelet:
        kubelet = self.manager.kubelets.get(node)
        if kubelet is None:
            raise LookupError(f"no kubelet for node {node!r}: add the node first")
        return kubelet

    def overlaps(self, namespace: str, trainjob: str) -> list[Overlap]:
        return self.recorder.overlaps(namespace, trainjob)

    def rank_overlaps(self, namespace: str, trainjob: str) -> list[Overlap]:
        return self.recorder.rank_overlaps(namespace, trainjob)

    def attempt_overlaps(self, namespace: str, trainjob: str) -> list[Overlap]:
        return self.recorder.attempt_overlaps(namespace, trainjob)

    def executions(self, namespace: str, trainjob: str) -> set[ExecutionKey]:
        return self.recorder.executions(namespace, trainjob)

    def processes(self, namespace: str, trainjob: str) -> list[ProcessRecord]:
        return self.recorder.processes(namespace, trainjob)

    # ------------------------------------------------------------------------------------------- nodes

    async def add_node(
        self,
        name: str,
        *,
        cpu: str = "32",
        memory: str = "128Gi",
        gpus: int = 0,
        labels: dict[str, str] | None = None,
        taints: list[Obj] | None = None,
        state: str = MachineState.READY.value,
    ) -> Obj:
        """Register a node as its kubelet would, and wait until the kubelet runs (and, if connected, heartbeat)."""
        wanted = _state(state)
        node = manifests.node(name, cpu=cpu, memory=memory, gpus=gpus, labels=labels)
        if taints:
            node["spec"]["taints"] = copy.deepcopy(taints)
        if wanted != MachineState.READY:
            node["metadata"]["annotations"] = {STATE_ANNOTATION: wanted.value}
        created = await self.client.create(NODE, None, node)
        kubelet = await self.manager.kubelet(name)
        await kubelet.wait(lambda: kubelet.state == wanted and (wanted not in CONNECTED or kubelet.heartbeats > 0))
        return created

    async def set_state(self, node: str, state: str) -> None:
        """Put the machine in `state` through the Node annotation; returns once the kubelet has taken it on
        (and heartbeated, if it can reach the API)."""
        wanted = _state(state)
        kubelet = self.kubelet(node)
        before = kubelet.heartbeats
        beat_needed = kubelet.state != wanted and wanted in CONNECTED
        patch = {"metadata": {"annotations": {STATE_ANNOTATION: wanted.value}}}
        await self.client.patch(NODE, None, node, patch)
        await kubelet.wait(lambda: kubelet.state == wanted and (not beat_needed or kubelet.heartbeats > before))

    async def freeze(self, node: str) -> None:
        await self.set_state(node, MachineState.FROZEN)

    async def lose(self, node: str) -> None:
        await self.set_state(node, MachineState.LOST)

    async def power_off(self, node: str) -> None:
        await self.set_state(node, MachineState.POWERED_OFF)

    async def recover(self, node: str) -> None:
        await self.set_state(node, MachineState.READY)

    async def set_not_ready(self, node: str) -> None:
        await self.set_state(node, MachineState.NOT_READY)

    async def _update_taints(self, node: str, change: Callable[[list[Obj]], list[Obj]]) -> Obj:
        for _ in range(8):
            current = await self.client.get(NODE, None, node)
            body = copy.deepcopy(current)
            body.setdefault("spec", {})["taints"] = change(list(body["spec"].get("taints") or []))
            try:
                return await self.client.replace(NODE, None, node, body)
            except ApiStatusError as error:
                if not is_conflict(error):
                    raise
        raise RuntimeError(f"node {node}: taints kept changing underneath, gave up after 8 conflicts")

    async def taint_out_of_service(
        self, node: str, effect: str = "NoExecute", value: str = TAINT_OUT_OF_SERVICE_VALUE
    ) -> Obj:
        """What an operator (or a cloud controller) does once the machine is known to be off (k8s-apis §5.4)."""
        if effect not in TAINT_EFFECTS:
            raise ValueError(f"taint effect must be one of {', '.join(TAINT_EFFECTS)}, not {effect!r}")
        taint = {"key": TAINT_OUT_OF_SERVICE, "value": value, "effect": effect}

        def add(taints: list[Obj]) -> list[Obj]:
            kept = [t for t in taints if (t.get("key"), t.get("effect")) != (TAINT_OUT_OF_SERVICE, effect)]
            return [*kept, taint]

        return await self._update_taints(node, add)

    async def untaint(self, node: str, key: str, effect: str | None = None) -> Obj:
        def remove(taints: list[Obj]) -> list[Obj]:
            return [t for t in taints if t.get("key") != key or (effect is not None and t.get("effect") != effect)]

        return await self._update_taints(node, remove)

    async def delete_node(self, node: str) -> None:
        """Delete the Node object only: the machine, if on, keeps running (k8s-apis §5.5, §6 rule 11)."""
        await self.client.delete(NODE, None, node)

    # ------------------------------------------------------------------------------------------ workloads

    def _kubelet_running(self, namespace: str, pod: str) -> Kubelet:
        for kubelet in self.manager.kubelets.values():
            if kubelet.running_process(namespace, pod) is not None:
                return kubelet
        raise LookupError(f"no machine runs a process of pod {namespace}/{pod}")

    async def complete(self, namespace: str, pod: str) -> None:
        """The pod's process exits 0 now (on its machine, whether or not the kubelet can tell the API)."""
        self._kubelet_running(namespace, pod).exit_process(namespace, pod, 0)

    async def fail(self, namespace: str, pod: str, exit_code: int = 1) -> None:
        if not 1 <= exit_code <= 255:
            raise ValueError(f"a failing exit code is 1 to 255, not {exit_code}")
        self._kubelet_running(namespace, pod).exit_process(namespace, pod, exit_code)

    async def set_termination_seconds(self, namespace: str, pod: str, seconds: float) -> None:
        """How long the pod's process takes to stop after SIGTERM: the annotation for later processes, and the
        running process itself."""
        if seconds < 0:
            raise ValueError(f"termination seconds must be 0 or more, not {seconds}")
        patch = {"metadata": {"annotations": {TERMINATION_SECONDS: str(seconds)}}}
        await self.client.patch(POD, namespace, pod, patch)
        for kubelet in self.manager.kubelets.values():
            kubelet.set_termination_seconds(namespace, pod, seconds)

    # ------------------------------------------------------------------------------------------ time

    async def advance(self, seconds: float, *, step: float = RENEW_INTERVAL) -> None:
        """Move lab time forward by `seconds`, the healthy machines heartbeating all along (see the module doc)."""
        if seconds < 0:
            raise ValueError("lab time only moves forward")
        if not 0 < step <= RENEW_INTERVAL:
            raise ValueError(f"the step must be more than 0 and at most {RENEW_INTERVAL} s, not {step}")
        remaining = seconds
        while remaining > 1e-9:
            await self._keep_alive()
            jump = min(step, remaining)
            self.lab.clock.advance(jump)
            remaining -= jump
            await asyncio.sleep(0)
        await self._keep_alive()

    async def _keep_alive(self) -> None:
        manager = self._kubelet_manager()
        if manager is None:
            return  # a lab without kubelets: nothing heartbeats, time just moves
        lifecycle = self.lifecycle
        for kubelet in list(manager.kubelets.values()):
            if not kubelet.connected:
                continue
            await kubelet.heartbeat_now()
            renewed = kubelet.heartbeat.renewed_at
            if lifecycle is not None and renewed is not None and kubelet.registered:
                async with asyncio.timeout(DEFAULT_TIMEOUT):
                    await lifecycle.wait_lease_seen(kubelet.node_name, renewed)

    # ------------------------------------------------------------------------------------------ waiting

    async def wait_for(
        self,
        coords: ApiCoordinates,
        namespace: str | None,
        name: str,
        predicate: Callable[[Obj | None], bool],
        seen: list[Obj | None] | None = None,
    ) -> Obj | None:
        """The object (None: absent) once `predicate` holds, watching from a list. No timeout of its own: the
        caller bounds it (`asyncio.timeout`); `seen`, if given, keeps the last version looked at, for a message."""
        seen = [] if seen is None else seen
        while True:
            listed = await self.client.list(coords, namespace, field_selector=f"metadata.name={name}")
            items = listed.get("items") or []
            seen[:] = [items[0] if items else None]
            if predicate(seen[-1]):
                return seen[-1]
            version = str(listed["metadata"]["resourceVersion"])
            async for event in self.client.watch(coords, namespace, version):
                kind = event.get("type")
                if kind == "ERROR":
                    break  # a 410: list again
                obj = event.get("object") or {}
                if kind == "BOOKMARK" or (obj.get("metadata") or {}).get("name") != name:
                    continue
                seen[:] = [None if kind == "DELETED" else obj]
                if predicate(seen[-1]):
                    return seen[-1]

    async def wait_for_pod(self, namespace: str, name: str, predicate: Callable[[Obj | None], bool]) -> Obj | None:
        return await self.wait_for(POD, namespace, name, predicate)

    async def wait_for_node(self, name: str, predicate: Callable[[Obj | None], bool]) -> Obj | None:
        return await self.wait_for(NODE, None, name, predicate)


def _state(value: str) -> MachineState:
    try:
        return MachineState(value)
    except ValueError:
        allowed = ", ".join(s.value for s in MachineState)
        raise ValueError(f"a machine state is one of {allowed}, not {value!r}") from None


class Scenario:
    """The same controls for a synchronous caller (a pytest test, a drill script) of a `Lab` on its thread."""

    def __init__(self, lab: Lab) -> None:
        self.lab = lab
        self.inner = lab.call(lambda: AsyncScenario(lab.inner))

    def _run(self, make: Callable[[], Awaitable[T]], timeout: float = DEFAULT_TIMEOUT) -> T:
        """Run on the lab's loop, bounded there by `timeout` wall seconds (so nothing is left running)."""

        async def bounded() -> T:
            async with asyncio.timeout(timeout):
                return await make()

        return self.lab.run(bounded, timeout + 10)

    def close(self) -> None:
        self._run(self.inner.close)

    def __enter__(self) -> Scenario:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def recorder(self) -> OverlapRecorder:
        return self.inner.recorder

    def overlaps(self, namespace: str, trainjob: str) -> list[Overlap]:
        return self.lab.call(lambda: self.inner.overlaps(namespace, trainjob))

    def rank_overlaps(self, namespace: str, trainjob: str) -> list[Overlap]:
        """Two processes of one rank at once (any execution): the widened promise (`lab/truth/overlap.py`)."""
        return self.lab.call(lambda: self.inner.rank_overlaps(namespace, trainjob))

    def attempt_overlaps(self, namespace: str, trainjob: str) -> list[Overlap]:
        """Two restart attempts of one execution at once (hazard H2)."""
        return self.lab.call(lambda: self.inner.attempt_overlaps(namespace, trainjob))

    def executions(self, namespace: str, trainjob: str) -> set[ExecutionKey]:
        return self.lab.call(lambda: self.inner.executions(namespace, trainjob))

    def processes(self, namespace: str, trainjob: str) -> list[ProcessRecord]:
        return self.lab.call(lambda: [copy.copy(r) for r in self.inner.processes(namespace, trainjob)])

    def now(self) -> float:
        return self.lab.call(self.lab.clock.now)

    def add_node(self, name: str, **options: Any) -> Obj:
        return self._run(lambda: self.inner.add_node(name, **options))

    def set_state(self, node: str, state: str) -> None:
        self._run(lambda: self.inner.set_state(node, state))

    def freeze(self, node: str) -> None:
        self._run(lambda: self.inner.freeze(node))

    def lose(self, node: str) -> None:
        self._run(lambda: self.inner.lose(node))

    def power_off(self, node: str) -> None:
        self._run(lambda: self.inner.power_off(node))

    def recover(self, node: str) -> None:
        self._run(lambda: self.inner.recover(node))

    def set_not_ready(self, node: str) -> None:
        self._run(lambda: self.inner.set_not_ready(node))

    def taint_out_of_service(
        self, node: str, effect: str = "NoExecute", value: str = TAINT_OUT_OF_SERVICE_VALUE
    ) -> Obj:
        return self._run(lambda: self.inner.taint_out_of_service(node, effect, value))

    def untaint(self, node: str, key: str, effect: str | None = None) -> Obj:
        return self._run(lambda: self.inner.untaint(node, key, effect))

    def delete_node(self, node: str) -> None:
        self._run(lambda: self.inner.delete_node(node))

    def complete(self, namespace: str, pod: str) -> None:
        self._run(lambda: self.inner.complete(namespace, pod))

    def fail(self, namespace: str, pod: str, exit_code: int = 1) -> None:
        self._run(lambda: self.inner.fail(namespace, pod, exit_code))

    def set_termination_seconds(self, namespace: str, pod: str, seconds: float) -> None:
        self._run(lambda: self.inner.set_termination_seconds(namespace, pod, seconds))

    def advance(self, seconds: float, *, step: float = RENEW_INTERVAL) -> None:
        self._run(lambda: self.inner.advance(seconds, step=step), timeout=max(120.0, seconds / 10))

    def wait_for(
        self,
        coords: ApiCoordinates,
        namespace: str | None,
        name: str,
        predicate: Callable[[Obj | None], bool],
        *,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> Obj | None:
        """`AsyncScenario.wait_for`, with TimeoutError after `timeout` wall seconds naming what was last seen."""
        seen: list[Obj | None] = []

        async def bounded() -> Obj | None:
            try:
                async with asyncio.timeout(timeout):
                    return await self.inner.wait_for(coords, namespace, name, predicate, seen)
            except TimeoutError as error:
                last = seen[-1] if seen else "nothing"
                message = f"waited {timeout} s for {coords.plural} {name}; last seen: {last!r:.2000}"
                raise TimeoutError(message) from error

        return self._run(bounded, timeout + 5)

    def wait_for_pod(
        self, namespace: str, name: str, predicate: Callable[[Obj | None], bool], *, timeout: float = DEFAULT_TIMEOUT
    ) -> Obj | None:
        return self.wait_for(POD, namespace, name, predicate, timeout=timeout)

    def wait_for_node(
        self, name: str, predicate: Callable[[Obj | None], bool], *, timeout: float = DEFAULT_TIMEOUT
    ) -> Obj | None:
        return self.wait_for(NODE, None, name, predicate, timeout=timeout)

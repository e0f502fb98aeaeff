"""Starts one kubelet per Node and feeds it the pods bound to its node.

A real kubelet registers its Node and watches the pods bound to it (`spec.nodeName=<node>` field selector). Here
the Node object comes first (the scenario creates it as a kubelet registers, `manifests.node`): every Node that
exists or appears gets a kubelet, which runs until the lab stops, even if its Node object is deleted (the
machine does not stop because an operator deleted its Node). One pod informer and one node informer are shared
by the kubelets; each kubelet only acts on the pods bound to it, and only while it is connected.

The manager also owns the overlap recorder every machine writes to, and registers the lab's admission plugins
for its own annotations: workload annotations on pods (`workload.py`) and the machine state on nodes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

from airflow_provider_dispatch_lab.apiserver.errors import invalid
from airflow_provider_dispatch_lab.apiserver.registry.admission import AdmissionRequest, Operation
from airflow_provider_dispatch_lab.apiserver.registry.resources import ResourceType
from airflow_provider_dispatch_lab.client import Informer
from airflow_provider_dispatch_lab.kinds import NODE, POD
from airflow_provider_dispatch_lab.simulated.cluster import ClusterContext
from airflow_provider_dispatch_lab.simulated.nodes.kubelet import STATE_ANNOTATION, Kubelet, MachineState
from airflow_provider_dispatch_lab.simulated.nodes.workload import WorkloadAnnotationAdmission
from airflow_provider_dispatch_lab.simulated.support import meta, spec
from airflow_provider_dispatch_lab.truth.overlap import OverlapRecorder

Obj = dict[str, Any]


class NodeStateAdmission:
    """Refuses a Node whose lab state annotation is not one of the machine states (422 naming the values)."""

    name = "lab-node-state"

    def handles(self, resource: ResourceType, subresource: str | None, operation: Operation) -> bool:
        return resource.group == "" and resource.kind == "Node" and subresource is None and operation != "DELETE"

    async def mutate(self, request: AdmissionRequest) -> None:
        return None

    async def validate(self, request: AdmissionRequest) -> None:
        value = (meta(request.obj).get("annotations") or {}).get(STATE_ANNOTATION)
        if value is None or value in {s.value for s in MachineState}:
            return
        allowed = ", ".join(f'"{s.value}"' for s in MachineState)
        cause = {
            "reason": "FieldValueNotSupported",
            "field": f"metadata.annotations[{STATE_ANNOTATION}]",
            "message": f'Unsupported value: "{value}": supported values: {allowed}',
        }
        raise invalid("Node", "", request.name, [cause])


class KubeletManager:
    name = "kubelet-manager"

    def __init__(self, context: ClusterContext) -> None:
        self.clock = context.clock
        self.client = context.client("kubelet")
        self.recorder = OverlapRecorder(ledger=context.ledger)
        self.pods = Informer(self.client, POD)
        self.nodes = Informer(self.client, NODE)
        self.kubelets: dict[str, Kubelet] = {}
        self._tasks: asyncio.TaskGroup | None = None
        self._changed = asyncio.Condition()
        context.admission.register(WorkloadAnnotationAdmission())
        context.admission.register(NodeStateAdmission())

    async def run(self) -> None:
        self.nodes.on_change(self._on_node)
        self.pods.on_change(self._on_pod)
        try:
            async with asyncio.TaskGroup() as tasks:
                self._tasks = tasks
                tasks.create_task(self.nodes.run())
                tasks.create_task(self.pods.run())
        finally:
            self._tasks = None
            await self.client.close()

    def spawn(self, coroutine: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        if self._tasks is None:
            coroutine.close()
            raise RuntimeError("the kubelet manager is not running")
        return self._tasks.create_task(coroutine)

    async def _on_node(self, kind: str, node: Obj, old: Obj | None) -> None:
        name = str(meta(node).get("name") or "")
        kubelet = self.kubelets.get(name)
        if kind == "DELETED":
            if kubelet is not None:
                kubelet.node_deleted()
            return
        if kubelet is None:
            kubelet = Kubelet(name, self.client, self.clock, self.recorder, self.pods, self.nodes, self.spawn)
            self.kubelets[name] = kubelet
            self.spawn(kubelet.run())
            async with self._changed:
                self._changed.notify_all()
        await kubelet.node_seen(node)

    def _on_pod(self, kind: str, pod: Obj, old: Obj | None) -> None:
        for node_name in {spec(pod).get("nodeName"), spec(old).get("nodeName")}:
            kubelet = self.kubelets.get(str(node_name)) if node_name else None
            if kubelet is not None:
                kubelet.pod_event(pod)

    async def kubelet(self, node_name: str) -> Kubelet:
        """The kubelet of that node, once the manager has seen its Node (callers bound the wait)."""
        async with self._changed:
            await self._changed.wait_for(lambda: node_name in self.kubelets)
        return self.kubelets[node_name]

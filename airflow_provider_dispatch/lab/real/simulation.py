"""The machines under the real control plane: the lab's kubelets, and the ground truth, against a real API server.

Nodes have no container runtime here, as in the lab: each Node gets the lab's simulated kubelet
(`controllers/kubelet*.py`), unchanged, talking to the real kube-apiserver over https with the CA bundle and a
bearer token. It registers nothing itself (the Node is created through the API, as `add_node` does), renews its
Lease in `kube-node-lease`, reports node status, runs the pods the real scheduler binds to it as simulated
processes, and follows the lab's machine-state annotation on its Node (`ready`, `not-ready`, `frozen`, `lost`,
`powered-off`): a `lost` node stops heartbeating, and the real node lifecycle controller is what notices.

The lab clock runs at speed 1 with no stall guard, so lab time is wall time: every timestamp the kubelets write
is compared by real controllers against their own clocks.

The overlap recorder keeps the truth of which processes ran when. Its admission ledger cannot read a store here:
`WatchedAdmissionLedger` is fed from watches of TrainJobs and pods on the real API server instead. The API
server's resourceVersion is etcd's global revision, so a pod is attributed to the admissions whose revision is
lower than the revision of the pod's creation, whichever of the two watches delivered its event first. Two limits
that the lab's store-fed ledger does not have: a pod first seen in a relist (after a watch expired) is kept with
the revision it had then, not its creation's; and an unsuspend and suspend of a TrainJob that both fall in the
gap before a relist are not seen.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from airflow_provider_dispatch.lab.apiserver.registry.admission import AdmissionChain
from airflow_provider_dispatch.lab.apiserver.storage.store import WatchEvent
from airflow_provider_dispatch.lab.client import Informer, LabClient
from airflow_provider_dispatch.lab.clock import LabClock
from airflow_provider_dispatch.lab.kinds import NODE, POD, TRAINJOB
from airflow_provider_dispatch.lab.scenario import manifests
from airflow_provider_dispatch.lab.simulated.cluster import ClusterContext
from airflow_provider_dispatch.lab.simulated.nodes.kubelet import CONNECTED, STATE_ANNOTATION, Kubelet, MachineState
from airflow_provider_dispatch.lab.simulated.nodes.kubelet_manager import KubeletManager
from airflow_provider_dispatch.lab.truth.overlap import AdmissionLedger, OverlapRecorder

Obj = dict[str, Any]
logger = logging.getLogger(__name__)

_TRAINJOBS = "trainjobs.trainer.kubeflow.org"


class WatchedAdmissionLedger(AdmissionLedger):
    """The lab's admission ledger, fed by API watches instead of store events.

    TrainJob events arrive in order on their own watch, so admissions are counted as in the lab. A pod is kept
    with the revision at which the ledger first saw it (its creation, for a pod seen on the watch), and its
    execution is the number of admissions of its TrainJob with a lower revision, counted when asked.
    """

    def __init__(self) -> None:
        super().__init__()
        self._pod_revisions: dict[str, tuple[tuple[str, str], int]] = {}

    def observe(self, event: WatchEvent) -> None:
        if event.resource != "pods":
            super().observe(event)
            return
        if event.type != "ADDED":
            return
        metadata = event.obj.get("metadata") or {}
        uid = str(metadata.get("uid") or "")
        labels = metadata.get("labels") or {}
        trainjob = (str(metadata.get("namespace") or ""), str(labels.get("jobset.sigs.k8s.io/jobset-name") or ""))
        if uid and trainjob[1]:
            self._pod_revisions.setdefault(uid, (trainjob, event.revision))

    def execution_of(self, pod_uid: str) -> int | None:
        known = self._pod_revisions.get(pod_uid)
        if known is None:
            return None
        trainjob, revision = known
        count = sum(1 for admission in self.admissions.get(trainjob, ()) if admission.revision < revision)
        return count or None


def _revision(obj: Obj) -> int:
    try:
        return int((obj.get("metadata") or {}).get("resourceVersion") or 0)
    except ValueError:
        return 0


class LedgerFeed:
    """Two informers (TrainJobs, pods; all namespaces) whose events feed a `WatchedAdmissionLedger`."""

    name = "admission-ledger-feed"

    def __init__(self, client: LabClient, ledger: WatchedAdmissionLedger) -> None:
        self.client = client
        self.ledger = ledger
        self.trainjobs = Informer(client, TRAINJOB)
        self.pods = Informer(client, POD)

    def _feed(self, resource: str) -> Any:
        def handler(kind: str, obj: Obj, old: Obj | None) -> None:
            meta = obj.get("metadata") or {}
            key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
            event = WatchEvent(_revision(obj), kind, resource, key, obj, old)  # type: ignore[arg-type]
            self.ledger.observe(event)

        return handler

    async def run(self) -> None:
        self.trainjobs.on_change(self._feed(_TRAINJOBS))
        self.pods.on_change(self._feed("pods"))
        try:
            async with asyncio.TaskGroup() as tasks:
                tasks.create_task(self.trainjobs.run())
                tasks.create_task(self.pods.run())
        finally:
            await self.client.close()


class Machines:
    """The simulated machines of a real cluster, on the caller's event loop: kubelets, clock, ground truth."""

    def __init__(self, url: str, token: str, ca_file: str) -> None:
        self.clock = LabClock(1.0, max_stall=float("inf"))
        self.ledger = WatchedAdmissionLedger()
        self.context = ClusterContext(url, self.clock, AdmissionChain(), token, self.ledger, ca_file)
        self.kubelets = KubeletManager(self.context)
        self.feed = LedgerFeed(self.context.client("dispatch-admission-ledger"), self.ledger)
        self.client = self.context.client("dispatch-real-scenario")
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def recorder(self) -> OverlapRecorder:
        return self.kubelets.recorder

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self.clock.run(), name="lab-clock"),
            loop.create_task(self.feed.run(), name=self.feed.name),
            loop.create_task(self.kubelets.run(), name=self.kubelets.name),
        ]
        await self.feed.trainjobs.synced.wait()
        await self.feed.pods.synced.wait()

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks = []
        await self.client.close()

    def kubelet(self, node: str) -> Kubelet:
        kubelet = self.kubelets.kubelets.get(node)
        if kubelet is None:
            raise LookupError(f"no kubelet for node {node!r}: add the node first")
        return kubelet

    async def add_node(
        self, name: str, *, cpu: str = "32", memory: str = "128Gi", labels: dict[str, str] | None = None
    ) -> Obj:
        """Register a Node as its kubelet would, and wait until its kubelet runs and has heartbeated."""
        created = await self.client.create(NODE, None, manifests.node(name, cpu=cpu, memory=memory, labels=labels))
        kubelet = await self.kubelets.kubelet(name)
        await kubelet.wait(lambda: kubelet.heartbeats > 0)
        return created

    async def set_state(self, node: str, state: str) -> None:
        """Put the machine in `state` through its Node annotation; returns once its kubelet took it on."""
        wanted = MachineState(state)
        kubelet = self.kubelet(node)
        before = kubelet.heartbeats
        beat_needed = kubelet.state != wanted and wanted in CONNECTED
        await self.client.patch(NODE, None, node, {"metadata": {"annotations": {STATE_ANNOTATION: wanted.value}}})
        await kubelet.wait(lambda: kubelet.state == wanted and (not beat_needed or kubelet.heartbeats > before))

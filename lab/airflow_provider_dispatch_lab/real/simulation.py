"""The machines under the real control plane: hollow kubelets on the lab's simulated processes, and the ground truth.

Each Node is a hollow machine (`machine.py`): the real kubelet of the pinned Kubernetes release
(`controlplane/kubelet`, built by `controlplane/build`), which registers its Node, renews its Lease, reports node
status and runs the pods the real scheduler binds to it, through a CRI server of the project's own whose containers
are the lab's simulated processes (`containers.py`, `cri.py`); and a relay to the API server that a partition
cuts (`partition.py`). A machine's state (`ready`, `not-ready`, `frozen`, `lost`, `powered-off`) acts on the
machine, not through the API: a `lost` machine's kubelet runs on, cut off, and the real node lifecycle controller
is what notices.

The processes keep lab time, which here runs at speed 1 with no stall guard: lab time is wall time, the clock the
kubelets and the controllers read too.

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
import itertools
import logging
from pathlib import Path
from typing import Any

from airflow_provider_dispatch_lab.apiserver.registry.admission import AdmissionChain
from airflow_provider_dispatch_lab.apiserver.storage.store import WatchEvent
from airflow_provider_dispatch_lab.client import ApiStatusError, Informer, LabClient, is_not_found
from airflow_provider_dispatch_lab.clock import LabClock
from airflow_provider_dispatch_lab.kinds import NODE, POD, TRAINJOB
from airflow_provider_dispatch_lab.real.containers import ContainerRuntime
from airflow_provider_dispatch_lab.real.machine import HollowMachine, MachineSpec, Wiring
from airflow_provider_dispatch_lab.simulated.cluster import ClusterContext
from airflow_provider_dispatch_lab.simulated.nodes.kubelet_runs import MachineState
from airflow_provider_dispatch_lab.truth.overlap import AdmissionLedger, OverlapRecorder

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
    """The hollow machines of a real cluster, on the caller's event loop: their kubelets, runtimes and network
    paths (`machine.py`), the clock their processes keep, and the ground truth."""

    def __init__(self, url: str, token: str, ca_file: str, wiring: Wiring, workdir: Path) -> None:
        self.clock = LabClock(1.0, max_stall=float("inf"))
        self.ledger = WatchedAdmissionLedger()
        self.recorder = OverlapRecorder(ledger=self.ledger)
        self.context = ClusterContext(url, self.clock, AdmissionChain(), token, self.ledger, ca_file)
        self.feed = LedgerFeed(self.context.client("dispatch-admission-ledger"), self.ledger)
        self.client = self.context.client("dispatch-real-scenario")
        self.wiring = wiring
        self.workdir = workdir
        self.machines: dict[str, HollowMachine] = {}
        self._subnets = itertools.count()
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self.clock.run(), name="lab-clock"),
            loop.create_task(self.feed.run(), name=self.feed.name),
        ]
        await self.feed.trainjobs.synced.wait()
        await self.feed.pods.synced.wait()

    async def stop(self) -> None:
        for machine in list(self.machines.values()):
            with contextlib.suppress(Exception):
                await machine.stop()
        self.machines.clear()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks = []
        await self.client.close()

    def machine(self, node: str) -> HollowMachine:
        machine = self.machines.get(node)
        if machine is None:
            raise LookupError(f"no machine for node {node!r}: add the node first")
        return machine

    async def add_node(
        self,
        name: str,
        *,
        cpu: str = "32",
        memory: str = "128Gi",
        labels: dict[str, str] | None = None,
        status_report_seconds: float | None = None,
    ) -> Obj:
        """Boot a machine whose kubelet registers the Node; returns the Node once it is Ready."""
        if name in self.machines:
            raise ValueError(f"node {name!r} has a machine already")
        spec = MachineSpec(name, int(cpu), memory, tuple(sorted((labels or {}).items())), status_report_seconds)
        runtime = ContainerRuntime(name, self.clock, self.recorder, next(self._subnets))
        machine = HollowMachine(spec, self.wiring, self.workdir / name, runtime, self.recorder)
        self.machines[name] = machine
        await machine.start()
        while True:  # a poll of the API, bounded by the caller (`RealCluster.run`'s timeout)
            machine.check()
            node = await tolerant_get(self.client, name)
            if node is not None and _ready(node):
                return node
            await asyncio.sleep(0.2)

    async def remove_node(self, name: str) -> None:
        """The machine goes, then its Node (deleted as an operator would)."""
        machine = self.machines.pop(name, None)
        if machine is not None:
            await machine.stop()
        with contextlib.suppress(ApiStatusError):
            await self.client.delete(NODE, None, name)

    async def set_state(self, node: str, state: str) -> None:
        """Put the machine in `state` (`ready`, `not-ready`, `frozen`, `lost`, `powered-off`) now."""
        await self.machine(node).set_state(MachineState(state))

    def exit_process(self, node: str, namespace: str, pod: str, code: int) -> None:
        """The pod's process on that machine exits now with `code`, whatever the kubelet knows."""
        self.machine(node).runtime.exit_process(namespace, pod, code)


async def tolerant_get(client: LabClient, name: str) -> Obj | None:
    try:
        return await client.get(NODE, None, name)
    except ApiStatusError as error:
        if is_not_found(error):
            return None
        raise


def _ready(node: Obj) -> bool:
    for condition in (node.get("status") or {}).get("conditions") or ():
        if condition.get("type") == "Ready":
            return bool(condition.get("status") == "True")
    return False

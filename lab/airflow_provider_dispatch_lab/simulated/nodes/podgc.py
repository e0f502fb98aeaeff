"""PodGC: force-deletes the pods nothing else will ever finish, exactly as k8s-apis §6 rule 9 and §5.4/§5.5.

From `kubernetes/kubernetes:pkg/controller/podgc/gc_controller.go` (read at `003e86297d18`), one `gc` pass every
`gcCheckPeriod` (20 s), the first at start, over the informer caches, in this order:

- `gcTerminated`, only with a positive threshold (`--terminated-pod-gc-threshold`, 12500 by default): the
  oldest terminal pods above the threshold, evicted ones first (`byEvictionAndCreationTimestamp`);
- `gcTerminating` (a): a pod with a deletionTimestamp whose node exists in the cache, is NOT Ready
  (`nodeutil.IsNodeReady`: Ready condition True) AND carries a taint with the key
  `node.kubernetes.io/out-of-service` (any value, any effect: `taints.TaintKeyExists`). A Ready node's
  terminating pods are left alone, taint or not. Tolerations are not looked at;
- `gcOrphaned` (b): every pod bound to a node absent from the cache puts that node in quarantine for 40 s
  (`quarantineTime`, a delaying queue: the earliest entry wins); once out of quarantine, and still absent, a
  live GET must answer 404; then each of its pods gets the condition `DisruptionTarget=True`, reason
  `DeletionByPodGC`, message `PodGC: node no longer exists`;
- `gcUnscheduledTerminating` (c): a pod with a deletionTimestamp and no `spec.nodeName`.

Every deletion is `markFailedAndDeletePod[WithCondition]`: a status patch to phase `Failed` (plus the condition)
unless the pod is already Succeeded or Failed, then DELETE with grace 0. With a finalizer (the Job controller's)
the pod stays until it is removed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from airflow_provider_dispatch_lab.client import Informer, is_not_found
from airflow_provider_dispatch_lab.kinds import NODE, POD
from airflow_provider_dispatch_lab.simulated.cluster import ClusterContext
from airflow_provider_dispatch_lab.simulated.support import (
    TRANSIENT,
    is_terminal,
    meta,
    pod_key,
    ready_status,
    spec,
    status,
    tolerant,
)

Obj = dict[str, Any]

GC_CHECK_PERIOD = 20.0
QUARANTINE_TIME = 40.0
DEFAULT_TERMINATED_POD_THRESHOLD = 12500
TAINT_OUT_OF_SERVICE = "node.kubernetes.io/out-of-service"
ORPHAN_CONDITION = {
    "type": "DisruptionTarget",
    "status": "True",
    "reason": "DeletionByPodGC",
    "message": "PodGC: node no longer exists",
}


def _evicted(pod: Mapping[str, Any]) -> bool:
    """`eviction.PodIsEvicted`: phase Failed with reason Evicted."""
    return status(pod).get("phase") == "Failed" and status(pod).get("reason") == "Evicted"


class PodGarbageCollector:
    name = "pod-garbage-collector"

    def __init__(self, context: ClusterContext, terminated_pod_threshold: int = DEFAULT_TERMINATED_POD_THRESHOLD):
        self.clock = context.clock
        self.client = context.client("pod-garbage-collector")
        self.pods = Informer(self.client, POD)
        self.nodes = Informer(self.client, NODE)
        self.terminated_pod_threshold = terminated_pod_threshold
        self.quarantine: dict[str, float] = {}
        self.passes = 0
        self.passed = asyncio.Condition()

    async def run(self) -> None:
        try:
            async with asyncio.TaskGroup() as tasks:
                tasks.create_task(self.pods.run())
                tasks.create_task(self.nodes.run())
                tasks.create_task(self._loop())
        finally:
            await self.client.close()

    async def _loop(self) -> None:
        await self.pods.synced.wait()
        await self.nodes.synced.wait()
        while True:
            await self.gc()
            await self.clock.sleep(GC_CHECK_PERIOD)

    async def gc(self) -> None:
        pods = list(self.pods.items())
        nodes = {str(meta(n).get("name")): n for n in self.nodes.items()}
        if self.terminated_pod_threshold > 0:
            await self._gc_terminated(pods)
        await self._gc_terminating(pods, nodes)
        await self._gc_orphaned(pods, nodes)
        await self._gc_unscheduled_terminating(pods)
        async with self.passed:
            self.passes += 1
            self.passed.notify_all()

    async def _gc_terminated(self, pods: list[Obj]) -> None:
        terminated = [p for p in pods if is_terminal(p)]
        excess = len(terminated) - self.terminated_pod_threshold
        if excess <= 0:
            return
        terminated.sort(
            key=lambda p: (not _evicted(p), str(meta(p).get("creationTimestamp")), str(meta(p).get("name")))
        )
        for pod in terminated[:excess]:
            await self._fail_and_delete(pod)

    async def _gc_terminating(self, pods: list[Obj], nodes: dict[str, Obj]) -> None:
        for pod in pods:
            if not meta(pod).get("deletionTimestamp"):
                continue
            node = nodes.get(str(spec(pod).get("nodeName") or ""))
            if node is None:
                continue  # "Failed to get node": left to the orphan pass
            out_of_service = any(t.get("key") == TAINT_OUT_OF_SERVICE for t in spec(node).get("taints") or ())
            if ready_status(node) != "True" and out_of_service:
                await self._fail_and_delete(pod)

    async def _gc_orphaned(self, pods: list[Obj], nodes: dict[str, Obj]) -> None:
        now = self.clock.now()
        for pod in pods:
            node_name = str(spec(pod).get("nodeName") or "")
            if node_name and node_name not in nodes:
                self.quarantine.setdefault(node_name, now + QUARANTINE_TIME)
        deleted: set[str] = set()
        for node_name, ready_at in list(self.quarantine.items()):
            if ready_at > now:
                continue
            del self.quarantine[node_name]
            if node_name not in nodes and await self._confirmed_gone(node_name):
                deleted.add(node_name)
        for pod in pods:
            if str(spec(pod).get("nodeName") or "") in deleted:
                await self._fail_and_delete(pod, ORPHAN_CONDITION)

    async def _confirmed_gone(self, node_name: str) -> bool:
        try:
            await self.client.get(NODE, None, node_name)
        except TRANSIENT as error:
            return is_not_found(error)
        return False

    async def _gc_unscheduled_terminating(self, pods: list[Obj]) -> None:
        for pod in pods:
            if meta(pod).get("deletionTimestamp") and not spec(pod).get("nodeName"):
                await self._fail_and_delete(pod)

    async def _fail_and_delete(self, pod: Obj, condition: Mapping[str, str] | None = None) -> None:
        """`markFailedAndDeletePodWithCondition`."""
        namespace, name = pod_key(pod)
        uid = str(meta(pod).get("uid") or "")
        if not is_terminal(pod):
            body: Obj = {"phase": "Failed"}
            if condition is not None:
                body["conditions"] = [{**condition, "lastTransitionTime": self.clock.timestamp()}]
            patched = await tolerant(
                f"podgc: fail {namespace}/{name}",
                lambda: self.client.patch(
                    POD,
                    namespace,
                    name,
                    {"metadata": {"uid": uid}, "status": body},
                    patch_type="strategic",
                    subresource="status",
                ),
            )
            if patched is None:
                return
        await tolerant(
            f"podgc: delete {namespace}/{name}",
            lambda: self.client.delete(POD, namespace, name, grace_period_seconds=0, uid=uid),
        )

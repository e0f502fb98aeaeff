"""The taint eviction controller: deletes the pods of a node that do not tolerate its NoExecute taints.

From `kubernetes/kubernetes:pkg/controller/tainteviction/taint_eviction.go` (read at `003e86297d18`):

- it keeps the NoExecute taints of every node (`handleNodeUpdate`); on a change it looks at every pod bound to
  the node, and on a pod change (new, rebound, other tolerations) at that pod (`handlePodUpdate`);
- `processPodOnNode`: a pod that does not tolerate every NoExecute taint is deleted now; one that tolerates them
  all is deleted after the smallest `tolerationSeconds` of the tolerations used (never, if none of them has
  one), counted from when the eviction was first scheduled; removing the taints cancels it. The
  DefaultTolerationSeconds admission plugin gives every pod 300 s for `not-ready` and `unreachable`
  (`schema_builtin.apply_pod_create_admission`), hence eviction five minutes after a node goes silent;
- the deletion (`addConditionAndDeletePod`) first adds the pod condition `DisruptionTarget=True`, reason
  `DeletionByTaintManager`, message `Taint manager: deleting due to NoExecute taint`, then deletes with default
  options: a graceful deletion with the pod's own grace period. On a node whose kubelet cannot confirm it, the
  pod then stays Terminating. Pods already terminating or terminal are not skipped (the delete is a no-op, or,
  for a terminal pod, removes it: grace is forced to 0).

This covers the `out-of-service:NoExecute` taint too: pods that do not tolerate it are made Terminating at once,
and PodGC then force-deletes them when the node is not Ready (`podgc.py`).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from airflow_provider_dispatch_lab.client import ApiStatusError, Informer
from airflow_provider_dispatch_lab.kinds import NODE, POD
from airflow_provider_dispatch_lab.simulated.cluster import ClusterContext
from airflow_provider_dispatch_lab.simulated.nodes.taints import (
    matching_tolerations,
    min_toleration_seconds,
    no_execute,
)
from airflow_provider_dispatch_lab.simulated.support import (
    TRANSIENT,
    WorkQueue,
    find_condition,
    logger,
    meta,
    pod_key,
    spec,
)

Obj = dict[str, Any]
RETRIES = 5
REASON = "DeletionByTaintManager"
MESSAGE = "Taint manager: deleting due to NoExecute taint"


@dataclass
class _Scheduled:
    created: float
    fire_at: float
    task: asyncio.Task[None]


class TaintEvictionController:
    name = "taint-eviction-controller"

    def __init__(self, context: ClusterContext) -> None:
        self.clock = context.clock
        self.client = context.client("taint-eviction-controller")
        self.pods = Informer(self.client, POD)
        self.nodes = Informer(self.client, NODE)
        self.tainted: dict[str, list[Any]] = {}
        self.scheduled: dict[tuple[str, str], _Scheduled] = {}
        self.node_queue: WorkQueue[str] = WorkQueue()
        self.pod_queue: WorkQueue[tuple[str, str, str]] = WorkQueue()
        self._work = asyncio.Event()
        self._tasks: asyncio.TaskGroup | None = None

    async def run(self) -> None:
        self.nodes.on_change(self._on_node)
        self.pods.on_change(self._on_pod)
        try:
            async with asyncio.TaskGroup() as tasks:
                self._tasks = tasks
                tasks.create_task(self.pods.run())
                tasks.create_task(self.nodes.run())
                tasks.create_task(self._worker())
        finally:
            self._tasks = None
            await self.client.close()

    def _on_node(self, kind: str, node: Obj, old: Obj | None) -> None:
        if kind == "MODIFIED" and no_execute(spec(old).get("taints")) == no_execute(spec(node).get("taints")):
            return
        self.node_queue.add(str(meta(node).get("name")))
        self._work.set()

    def _on_pod(self, kind: str, pod: Obj, old: Obj | None) -> None:
        if (
            kind == "MODIFIED"
            and old is not None
            and spec(old).get("tolerations") == spec(pod).get("tolerations")
            and spec(old).get("nodeName") == spec(pod).get("nodeName")
        ):
            return
        namespace, name = pod_key(pod)
        self.pod_queue.add((namespace, name, str(spec(pod).get("nodeName") or "")))
        self._work.set()

    async def _worker(self) -> None:
        """Node updates first, then pod updates (`worker`: "prioritize Node updates over Pod updates")."""
        await self.pods.synced.wait()
        await self.nodes.synced.wait()
        while True:
            await self._work.wait()
            self._work.clear()
            if len(self.node_queue):
                for name in await self.node_queue.take():
                    self._handle_node(name)
            if len(self.pod_queue):
                for key in await self.pod_queue.take():
                    self._handle_pod(*key)

    def _handle_node(self, name: str) -> None:
        node = self.nodes.get(None, name)
        if node is None:
            self.tainted.pop(name, None)
            return
        taints = no_execute(spec(node).get("taints"))
        if taints:
            self.tainted[name] = taints
        else:
            self.tainted.pop(name, None)
        pods = [p for p in self.pods.items() if spec(p).get("nodeName") == name]
        for pod in pods:
            if taints:
                self._process(pod, taints)
            else:
                self._cancel(pod_key(pod))

    def _handle_pod(self, namespace: str, name: str, node_name: str) -> None:
        pod = self.pods.get(namespace, name)
        if pod is None:
            self._cancel((namespace, name))
            return
        if spec(pod).get("nodeName") != node_name or not node_name:
            return
        taints = self.tainted.get(node_name)
        if taints:
            self._process(pod, taints)

    def _process(self, pod: Obj, taints: list[Any]) -> None:
        key = pod_key(pod)
        now = self.clock.now()
        tolerated, used = matching_tolerations(taints, spec(pod).get("tolerations"))
        if not tolerated:
            self._cancel(key)
            self._schedule(key, now, now)
            return
        seconds = min_toleration_seconds(used)
        if seconds is None:
            self._cancel(key)
            return
        existing = self.scheduled.get(key)
        created = now
        if existing is not None:
            if existing.created + seconds < now + seconds:
                return  # keep the eviction scheduled earlier
            created = existing.created
            self._cancel(key)
        self._schedule(key, created, now + seconds)

    def _schedule(self, key: tuple[str, str], created: float, fire_at: float) -> None:
        assert self._tasks is not None
        task = self._tasks.create_task(self._fire(key, fire_at))
        self.scheduled[key] = _Scheduled(created, fire_at, task)

    def _cancel(self, key: tuple[str, str]) -> None:
        scheduled = self.scheduled.pop(key, None)
        if scheduled is not None and scheduled.task is not asyncio.current_task():
            scheduled.task.cancel()

    async def _fire(self, key: tuple[str, str], fire_at: float) -> None:
        await self.clock.sleep_until(fire_at)
        for _ in range(RETRIES):
            try:
                await self._delete(*key)
                break
            except TRANSIENT as error:
                if isinstance(error, ApiStatusError) and error.code == 404:
                    break
                logger.info("taint eviction of %s/%s failed: %s", *key, error)
        scheduled = self.scheduled.get(key)
        if scheduled is not None and scheduled.task is asyncio.current_task():
            del self.scheduled[key]

    async def _delete(self, namespace: str, name: str) -> None:
        """`addConditionAndDeletePod`."""
        pod = await self.client.get(POD, namespace, name)
        current = find_condition(pod, "DisruptionTarget")
        if current is None or (current.get("status"), current.get("reason"), current.get("message")) != (
            "True",
            REASON,
            MESSAGE,
        ):
            condition = {
                "type": "DisruptionTarget",
                "status": "True",
                "reason": REASON,
                "message": MESSAGE,
                "lastTransitionTime": self.clock.timestamp(),
            }
            await self.client.patch(
                POD,
                namespace,
                name,
                {"status": {"conditions": [condition]}},
                patch_type="strategic",
                subresource="status",
            )
        await self.client.delete(POD, namespace, name)

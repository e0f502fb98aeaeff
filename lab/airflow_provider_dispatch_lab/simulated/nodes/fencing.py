"""A simulated remediation agent: fences a node that stays not Ready, then taints it out-of-service.

Kubernetes never adds `node.kubernetes.io/out-of-service` itself (k8s-apis §5.4; anchors §1.3): something that
knows the machine is off must. In a cluster that is a remediation agent or a cloud controller, and this is the
lab's (k8s-apis §6 rule 11, "a cloud controller adds and removes out-of-service"). What it mimics:

- when: medik8s Node Healthcheck declares a node unhealthy once a condition has had a status for a duration
  (`unhealthyConditions: [{type: Ready, status: Unknown, duration: 300s}, {type: Ready, status: "False", ...}]`,
  `node-healthcheck-operator` `config/samples`; Cluster API's MachineHealthCheck has the same
  `unhealthyNodeConditions` with a `timeout`). The duration is counted here from the Ready condition's
  `lastTransitionTime`; that NHC counts it from there is what its docs say, its code was not read (UNVERIFIED);
- what: medik8s Fence Agents Remediation (`fence-agents-remediation` `controllers/fenceagentsremediation_
  controller.go` `Reconcile`) runs the fence agent against the machine's management interface (BMC, hypervisor)
  first, and only once the agent reported success evicts the workloads; its `OutOfServiceTaint` remediation
  strategy does that by adding the out-of-service taint (anchors §1.3). cloud-provider-azure adds the taint when
  it sees the VM shut down and removes it when the node is Ready again (kubernetes-sigs/cloud-provider-azure
  #4522, k8s-apis §5.4). The order is the safety of it: power off, THEN taint (a taint on a running machine is
  exactly the hazard the out-of-service docs warn of).

The lab's version, per Node:

- it is armed by the annotation `lab.dispatch.phpboyscout.uk/fence-after-seconds: "<seconds>"` (lab seconds);
  a Node without it is never touched, so tests that drive cessation themselves are unaffected;
- once the Node's Ready condition has been other than True for that long (counted from its
  `lastTransitionTime`; a Node that never posted Ready counts from when the agent first saw it), the agent
  powers the machine off through the out-of-band path the lab has, the Node's state annotation
  (`lab.dispatch.phpboyscout.uk/state: powered-off`, which the node's kubelet follows), and then adds
  `node.kubernetes.io/out-of-service=nodeshutdown:NoExecute`. Both writes are idempotent: after a crash in
  between, the next pass adds the missing taint;
- when the Node is Ready again (someone powered the machine back on), it removes the out-of-service taint it
  added (the azure behaviour; FAR removes its taints when the remediation ends).

A bad `fence-after-seconds` value is logged and the Node left alone (nothing is fenced on a guess).
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable, Mapping
from typing import Any

from airflow_provider_dispatch.dispatch.vocabulary import TAINT_OUT_OF_SERVICE, TAINT_OUT_OF_SERVICE_VALUE
from airflow_provider_dispatch_lab.client import Informer, is_conflict, is_not_found
from airflow_provider_dispatch_lab.clock import parse_timestamp
from airflow_provider_dispatch_lab.kinds import NODE
from airflow_provider_dispatch_lab.simulated.cluster import ClusterContext
from airflow_provider_dispatch_lab.simulated.nodes.kubelet_runs import STATE_ANNOTATION, MachineState
from airflow_provider_dispatch_lab.simulated.nodes.workload import LAB_PREFIX, WorkloadError, annotation_seconds
from airflow_provider_dispatch_lab.simulated.support import (
    TRANSIENT,
    WorkQueue,
    find_condition,
    logger,
    meta,
    spec,
)

Obj = dict[str, Any]
FENCE_AFTER_SECONDS = LAB_PREFIX + "fence-after-seconds"
FENCE_TAINT: Obj = {"key": TAINT_OUT_OF_SERVICE, "value": TAINT_OUT_OF_SERVICE_VALUE, "effect": "NoExecute"}
UPDATE_RETRIES = 8


def fence_after(node: Mapping[str, Any]) -> float | None:
    """The node's `fence-after-seconds`, or None when it is absent or unreadable (then nothing is fenced)."""
    annotations = meta(node).get("annotations") or {}
    try:
        return annotation_seconds(annotations, FENCE_AFTER_SECONDS)
    except WorkloadError:
        logger.warning(
            "node %s: %s=%r is not a number of seconds; not fenced",
            meta(node).get("name"),
            FENCE_AFTER_SECONDS,
            annotations[FENCE_AFTER_SECONDS],
        )
        return None


def has_fence_taint(node: Mapping[str, Any]) -> bool:
    return any(
        t.get("key") == FENCE_TAINT["key"] and t.get("effect") == FENCE_TAINT["effect"]
        for t in spec(node).get("taints") or ()
    )


def is_powered_off(node: Mapping[str, Any]) -> bool:
    return (meta(node).get("annotations") or {}).get(STATE_ANNOTATION) == MachineState.POWERED_OFF.value


class FencingAgent:
    """The lab's remediation agent (module docstring). `fenced` lists the nodes it fenced, in order."""

    name = "lab-fencing-agent"

    def __init__(self, context: ClusterContext) -> None:
        self.clock = context.clock
        self.client = context.client("lab-fencing-agent")
        self.nodes = Informer(self.client, NODE)
        self.queue: WorkQueue[str] = WorkQueue()
        self.first_seen: dict[str, float] = {}
        self.timers: dict[str, asyncio.Task[None]] = {}
        self.fenced: list[str] = []
        #: per node, the start of the not-Ready episode it was fenced for
        self.episodes: dict[str, float] = {}
        self._tasks: asyncio.TaskGroup | None = None

    async def run(self) -> None:
        self.nodes.on_change(self._on_node)
        try:
            async with asyncio.TaskGroup() as tasks:
                self._tasks = tasks
                tasks.create_task(self.nodes.run())
                tasks.create_task(self._worker())
        finally:
            self._tasks = None
            for timer in self.timers.values():
                timer.cancel()
            await self.client.close()

    def _on_node(self, kind: str, node: Obj, old: Obj | None) -> None:
        name = str(meta(node).get("name"))
        if kind == "DELETED":
            self.first_seen.pop(name, None)
            self._cancel_timer(name)
            return
        self.first_seen.setdefault(name, self.clock.now())
        self.queue.add(name)

    async def _worker(self) -> None:
        await self.nodes.synced.wait()
        while True:
            for name in await self.queue.take():
                await self._reconcile(name)

    # --- one node ----------------------------------------------------------------------------------------

    def not_ready_since(self, node: Mapping[str, Any]) -> float | None:
        """Lab time since which the node has not been Ready; None while it is Ready."""
        ready = find_condition(node, "Ready")
        if ready is not None and ready.get("status") == "True":
            return None
        name = str(meta(node).get("name"))
        changed = (ready or {}).get("lastTransitionTime")
        if isinstance(changed, str) and changed:
            try:
                return parse_timestamp(changed)
            except ValueError:
                pass
        return self.first_seen.get(name, self.clock.now())

    async def _reconcile(self, name: str) -> None:
        node = self.nodes.get(None, name)
        if node is None:
            return
        delay = fence_after(node)
        if delay is None:
            self._cancel_timer(name)
            return
        since = self.not_ready_since(node)
        if since is None:
            self._cancel_timer(name)
            self.episodes.pop(name, None)
            if has_fence_taint(node):
                await self._untaint(name)
            return
        due = since + delay
        if self.clock.now() < due:
            self._schedule(name, due)
            return
        self._cancel_timer(name)
        if self.episodes.get(name) != since:
            # One fence per not-Ready episode: a machine someone powers on again is not fenced again
            # before its node has been Ready once.
            if not is_powered_off(node) and not await self._power_off(name):
                return
            self.episodes[name] = since
            await self._taint(name)
        elif is_powered_off(node) and not has_fence_taint(node):
            await self._taint(name)  # the taint write of this episode failed (or was undone): the machine is off

    def _schedule(self, name: str, due: float) -> None:
        if name in self.timers or self._tasks is None:
            return

        async def wake() -> None:
            await self.clock.sleep_until(due)
            self.timers.pop(name, None)
            self.queue.add(name)

        self.timers[name] = self._tasks.create_task(wake())

    def _cancel_timer(self, name: str) -> None:
        timer = self.timers.pop(name, None)
        if timer is not None:
            timer.cancel()

    # --- the writes --------------------------------------------------------------------------------------

    async def _power_off(self, name: str) -> bool:
        """The fence: the machine off through its management interface (the lab's state annotation)."""
        patch = {"metadata": {"annotations": {STATE_ANNOTATION: MachineState.POWERED_OFF.value}}}
        try:
            await self.client.patch(NODE, None, name, patch)
        except TRANSIENT as error:
            logger.info("fencing agent: power-off of node %s failed (%s); retried on the next event", name, error)
            self.queue.add(name)
            return False
        self.fenced.append(name)
        logger.info("fencing agent: node %s powered off", name)
        return True

    async def _taint(self, name: str) -> None:
        """The out-of-service taint, after the machine is off (its `timeAdded` as the taint manager sets it)."""

        def add(taints: list[Obj]) -> list[Obj]:
            kept = [t for t in taints if (t.get("key"), t.get("effect")) != (FENCE_TAINT["key"], FENCE_TAINT["effect"])]
            return [*kept, {**FENCE_TAINT, "timeAdded": self.clock.timestamp()}]

        if await self._update_taints(name, add):
            logger.info("fencing agent: node %s tainted %s", name, TAINT_OUT_OF_SERVICE)

    async def _untaint(self, name: str) -> None:
        def remove(taints: list[Obj]) -> list[Obj]:
            return [t for t in taints if (t.get("key"), t.get("effect")) != (FENCE_TAINT["key"], FENCE_TAINT["effect"])]

        if await self._update_taints(name, remove):
            logger.info("fencing agent: node %s is Ready again; %s removed", name, TAINT_OUT_OF_SERVICE)

    async def _update_taints(self, name: str, change: Callable[[list[Obj]], list[Obj]]) -> bool:
        """Read-modify-write of `spec.taints` with the resourceVersion precondition (conflicts re-read)."""
        for _ in range(UPDATE_RETRIES):
            try:
                current = await self.client.get(NODE, None, name)
                body = copy.deepcopy(current)
                body.setdefault("spec", {})["taints"] = change(list(spec(current).get("taints") or []))
                await self.client.replace(NODE, None, name, body)
                return True
            except TRANSIENT as error:
                if is_not_found(error):
                    return False
                if not is_conflict(error):
                    logger.info(
                        "fencing agent: taints of node %s not written (%s); retried on the next event", name, error
                    )
                    self.queue.add(name)
                    return False
        self.queue.add(name)
        return False


__all__ = ["FENCE_AFTER_SECONDS", "FENCE_TAINT", "FencingAgent", "fence_after"]

"""The node lifecycle controller: Ready=Unknown for silent nodes, and the lifecycle taints.

From `kubernetes/kubernetes:pkg/controller/nodelifecycle/node_lifecycle_controller.go` (read at `003e86297d18`):

- every `nodeMonitorPeriod` (5 s) `monitorNodeHealth` looks at every node. `tryUpdateNodeHealth` keeps, per
  node, the local time it last saw a sign of life (`probeTimestamp`): a new Ready `lastHeartbeatTime`, or a
  newer `renewTime` on the node's Lease in `kube-node-lease`. When now is past that plus the grace period
  (`nodeMonitorGracePeriod`, 50 s; `nodeStartupGracePeriod`, 60 s, for a node that never posted Ready), the
  Ready, MemoryPressure, DiskPressure and PIDPressure conditions become `Unknown` with reason
  `NodeStatusUnknown` and message `Kubelet stopped posting node status.` (`NodeStatusNeverUpdated` /
  `Kubelet never posted node status.` for a condition never posted), written with `UpdateStatus`;
- `processTaintBaseEviction` acts on the Ready status observed BEFORE this pass's update (so the taint comes
  one pass after Unknown is written): False adds `node.kubernetes.io/not-ready:NoExecute`, Unknown
  `node.kubernetes.io/unreachable:NoExecute` (swapping one for the other at once if the other is there), True
  removes both (`markNodeAsReachable`). Adding goes through a per-zone rate-limited queue
  (`doNoExecuteTaintingPass`, `--node-eviction-rate` 0.1/s, burst 1: one node per 10 s per zone) that re-checks
  the node is still not Ready;
- zones (`topology.kubernetes.io/region` and `zone` labels): a zone with no Ready node is in full disruption, one
  with more than 2 and at least 55 % not Ready in partial disruption, where a zone of at most 50 nodes stops
  tainting (`ReducedQPSFunc`). When every zone is fully disrupted the controller assumes the problem is its own:
  it removes the lifecycle taints from every node and stops tainting (`handleDisruption`). So a one-node lab
  whose node freezes gets Ready=Unknown but no NoExecute taint and no eviction: a real behaviour, kept;
- on the Ready=True -> not True transition, the pods of the node get `Ready=False` (`MarkPodsNotReady`);
- `doNoScheduleTaintingPass`, on node events: Ready False / Unknown give `not-ready` / `unreachable` with effect
  `NoSchedule`, `spec.unschedulable` gives `node.kubernetes.io/unschedulable:NoSchedule`; the ones no longer
  wanted are removed. Taints the controller adds carry `timeAdded` (`SwapNodeControllerTaint`).

Eviction itself (deleting pods that do not tolerate a NoExecute taint) is the taint eviction controller's
(`taint_eviction.py`), as with the `SeparateTaintEvictionController` feature on. The nodes' own conditions other
than Ready are not simulated, so no pressure taints are ever added.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from airflow_provider_dispatch_lab.client import Informer, is_conflict
from airflow_provider_dispatch_lab.clock import parse_timestamp
from airflow_provider_dispatch_lab.kinds import LEASE, NODE, POD
from airflow_provider_dispatch_lab.simulated.cluster import ClusterContext
from airflow_provider_dispatch_lab.simulated.nodes.kubelet_heartbeat import NODE_LEASE_NAMESPACE
from airflow_provider_dispatch_lab.simulated.nodes.taints import (
    NO_EXECUTE,
    NO_SCHEDULE,
    TAINT_NOT_READY,
    TAINT_UNREACHABLE,
    TAINT_UNSCHEDULABLE,
)
from airflow_provider_dispatch_lab.simulated.support import (
    TRANSIENT,
    WorkQueue,
    find_condition,
    meta,
    pod_key,
    spec,
    tolerant,
)

Obj = dict[str, Any]

NODE_MONITOR_PERIOD = 5.0
NODE_MONITOR_GRACE_PERIOD = 50.0
NODE_STARTUP_GRACE_PERIOD = 60.0
EVICTION_LIMITER_QPS = 0.1
SECONDARY_EVICTION_LIMITER_QPS = 0.01
LARGE_CLUSTER_THRESHOLD = 50
UNHEALTHY_ZONE_THRESHOLD = 0.55
MAX_UPDATE_RETRIES = 5
_CONDITIONS_MADE_UNKNOWN = ("Ready", "MemoryPressure", "DiskPressure", "PIDPressure")
_STATUS_TO_TAINT = {"False": TAINT_NOT_READY, "Unknown": TAINT_UNREACHABLE}


def zone_of(node: Mapping[str, Any]) -> str:
    """`nodetopology.GetZoneKey`: region and zone labels joined, "" when neither is set."""
    labels = meta(node).get("labels") or {}
    region = labels.get("topology.kubernetes.io/region") or labels.get("failure-domain.beta.kubernetes.io/region")
    zone = labels.get("topology.kubernetes.io/zone") or labels.get("failure-domain.beta.kubernetes.io/zone")
    if not region and not zone:
        return ""
    return f"{region or ''}:\x00:{zone or ''}"


def zone_state(ready_statuses: Iterable[str | None]) -> str:
    """`ComputeZoneState`."""
    statuses = list(ready_statuses)
    ready = sum(1 for s in statuses if s == "True")
    not_ready = len(statuses) - ready
    if ready == 0 and not_ready > 0:
        return "FullDisruption"
    if not_ready > 2 and not_ready / len(statuses) >= UNHEALTHY_ZONE_THRESHOLD:
        return "PartialDisruption"
    return "Normal"


def _has_taint(node: Mapping[str, Any], key: str, effect: str) -> bool:
    return any(t.get("key") == key and t.get("effect") == effect for t in spec(node).get("taints") or ())


@dataclass
class _Health:
    probe: float
    heartbeat: str | None
    transition: str | None
    lease_renew: float | None = None


class NodeLifecycleController:
    name = "node-lifecycle-controller"

    def __init__(self, context: ClusterContext) -> None:
        self.clock = context.clock
        self.client = context.client("node-controller")
        self.nodes = Informer(self.client, NODE)
        self.leases = Informer(self.client, LEASE, NODE_LEASE_NAMESPACE)
        self.pods = Informer(self.client, POD)
        self.health: dict[str, _Health] = {}
        self.known: set[str] = set()
        self.zone_states: dict[str, str] = {}
        self.zone_qps: dict[str, float] = {}
        self.to_taint: dict[str, dict[str, None]] = {}
        self.next_taint_at: dict[str, float] = {}
        self.no_schedule_queue: WorkQueue[str] = WorkQueue()
        self.passes = 0
        self.passed = asyncio.Condition()
        self._leases_seen = asyncio.Condition()

    async def run(self) -> None:
        self.nodes.on_change(lambda kind, node, old: self.no_schedule_queue.add(str(meta(node).get("name"))))
        self.leases.on_change(self._lease_changed)
        try:
            async with asyncio.TaskGroup() as tasks:
                for informer in (self.nodes, self.leases, self.pods):
                    tasks.create_task(informer.run())
                tasks.create_task(self._monitor_loop())
                tasks.create_task(self._no_schedule_loop())
        finally:
            await self.client.close()

    async def _lease_changed(self, kind: str, lease: Obj, old: Obj | None) -> None:
        async with self._leases_seen:
            self._leases_seen.notify_all()

    async def wait_lease_seen(self, node_name: str, renewed_at: float) -> None:
        """Until this controller's lease cache holds a renewal of `node_name` at `renewed_at` or later (the
        scenario's `advance` waits for it so that a jump of the clock is not mistaken for a silent node)."""
        async with self._leases_seen:
            await self._leases_seen.wait_for(lambda: (self._lease_renew(node_name) or 0.0) >= renewed_at - 1e-3)

    async def _monitor_loop(self) -> None:
        for informer in (self.nodes, self.leases, self.pods):
            await informer.synced.wait()
        while True:
            await self.monitor()
            await self.clock.sleep(NODE_MONITOR_PERIOD)

    # ------------------------------------------------------------------------------------ monitor pass

    async def monitor(self) -> None:
        """One `monitorNodeHealth` pass."""
        nodes = list(self.nodes.items())
        names = {str(meta(n).get("name")) for n in nodes}
        for node in nodes:
            name = str(meta(node).get("name"))
            self.zone_qps.setdefault(zone_of(node), EVICTION_LIMITER_QPS)
            if name not in self.known:
                self.known.add(name)
                await self._mark_reachable(name)
        self.known &= names
        for gone in set(self.health) - names:
            del self.health[gone]
        zone_conditions: dict[str, list[str | None]] = {}
        for node in nodes:
            observed, current = await self._update_health(node)
            zone_conditions.setdefault(zone_of(node), []).append(current)
            if current is None:
                continue
            await self._taint_based_eviction(node, observed)
            if current != "True" and observed == "True":
                await self._mark_pods_not_ready(str(meta(node).get("name")))
        await self._handle_disruption(zone_conditions, nodes)
        await self._tainting_pass()
        async with self.passed:
            self.passes += 1
            self.passed.notify_all()

    def _lease_renew(self, name: str) -> float | None:
        lease = self.leases.get(NODE_LEASE_NAMESPACE, name)
        renew = spec(lease).get("renewTime") if lease else None
        return parse_timestamp(str(renew)) if renew else None

    async def _update_health(self, node: Obj) -> tuple[str | None, str | None]:
        """`tryUpdateNodeHealth`: (Ready status observed, Ready status after this pass), None when absent."""
        name = str(meta(node).get("name"))
        now = self.clock.now()
        ready = find_condition(node, "Ready")
        created = parse_timestamp(str(meta(node).get("creationTimestamp") or self.clock.timestamp()))
        grace = NODE_STARTUP_GRACE_PERIOD if ready is None else NODE_MONITOR_GRACE_PERIOD
        observed = "Unknown" if ready is None else str(ready.get("status"))
        heartbeat = None if ready is None else ready.get("lastHeartbeatTime")
        transition = None if ready is None else ready.get("lastTransitionTime")
        health = self.health.get(name)
        if health is None:
            health = _Health(created if ready is None else now, heartbeat, transition)
        elif heartbeat != health.heartbeat:
            health = _Health(now, heartbeat, transition, health.lease_renew)
        renew = self._lease_renew(name)
        if renew is not None and (health.lease_renew is None or renew > health.lease_renew):
            health.lease_renew, health.probe = renew, now
        self.health[name] = health
        if now <= health.probe + grace:
            return (None if ready is None else observed), (None if ready is None else observed)
        for _ in range(MAX_UPDATE_RETRIES):
            updated = await self._write_unknown(node)
            if updated is not False:
                return observed, "Unknown"
            fresh = await tolerant(f"node-controller: get node {name}", lambda: self.client.get(NODE, None, name))
            if fresh is None:
                return observed, None
            node = fresh
        return observed, observed

    async def _write_unknown(self, node: Obj) -> bool | None:
        """Ready and the pressure conditions to Unknown; False on a conflict, None when nothing changed."""
        body = {**node, "status": {**(node.get("status") or {})}}
        conditions = [dict(c) for c in body["status"].get("conditions") or ()]
        now = self.clock.timestamp()
        changed = False
        for kind in _CONDITIONS_MADE_UNKNOWN:
            entry = next((c for c in conditions if c.get("type") == kind), None)
            if entry is None:
                conditions.append(
                    {
                        "type": kind,
                        "status": "Unknown",
                        "reason": "NodeStatusNeverUpdated",
                        "message": "Kubelet never posted node status.",
                        "lastHeartbeatTime": meta(node).get("creationTimestamp"),
                        "lastTransitionTime": now,
                    }
                )
                changed = True
            elif entry.get("status") != "Unknown":
                entry.update(
                    status="Unknown",
                    reason="NodeStatusUnknown",
                    message="Kubelet stopped posting node status.",
                    lastTransitionTime=now,
                )
                changed = True
        if not changed:
            return None
        body["status"]["conditions"] = conditions
        name = str(meta(node).get("name"))
        try:
            await self.client.replace(NODE, None, name, body, subresource="status")
        except TRANSIENT as error:
            return False if is_conflict(error) else None
        return True

    # ------------------------------------------------------------------------------------ taints

    async def _swap_taints(self, name: str, add: list[tuple[str, str]], remove: list[tuple[str, str]]) -> bool:
        """`SwapNodeControllerTaint`: one conditional update of `spec.taints`, retried on conflicts."""
        for _ in range(MAX_UPDATE_RETRIES):
            node = await tolerant(f"node-controller: get node {name}", lambda: self.client.get(NODE, None, name))
            if node is None:
                return False
            taints = [t for t in spec(node).get("taints") or () if (t.get("key"), t.get("effect")) not in remove]
            present = {(t.get("key"), t.get("effect")) for t in taints}
            added = [
                {"key": key, "effect": effect, "timeAdded": self.clock.timestamp()}
                for key, effect in add
                if (key, effect) not in present
            ]
            if not added and len(taints) == len(spec(node).get("taints") or ()):
                return True
            body = {**node, "spec": {**spec(node), "taints": taints + added}}
            try:
                await self.client.replace(NODE, None, name, body)
            except TRANSIENT as error:
                if is_conflict(error):
                    continue
                return False
            return True
        return False

    async def _mark_reachable(self, name: str) -> None:
        """`markNodeAsReachable`; `RemoveTaintOffNode` looks at the cached node first and writes only when a
        lifecycle NoExecute taint is there."""
        for queue in self.to_taint.values():
            queue.pop(name, None)
        cached = self.nodes.get(None, name)
        lifecycle = [(TAINT_UNREACHABLE, NO_EXECUTE), (TAINT_NOT_READY, NO_EXECUTE)]
        if cached is not None and not any(_has_taint(cached, key, effect) for key, effect in lifecycle):
            return
        await self._swap_taints(name, [], lifecycle)

    async def _taint_based_eviction(self, node: Obj, observed: str | None) -> None:
        name = str(meta(node).get("name"))
        if observed in _STATUS_TO_TAINT:
            wanted = _STATUS_TO_TAINT[observed]
            other = TAINT_UNREACHABLE if wanted == TAINT_NOT_READY else TAINT_NOT_READY
            if _has_taint(node, other, NO_EXECUTE):
                await self._swap_taints(name, [(wanted, NO_EXECUTE)], [(other, NO_EXECUTE)])
            elif not _has_taint(node, wanted, NO_EXECUTE):
                self.to_taint.setdefault(zone_of(node), {})[name] = None
        elif observed == "True":
            await self._mark_reachable(name)

    async def _tainting_pass(self) -> None:
        """`doNoExecuteTaintingPass`, with the zone's rate limit."""
        now = self.clock.now()
        for zone, queue in self.to_taint.items():
            qps = self.zone_qps.get(zone, EVICTION_LIMITER_QPS)
            while queue and qps > 0 and self.next_taint_at.get(zone, 0.0) <= now:
                name = next(iter(queue))
                del queue[name]
                node = self.nodes.get(None, name)
                ready = find_condition(node, "Ready") if node else None
                wanted = _STATUS_TO_TAINT.get(str(ready.get("status"))) if ready else None
                if wanted is None:
                    continue  # gone, or Ready again: "it's ready now. Ignoring taint request"
                other = TAINT_UNREACHABLE if wanted == TAINT_NOT_READY else TAINT_NOT_READY
                if await self._swap_taints(name, [(wanted, NO_EXECUTE)], [(other, NO_EXECUTE)]):
                    self.next_taint_at[zone] = now + 1 / qps
                else:
                    queue[name] = None
                    break

    async def _handle_disruption(self, zone_conditions: dict[str, list[str | None]], nodes: list[Obj]) -> None:
        new_states = {zone: zone_state(statuses) for zone, statuses in zone_conditions.items()}
        all_are = all(state == "FullDisruption" for state in new_states.values())
        for zone in set(self.zone_states) - set(new_states):
            del self.zone_states[zone]
        for zone in new_states:
            self.zone_states.setdefault(zone, "Initial")
        all_were = all(state == "FullDisruption" for state in self.zone_states.values())
        if all_are and all_were:
            return
        if all_are:
            for node in nodes:
                await self._mark_reachable(str(meta(node).get("name")))
            for zone in self.zone_states:
                self.zone_qps[zone] = 0.0
                self.zone_states[zone] = "FullDisruption"
            return
        if all_were:
            now = self.clock.now()
            for health in self.health.values():
                health.probe = now
        for zone, state in new_states.items():
            if all_were or self.zone_states.get(zone) != state:
                self.zone_qps[zone] = self._zone_limit(state, len(zone_conditions[zone]))
                self.zone_states[zone] = state

    @staticmethod
    def _zone_limit(state: str, size: int) -> float:
        if state == "PartialDisruption":
            return SECONDARY_EVICTION_LIMITER_QPS if size > LARGE_CLUSTER_THRESHOLD else 0.0
        return EVICTION_LIMITER_QPS

    async def _mark_pods_not_ready(self, node_name: str) -> None:
        """`MarkPodsNotReady`: the Ready condition of the node's pods to False."""
        now = self.clock.timestamp()
        for pod in self.pods.items():
            ready = find_condition(pod, "Ready")
            if spec(pod).get("nodeName") != node_name or ready is None or ready.get("status") != "True":
                continue
            namespace, name = pod_key(pod)
            patch = {"status": {"conditions": [{"type": "Ready", "status": "False", "lastTransitionTime": now}]}}
            await tolerant(
                f"node-controller: mark {namespace}/{name} not ready",
                functools.partial(
                    self.client.patch, POD, namespace, name, patch, patch_type="strategic", subresource="status"
                ),
            )

    # ------------------------------------------------------------------------------------ NoSchedule

    async def _no_schedule_loop(self) -> None:
        await self.nodes.synced.wait()
        while True:
            for name in await self.no_schedule_queue.take():
                await self._no_schedule_pass(name)

    async def _no_schedule_pass(self, name: str) -> None:
        """`doNoScheduleTaintingPass`."""
        node = self.nodes.get(None, name)
        if node is None:
            return
        ready = find_condition(node, "Ready")
        wanted: set[tuple[str, str]] = set()
        if ready is not None and str(ready.get("status")) in _STATUS_TO_TAINT:
            wanted.add((_STATUS_TO_TAINT[str(ready.get("status"))], NO_SCHEDULE))
        if spec(node).get("unschedulable"):
            wanted.add((TAINT_UNSCHEDULABLE, NO_SCHEDULE))
        managed = {(k, NO_SCHEDULE) for k in (TAINT_NOT_READY, TAINT_UNREACHABLE, TAINT_UNSCHEDULABLE)}
        present = {(t.get("key"), t.get("effect")) for t in spec(node).get("taints") or ()} & managed
        if wanted != present:
            await self._swap_taints(name, sorted(wanted - present), sorted(present - wanted))

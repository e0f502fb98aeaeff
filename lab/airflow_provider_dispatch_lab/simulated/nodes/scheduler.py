"""The default scheduler: binds pending pods to nodes that can take them, through `pods/binding`.

A pod is scheduled when it has no `spec.nodeName`, `schedulerName` `default-scheduler`, no `schedulingGates`
(`pkg/scheduler/framework/plugins/schedulinggates`), no deletionTimestamp and a non-terminal phase. A node is
feasible when it passes, in the default profile's order, stopping at the first failure
(`pkg/scheduler/framework/runtime/framework.go` `RunFilterPlugins`):

- NodeUnschedulable (`plugins/nodeunschedulable`): not `spec.unschedulable`, unless the pod tolerates
  `node.kubernetes.io/unschedulable:NoSchedule`; "node(s) were unschedulable";
- TaintToleration (`plugins/tainttoleration`): every `NoSchedule` and `NoExecute` taint tolerated;
  "node(s) had untolerated taint {key: value}";
- NodeAffinity (`plugins/nodeaffinity`), `nodeSelector` only (required node affinity terms are not simulated);
  "node(s) didn't match Pod's node affinity/selector";
- NodeResourcesFit (`plugins/noderesources/fit.go`): the pod's requests (`quantities.pod_requests`) fit in the
  node's allocatable minus the requests of the non-terminal pods bound to it (and the ones this scheduler has
  just bound: its assume cache, `pkg/scheduler/internal/cache`), and one more pod fits under `pods`;
  "Insufficient <resource>", "Too many pods".

The Ready condition itself is not a filter upstream (`CheckNodeCondition` went in 1.17): a node that is not
ready carries the node lifecycle controller's `not-ready` / `unreachable` `NoSchedule` taints
(`node_lifecycle.py`), and the TaintToleration filter keeps pods off it. Between the node going silent and the
taint (up to the 50 s grace period) a real scheduler can still bind to it, and so can this one.

Among feasible nodes the one with the highest `LeastAllocated` score wins (the default scoring strategy of
NodeResourcesFit; the other default score plugins, such as the system default topology spread, are not
simulated); upstream breaks ties at random (`selectHost`), here by node name, for reproducible runs. A pod that fits
nowhere stays Pending with `PodScheduled=False`, reason `Unschedulable` and a message
`0/N nodes are available: ...` (`schedule_one.go` `handleSchedulingFailure`, `framework/types.go`
`FitError.Error`; the preemption postscript is left out), and is retried when a node or a bound pod changes
(the scheduling queue's cluster events).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from airflow_provider_dispatch_lab.client import ApiStatusError, Informer
from airflow_provider_dispatch_lab.kinds import NODE, POD
from airflow_provider_dispatch_lab.simulated.cluster import ClusterContext
from airflow_provider_dispatch_lab.simulated.nodes.taints import (
    NO_EXECUTE,
    NO_SCHEDULE,
    TAINT_UNSCHEDULABLE,
    untolerated,
)
from airflow_provider_dispatch_lab.simulated.quantities import parse_quantity, pod_requests
from airflow_provider_dispatch_lab.simulated.support import (
    TRANSIENT,
    WorkQueue,
    find_condition,
    is_terminal,
    meta,
    pod_key,
    spec,
    status,
    tolerant,
)

Obj = dict[str, Any]
SCHEDULER_NAME = "default-scheduler"


def wants_scheduling(pod: Mapping[str, Any] | None) -> bool:
    if pod is None or is_terminal(pod) or meta(pod).get("deletionTimestamp"):
        return False
    pod_spec = spec(pod)
    return (
        not pod_spec.get("nodeName")
        and (pod_spec.get("schedulerName") or SCHEDULER_NAME) == SCHEDULER_NAME
        and not pod_spec.get("schedulingGates")
    )


def _allocatable(node: Mapping[str, Any]) -> dict[str, Decimal]:
    node_status = status(node)
    values = node_status.get("allocatable") or node_status.get("capacity") or {}
    return {str(k): parse_quantity(v) for k, v in values.items()}


def filter_node(pod: Mapping[str, Any], node: Mapping[str, Any], bound: Sequence[Mapping[str, Any]]) -> str | None:
    """None when the pod fits on the node, else the failure reason."""
    tolerations = spec(pod).get("tolerations") or []
    unschedulable_taint = [{"key": TAINT_UNSCHEDULABLE, "effect": NO_SCHEDULE}]
    if spec(node).get("unschedulable") and untolerated(unschedulable_taint, tolerations, [NO_SCHEDULE]):
        return "node(s) were unschedulable"
    taint = untolerated(spec(node).get("taints"), tolerations, [NO_SCHEDULE, NO_EXECUTE])
    if taint is not None:
        return f"node(s) had untolerated taint {{{taint.get('key')}: {taint.get('value') or ''}}}"
    labels = meta(node).get("labels") or {}
    selector = spec(pod).get("nodeSelector") or {}
    if any(labels.get(k) != v for k, v in selector.items()):
        return "node(s) didn't match Pod's node affinity/selector"
    free = _allocatable(node)
    for other in bound:
        for name, amount in pod_requests(other).items():
            free[name] = free.get(name, Decimal(0)) - amount
    if "pods" in free and free["pods"] - len(bound) < 1:
        return "Too many pods"
    for name, amount in sorted(pod_requests(pod).items()):
        if amount > 0 and amount > free.get(name, Decimal(0)):
            return f"Insufficient {name}"
    return None


DEFAULT_MILLI_CPU_REQUEST = Decimal("0.1")
DEFAULT_MEMORY_REQUEST = Decimal(200 * 2**20)


def _nonzero_requests(pod: Mapping[str, Any]) -> tuple[Decimal, Decimal]:
    """Scoring counts a container that requests no cpu or memory as 100m and 200Mi
    (`pkg/scheduler/util/pod_resources.go` `GetNonzeroRequests`), so empty pods still spread."""
    cpu = memory = Decimal(0)
    for container in spec(pod).get("containers") or ():
        requests = pod_requests({"spec": {"containers": [container]}})
        cpu += requests.get("cpu") or DEFAULT_MILLI_CPU_REQUEST
        memory += requests.get("memory") or DEFAULT_MEMORY_REQUEST
    return cpu, memory


def least_allocated_score(
    pod: Mapping[str, Any], node: Mapping[str, Any], bound: Sequence[Mapping[str, Any]]
) -> Decimal:
    """`LeastAllocated` (`noderesources/least_allocated.go`): the mean over cpu and memory of the share left free
    once the pod is placed, requests counted with the non-zero defaults."""
    allocatable = _allocatable(node)
    used = [_nonzero_requests(p) for p in [*bound, pod]]
    shares = []
    for index, name in enumerate(("cpu", "memory")):
        total = allocatable.get(name, Decimal(0))
        requested = sum((u[index] for u in used), Decimal(0))
        shares.append(max(total - requested, Decimal(0)) / total if total > 0 else Decimal(0))
    return sum(shares, Decimal(0)) / len(shares)


class Scheduler:
    name = SCHEDULER_NAME

    def __init__(self, context: ClusterContext) -> None:
        self.clock = context.clock
        self.client = context.client(SCHEDULER_NAME)
        self.pods = Informer(self.client, POD)
        self.nodes = Informer(self.client, NODE)
        self.queue: WorkQueue[tuple[str, str]] = WorkQueue()
        self.unschedulable: set[tuple[str, str]] = set()
        self.assumed: dict[str, tuple[str, Obj]] = {}

    async def run(self) -> None:
        self.pods.on_change(self._on_pod)
        self.nodes.on_change(self._on_node)
        try:
            async with asyncio.TaskGroup() as tasks:
                tasks.create_task(self.pods.run())
                tasks.create_task(self.nodes.run())
                tasks.create_task(self._loop())
        finally:
            await self.client.close()

    def _retry_unschedulable(self) -> None:
        for key in sorted(self.unschedulable):
            self.queue.add(key)

    def _on_node(self, kind: str, node: Obj, old: Obj | None) -> None:
        self._retry_unschedulable()

    def _on_pod(self, kind: str, pod: Obj, old: Obj | None) -> None:
        key, uid = pod_key(pod), str(meta(pod).get("uid") or "")
        if kind == "DELETED":
            self.assumed.pop(uid, None)
            self.unschedulable.discard(key)
            self._retry_unschedulable()
        elif spec(pod).get("nodeName"):
            self.assumed.pop(uid, None)  # the cache shows the binding now
            if is_terminal(pod):
                self._retry_unschedulable()  # its requests no longer count
        elif wants_scheduling(pod):
            self.queue.add(key)
        else:
            self.unschedulable.discard(key)

    async def _loop(self) -> None:
        await self.pods.synced.wait()
        await self.nodes.synced.wait()
        while True:
            for key in await self.queue.take():
                await self._schedule(key)

    def _bound_to(self, node_name: str) -> list[Obj]:
        bound = [p for p in self.pods.items() if spec(p).get("nodeName") == node_name and not is_terminal(p)]
        seen = {meta(p).get("uid") for p in bound}
        bound.extend(pod for uid, (name, pod) in self.assumed.items() if name == node_name and uid not in seen)
        return bound

    async def _schedule(self, key: tuple[str, str]) -> None:
        pod = self.pods.get(*key)
        if not wants_scheduling(pod) or pod is None or meta(pod).get("uid") in self.assumed:
            self.unschedulable.discard(key)
            return
        nodes = sorted(self.nodes.items(), key=lambda n: str(meta(n).get("name")))
        reasons: Counter[str] = Counter()
        best: tuple[Decimal, str] | None = None
        for node in nodes:
            name = str(meta(node).get("name"))
            try:
                bound = self._bound_to(name)
                reason = filter_node(pod, node, bound)
                score = least_allocated_score(pod, node, bound) if reason is None else Decimal(0)
            except ValueError as error:  # a quantity the scheduler cannot read: not a fit
                reason, score = f"node(s) had unreadable resources ({error})", Decimal(0)
            if reason is not None:
                reasons[reason] += 1
                continue
            if best is None or score > best[0]:
                best = (score, name)
        if best is None:
            self.unschedulable.add(key)
            await self._mark_unschedulable(pod, len(nodes), reasons)
            return
        await self._bind(pod, best[1])

    async def _bind(self, pod: Obj, node_name: str) -> None:
        namespace, name = pod_key(pod)
        binding = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name, "namespace": namespace, "uid": meta(pod).get("uid")},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node_name},
        }
        try:
            await self.client.post_subresource(POD, namespace, name, "binding", binding)
        except TRANSIENT as error:
            if not (isinstance(error, ApiStatusError) and error.code in (404, 409)):
                self.queue.add((namespace, name))  # gone, being deleted or bound already need nothing; else retry
            return
        self.unschedulable.discard((namespace, name))
        self.assumed[str(meta(pod).get("uid"))] = (node_name, pod)

    async def _mark_unschedulable(self, pod: Obj, node_count: int, reasons: Counter[str]) -> None:
        detail = ", ".join(f"{count} {reason}" for reason, count in sorted(reasons.items()))
        message = f"0/{node_count} nodes are available: {detail}." if detail else f"0/{node_count} nodes are available."
        old = find_condition(pod, "PodScheduled")
        if old is not None and (old.get("status"), old.get("reason"), old.get("message")) == (
            "False",
            "Unschedulable",
            message,
        ):
            return
        transition = old.get("lastTransitionTime") if old is not None and old.get("status") == "False" else None
        condition = {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": message,
            "lastProbeTime": None,
            "lastTransitionTime": transition or self.clock.timestamp(),
        }
        namespace, name = pod_key(pod)
        await tolerant(
            f"scheduler: mark {namespace}/{name} unschedulable",
            lambda: self.client.patch(
                POD,
                namespace,
                name,
                {"status": {"conditions": [condition]}},
                patch_type="strategic",
                subresource="status",
            ),
        )

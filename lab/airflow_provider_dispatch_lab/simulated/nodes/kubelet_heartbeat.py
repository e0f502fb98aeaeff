"""A kubelet's two health signals: its node Lease and its node status.

- The Lease `kube-node-lease/<node>` (`component-helpers/apimachinery/lease/controller.go`, started from
  `pkg/kubelet/kubelet.go`): holder the node name, `leaseDurationSeconds` 40 (`NodeLeaseDurationSeconds`
  default), an ownerReference to the Node (`pkg/kubelet/util/nodelease.go` `SetNodeOwnerFunc`; without the Node
  the lease is not created), `renewTime` renewed every `0.25 * 40 = 10` s (`nodeLeaseRenewIntervalFraction`) by
  an Update of the last lease it wrote, falling back to a GET (or a create) on a conflict.
- The node status (`pkg/kubelet/kubelet_node_status.go` `updateNodeStatus` / `tryUpdateNodeStatus`): computed
  every `nodeStatusUpdateFrequency` (10 s) but patched only when it changed or `nodeStatusReportFrequency`
  (5 min) has passed since the last report (`pkg/kubelet/apis/config/v1beta1/defaults.go`), each report
  stamping `lastHeartbeatTime`. So while a node is healthy the lease is the heartbeat the node lifecycle
  controller sees every 10 s, and the Ready condition's `lastHeartbeatTime` moves every 5 minutes.
"""

from __future__ import annotations

import copy
from typing import Any

from airflow_provider_dispatch_lab.client import ApiStatusError, Informer, LabClient, is_not_found
from airflow_provider_dispatch_lab.clock import LabClock, parse_timestamp
from airflow_provider_dispatch_lab.kinds import LEASE, NODE
from airflow_provider_dispatch_lab.simulated.nodes.kubelet_status import node_conditions, node_conditions_changed
from airflow_provider_dispatch_lab.simulated.support import meta, tolerant

Obj = dict[str, Any]

NODE_LEASE_NAMESPACE = "kube-node-lease"
LEASE_DURATION_SECONDS = 40
RENEW_INTERVAL = 0.25 * LEASE_DURATION_SECONDS
NODE_STATUS_UPDATE_FREQUENCY = 10.0
NODE_STATUS_REPORT_FREQUENCY = 300.0
MAX_UPDATE_RETRIES = 5


class Heartbeat:
    """The lease and node-status writers of one kubelet."""

    def __init__(self, node_name: str, client: LabClient, clock: LabClock, nodes: Informer) -> None:
        self.node_name = node_name
        self.client = client
        self.clock = clock
        self.nodes = nodes
        self.lease: Obj | None = None
        self.renewed_at: float | None = None
        """The `renewTime` of the last renewal that reached the API (lab seconds)."""
        self.reported_at: float | None = None

    async def beat(self, ready: bool) -> None:
        await tolerant(f"kubelet {self.node_name}: renew lease", self._renew)
        await tolerant(f"kubelet {self.node_name}: node status", lambda: self._report(ready))

    def forget(self) -> None:
        """After a reboot the kubelet starts from nothing: it re-reads its lease and reports status at once."""
        self.lease, self.reported_at = None, None

    async def _renew(self) -> None:
        for _ in range(MAX_UPDATE_RETRIES):
            now = self.clock.micro_timestamp()
            if self.lease is None:
                self.lease, created = await self._ensure(now)
                if self.lease is None:
                    return
                if created:
                    self.renewed_at = parse_timestamp(now)
                    return
            body = copy.deepcopy(self.lease)
            body.setdefault("spec", {})["renewTime"] = now
            try:
                self.lease = await self.client.replace(LEASE, NODE_LEASE_NAMESPACE, self.node_name, body)
            except ApiStatusError as error:
                self.lease = None
                if error.code in (404, 409):
                    continue  # someone else wrote it, or it went: read (or create) it again
                raise
            self.renewed_at = parse_timestamp(now)
            return

    async def _ensure(self, now: str) -> tuple[Obj | None, bool]:
        try:
            return await self.client.get(LEASE, NODE_LEASE_NAMESPACE, self.node_name), False
        except ApiStatusError as error:
            if not is_not_found(error):
                raise
        node = self.nodes.get(None, self.node_name)
        if node is None:
            return None, False
        lease = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {
                "name": self.node_name,
                "namespace": NODE_LEASE_NAMESPACE,
                "ownerReferences": [
                    {"apiVersion": "v1", "kind": "Node", "name": self.node_name, "uid": meta(node).get("uid")}
                ],
            },
            "spec": {
                "holderIdentity": self.node_name,
                "leaseDurationSeconds": LEASE_DURATION_SECONDS,
                "renewTime": now,
            },
        }
        return await self.client.create(LEASE, NODE_LEASE_NAMESPACE, lease), True

    async def _report(self, ready: bool) -> None:
        try:
            node = await self.client.get(NODE, None, self.node_name)
        except ApiStatusError as error:
            if is_not_found(error):
                return  # deleted under a live machine: the kubelet cannot post status until it registers again
            raise
        now = self.clock.now()
        due = self.reported_at is None or now - self.reported_at >= NODE_STATUS_REPORT_FREQUENCY
        if not due and not node_conditions_changed(node, ready):
            return
        patch = {"status": {"conditions": node_conditions(node, ready, self.clock.timestamp())}}
        await self.client.patch(NODE, None, self.node_name, patch, patch_type="strategic", subresource="status")
        self.reported_at = now

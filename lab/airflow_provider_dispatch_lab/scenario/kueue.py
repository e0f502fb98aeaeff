"""Scenario controls for Kueue in the lab: what a test or a drill does around the queues.

Everything goes through the lab's API, as a person with kubectl (or the controllers Kueue does not include)
would do it:

* `create_queues`: a ClusterQueue (quota for cpu, memory and optionally `nvidia.com/gpu`, its
  `admissionChecksStrategy`, optionally `preemption.withinClusterQueue`), a LocalQueue in a namespace, and
  the AdmissionCheck objects, from `lab.scenario.manifests`;
* `set_check_active`: play an admission check's own controller, which keeps its AdmissionCheck `Active=True`
  (Kueue only reads it; a missing or inactive check makes the ClusterQueue inactive);
* `set_check_state`: play an external admission check controller writing its entry of a Workload
  (server-side apply on `workloads/status` with its own field manager, as k8s-apis.md §4.4 describes);
* `preempt`: do what Kueue's preemptor does to a quota-reserved or admitted Workload
  (`preemption.evict_for_preemption`), for a preemption no pending Workload triggers;
* `check_states`, `workload_for`: read a Workload's check states, find the Workload of a TrainJob.

`KueueScenario` runs on the lab's loop; `SyncKueueScenario(lab)` offers the same to a thread holding a `Lab`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from airflow_provider_dispatch_lab.client import LabClient
from airflow_provider_dispatch_lab.clock import LabClock
from airflow_provider_dispatch_lab.kinds import ADMISSION_CHECK, CLUSTER_QUEUE, LOCAL_QUEUE, TRAINJOB, WORKLOAD
from airflow_provider_dispatch_lab.runtime import DEFAULT_TOKEN, AsyncLab, Lab
from airflow_provider_dispatch_lab.scenario import manifests
from airflow_provider_dispatch_lab.simulated.kueue import constants as k
from airflow_provider_dispatch_lab.simulated.kueue import workload_status as ws
from airflow_provider_dispatch_lab.simulated.kueue.names import is_controlled_by
from airflow_provider_dispatch_lab.simulated.kueue.preemption import evict_for_preemption, preemption_message

Obj = dict[str, Any]
T = TypeVar("T")
ACC_FIELD_MANAGER = "lab-admission-check-controller"


class ScenarioError(ValueError):
    """A control was asked for something that does not exist or cannot be done; nothing was written."""


@dataclass(frozen=True)
class QueueSetup:
    cluster_queue: str
    local_queue: str
    namespace: str
    admission_checks: tuple[str, ...]


class KueueScenario:
    def __init__(self, client: LabClient, clock: LabClock) -> None:
        self.client = client
        self.clock = clock

    @classmethod
    def for_lab(cls, lab: AsyncLab, token: str = DEFAULT_TOKEN) -> KueueScenario:
        return cls(LabClient(lab.url, token, user_agent="lab-kueue-scenario"), lab.clock)

    async def close(self) -> None:
        await self.client.close()

    # --- queues and checks -------------------------------------------------------------------------------

    async def create_queues(
        self,
        namespace: str,
        *,
        cluster_queue: str = "cluster-queue",
        local_queue: str = "user-queue",
        admission_checks: Sequence[str] = (),
        controller: str = k.ADMISSION_CHECK_CONTROLLER_NAME,
        cpu: str = "64",
        memory: str = "256Gi",
        gpus: str | None = None,
        preemption: str | None = None,
        queueing_strategy: str | None = None,
        activate_checks: bool = True,
    ) -> QueueSetup:
        """Create the AdmissionChecks (Active unless told not to), the ClusterQueue and the LocalQueue."""
        if preemption not in (None, "Never", "LowerPriority", "LowerOrNewerEqualPriority"):
            raise ScenarioError(f"unknown withinClusterQueue policy {preemption!r}")
        if queueing_strategy not in (None, "BestEffortFIFO", "StrictFIFO"):
            raise ScenarioError(f"unknown queueingStrategy {queueing_strategy!r}")
        cq = manifests.cluster_queue(cluster_queue, cpu=cpu, memory=memory, admission_checks=list(admission_checks))
        if gpus is not None:
            group = cq["spec"]["resourceGroups"][0]
            group["coveredResources"].append("nvidia.com/gpu")
            group["flavors"][0]["resources"].append({"name": "nvidia.com/gpu", "nominalQuota": gpus})
        if preemption is not None:
            cq["spec"]["preemption"] = {"withinClusterQueue": preemption}
        if queueing_strategy is not None:
            cq["spec"]["queueingStrategy"] = queueing_strategy
        for name in admission_checks:
            await self.client.create(ADMISSION_CHECK, None, manifests.admission_check(name, controller=controller))
            if activate_checks:
                await self.set_check_active(name)
        await self.client.create(CLUSTER_QUEUE, None, cq)
        lq = manifests.local_queue(local_queue, cluster_queue_name=cluster_queue)
        lq["metadata"]["namespace"] = namespace
        await self.client.create(LOCAL_QUEUE, namespace, lq)
        return QueueSetup(cluster_queue, local_queue, namespace, tuple(admission_checks))

    async def set_check_active(self, name: str, active: bool = True, message: str = "") -> Obj:
        """The AdmissionCheck's `Active` condition, as its controller would write it."""
        condition = {
            "type": k.ACTIVE,
            "status": "True" if active else "False",
            "reason": "Active" if active else "Inactive",
            "message": message or ("The admission check is active" if active else "The admission check is inactive"),
            "lastTransitionTime": self.clock.timestamp(),
        }
        body = {
            "apiVersion": ADMISSION_CHECK.api_version,
            "kind": ADMISSION_CHECK.kind,
            "metadata": {"name": name},
            "status": {"conditions": [condition]},
        }
        return await self.client.patch(
            ADMISSION_CHECK,
            None,
            name,
            body,
            patch_type="apply",
            subresource="status",
            field_manager=ACC_FIELD_MANAGER,
            force=True,
        )

    async def set_check_state(
        self,
        namespace: str,
        workload: str,
        check: str,
        state: str,
        message: str = "",
        *,
        requeue_after_seconds: int | None = None,
        pod_set_updates: Iterable[Obj] = (),
    ) -> Obj:
        """Write one check entry of a Workload as an admission check controller does (its own SSA manager)."""
        if state not in k.CHECK_STATES:
            raise ScenarioError(f"unknown admission check state {state!r}; one of {sorted(k.CHECK_STATES)}")
        current = await self.client.get(WORKLOAD, namespace, workload)
        entries = {str(c.get("name")): c for c in ws.admission_checks(current)}
        if check not in entries:
            raise ScenarioError(f"workload {namespace}/{workload} has no admission check {check!r}")
        entry: Obj = {"name": check, "state": state, "message": message}
        entry["lastTransitionTime"] = (
            entries[check].get("lastTransitionTime") if entries[check].get("state") == state else self.clock.timestamp()
        )
        if requeue_after_seconds is not None:
            entry["requeueAfterSeconds"] = requeue_after_seconds
        updates = [dict(u) for u in pod_set_updates]
        if updates:
            entry["podSetUpdates"] = updates
        body = {
            "apiVersion": WORKLOAD.api_version,
            "kind": WORKLOAD.kind,
            "metadata": {"name": workload, "namespace": namespace},
            "status": {"admissionChecks": [entry]},
        }
        return await self.client.patch(
            WORKLOAD,
            namespace,
            workload,
            body,
            patch_type="apply",
            subresource="status",
            field_manager=ACC_FIELD_MANAGER,
            force=True,
        )

    # --- workloads -------------------------------------------------------------------------------------

    async def workload_for(self, namespace: str, trainjob: str) -> Obj | None:
        """The Workload controlled by the TrainJob, or None while Kueue has not made one."""
        job = await self.client.get(TRAINJOB, namespace, trainjob)
        listed = await self.client.list(WORKLOAD, namespace)
        uid = str(job["metadata"].get("uid", ""))
        return next((wl for wl in listed.get("items", []) if is_controlled_by(wl, uid)), None)

    async def check_states(self, namespace: str, workload: str) -> dict[str, str]:
        current = await self.client.get(WORKLOAD, namespace, workload)
        return {str(c.get("name")): str(c.get("state")) for c in ws.admission_checks(current)}

    async def preempt(self, namespace: str, workload: str, *, preemptor: Obj | None = None) -> Obj:
        """Evict a quota-reserved Workload as Kueue's preemptor does (reason `Preempted`, `InClusterQueue`)."""
        victim = await self.client.get(WORKLOAD, namespace, workload)
        if not ws.has_quota_reservation(victim):
            raise ScenarioError(f"workload {namespace}/{workload} has no quota reserved; there is nothing to preempt")
        if ws.is_evicted(victim):
            raise ScenarioError(f"workload {namespace}/{workload} is already evicted")
        cluster_queue = str(((victim.get("status") or {}).get("admission") or {}).get("clusterQueue", ""))
        message = preemption_message(preemptor, cluster_queue)
        written = await evict_for_preemption(self.client, self.clock, victim, message)
        if written is None:
            raise ScenarioError(f"workload {namespace}/{workload} changed meanwhile; nothing was preempted")
        return written


class SyncKueueScenario:
    """The same controls for a synchronous caller of a `Lab` (a pytest test, a drill script)."""

    def __init__(self, lab: Lab, timeout: float = 30.0) -> None:
        self.lab = lab
        self.timeout = timeout
        self.inner = lab.call(lambda: KueueScenario.for_lab(lab.inner))

    def _run(self, make: Callable[[], Awaitable[T]]) -> T:
        return self.lab.run(make, self.timeout)

    def close(self) -> None:
        self._run(self.inner.close)

    def create_queues(self, namespace: str, **options: Any) -> QueueSetup:
        return self._run(lambda: self.inner.create_queues(namespace, **options))

    def set_check_active(self, name: str, active: bool = True, message: str = "") -> Obj:
        return self._run(lambda: self.inner.set_check_active(name, active, message))

    def set_check_state(
        self, namespace: str, workload: str, check: str, state: str, message: str = "", **options: Any
    ) -> Obj:
        return self._run(lambda: self.inner.set_check_state(namespace, workload, check, state, message, **options))

    def workload_for(self, namespace: str, trainjob: str) -> Obj | None:
        return self._run(lambda: self.inner.workload_for(namespace, trainjob))

    def check_states(self, namespace: str, workload: str) -> dict[str, str]:
        return self._run(lambda: self.inner.check_states(namespace, workload))

    def preempt(self, namespace: str, workload: str, *, preemptor: Obj | None = None) -> Obj:
        return self._run(lambda: self.inner.preempt(namespace, workload, preemptor=preemptor))

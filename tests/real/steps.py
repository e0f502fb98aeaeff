"""What the real tier's scenarios share: nodes of a zone of the test's own, a runtime, the adapters, waits.

Real time runs at speed 1 here, so the scenarios keep it short without faking any of it: a 5 s grace period, a
process that ends 1 s after SIGTERM, the adapters' `settle_seconds` at `SETTLE` (the lab and production use 90 s)
and `clock_skew_seconds` at 0 (one API server: production allows 5 s; issue 26's finding 5 stages a second
replica's clock, interposed.py, and sets it to that replica's lead), and the cluster's node monitor grace of
20 s (docs/fidelity.md). The kubelets, the node lifecycle, taint eviction, PodGC, the Job, JobSet, Trainer and
Kueue controllers are the real ones; the nodes' machines are hollow (lab/real/machine.py).

Every wait polls the real cluster's state with a deadline (`wait_for`); nothing sleeps to let the cluster catch
up. The ground truth of which processes ran when is the machines' overlap recorder.
"""

from __future__ import annotations

import asyncio
import copy
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import kubernetes
from dispatch_lab.either import Either
from kubernetes.client import ApiException

from airflow_provider_dispatch.dispatch import vocabulary as v
from airflow_provider_dispatch.dispatch.errors import (
    ConflictError,
    DispatchError,
    HoldSettlingError,
    PodsRemainError,
    SuspensionNotObservedError,
)
from airflow_provider_dispatch_lab.real import RealCluster
from airflow_provider_dispatch_lab.real.processes import wait_for
from airflow_provider_dispatch_lab.scenario import manifests
from airflow_provider_dispatch_lab.simulated.nodes.workload import TERMINATION_SECONDS
from airflow_provider_dispatch_lab.truth.overlap import Overlap, ProcessRecord

T = TypeVar("T")
Obj = dict[str, Any]
TRAINER = ("trainer.kubeflow.org", "v1alpha1")
ZONE_LABEL = "topology.kubernetes.io/zone"
SETTLE = 12.0
"""The adapters' `settle_seconds` in the real tier: longer than the controllers here take to see a hold (they
act within a second or two on loopback), shorter than the default 90 s so the tier stays within minutes."""
GRACE = 5
TERMINATION = 1.0
OUT_OF_SERVICE = {"key": v.TAINT_OUT_OF_SERVICE, "value": v.TAINT_OUT_OF_SERVICE_VALUE, "effect": "NoExecute"}


OBSERVED: tuple[type[DispatchError], ...] = (SuspensionNotObservedError, ConflictError)
"""Retried until Trainer has observed a hold; and a 409, since the real Trainer writes the TrainJob's status between
an adapter's read and its conditional write (the retry the operators make)."""
SETTLED = (*OBSERVED, HoldSettlingError)
DRAINED = (*SETTLED, PodsRemainError)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def server_release(client: kubernetes.client.ApiClient) -> tuple[int, int]:
    """The (major, minor) the API server reports in /version: the release whose answers (Tables, `kubectl` output)
    the lab's, which follow v1.36.3, are held to when the version matrix runs another core."""
    info = kubernetes.client.VersionApi(client).get_code()
    return int(info.major), int(info.minor.rstrip("+"))


def pod_selector(trainjob: str) -> str:
    return f"{v.LABEL_JOBSET_NAME}={trainjob}"


async def make_adapter(kind: str, kubeconfig: Path, **options: Any) -> Either:
    options.setdefault("settle_seconds", SETTLE)
    # one kube-apiserver answers every request here: no two replicas' clocks to allow for (dispatch/nodes.py)
    options.setdefault("clock_skew_seconds", 0.0)
    return await Either.from_kubeconfig(kind, kubeconfig, **options)


async def until(
    what: str,
    attempt: Callable[[], Awaitable[T]],
    *,
    retry: tuple[type[DispatchError], ...] = OBSERVED,
    within: float = 60.0,
) -> T:
    """`attempt()` again while it raises exactly one of `retry` (retryable answers the cluster's progress will
    end; a subclass is not retried), until it returns, with a deadline. A `HoldSettlingError` waits the seconds
    it names, as the operators do."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        try:
            return await attempt()
        except DispatchError as error:
            if type(error) not in retry:
                raise
            if loop.time() >= deadline:
                raise AssertionError(f"{what}: still {type(error).__name__} after {within:.0f} s: {error}") from error
            pause = min(error.seconds_left, 2.0) if isinstance(error, HoldSettlingError) else 0.5
            await asyncio.sleep(max(pause, 0.2))  # a poll interval: the next attempt reads the cluster again


class RealSteps:
    """One test's namespace on the real cluster, nodes of its own zone, and the cluster's machines."""

    def __init__(self, cluster: RealCluster, api: kubernetes.client.ApiClient) -> None:
        self.cluster = cluster
        self.api = api
        self.core = kubernetes.client.CoreV1Api(api)
        self.custom = kubernetes.client.CustomObjectsApi(api)
        self.zone = unique("z")
        self.namespace = unique("r")
        self.nodes: list[str] = []
        self.core.create_namespace({"metadata": {"name": self.namespace}})

    def close(self) -> None:
        """The test's machines stop and their Nodes go; the namespace too."""
        for node in self.nodes:
            self.cluster.remove_node(node)
        self.core.delete_namespace(self.namespace)

    # --- the operator's installation ------------------------------------------------------------------------

    def node(self, suffix: str, *, cpu: str = "8", status_report_seconds: float | None = None) -> str:
        """A node of this test's zone, `cpu` cpus (a pod of `runtime` takes 8: one per node); its kubelet reports
        status every `status_report_seconds` (None: the kubelet's default, 5 minutes)."""
        name = f"{self.zone}-{suffix}"
        self.cluster.add_node(
            name, cpu=cpu, labels={ZONE_LABEL: self.zone}, status_report_seconds=status_report_seconds
        )
        self.nodes.append(name)
        self.wait(f"node {name} schedulable", lambda: self._schedulable(name) or None, timeout=60)
        return name

    def runtime(
        self,
        *,
        pod_replacement_policy: str | None = "Failed",
        grace: int = GRACE,
        termination: float = TERMINATION,
        unreachable_toleration: int | None = None,
        annotations: dict[str, str] | None = None,
        finite: bool = False,
    ) -> str:
        """A ClusterTrainingRuntime whose pods each take a whole 8-cpu node of this zone, with a `grace` s grace
        period and a process that ends `termination` s after SIGTERM; with `unreachable_toleration`, pods that
        tolerate a node's `unreachable:NoExecute` taint that many seconds instead of the default 300; with
        `annotations`, more workload annotations on the pods (how long the process runs, its exit code); with
        `finite`, pods that are not restarted and a Job that fails at its first failure (restartPolicy Never,
        backoffLimit 0)."""
        name = unique("rt")
        body = manifests.cluster_training_runtime(
            name, grace_seconds=grace, pod_replacement_policy=pod_replacement_policy
        )
        job = body["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]
        template = job["template"]
        template.setdefault("metadata", {})["annotations"] = {
            TERMINATION_SECONDS: str(termination),
            **(annotations or {}),
        }
        if finite:
            job["backoffLimit"] = 0
            template["spec"]["restartPolicy"] = "Never"
        template["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "8"}}
        template["spec"]["nodeSelector"] = {ZONE_LABEL: self.zone}
        if unreachable_toleration is not None:
            template["spec"]["tolerations"] = [
                {
                    "key": "node.kubernetes.io/unreachable",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": unreachable_toleration,
                }
            ]
        self.custom.create_cluster_custom_object(*TRAINER, "clustertrainingruntimes", body)
        return name

    def manifest(self, name: str, runtime: str, *, num_nodes: int = 1, queue: str | None = None) -> Obj:
        body = manifests.trainjob(name, runtime=runtime, num_nodes=num_nodes, queue=queue, suspend=None)
        body["metadata"]["namespace"] = self.namespace
        return body

    # --- reading and waiting ----------------------------------------------------------------------------------

    def wait(self, what: str, probe: Callable[[], T | None], timeout: float = 60.0) -> T:
        return wait_for(what, probe, timeout=timeout, programs=self.cluster.programs, interval=0.3)

    def trainjob(self, name: str) -> Obj:
        return dict(self.custom.get_namespaced_custom_object(*TRAINER, self.namespace, "trainjobs", name))

    def pods(self, trainjob: str) -> list[Any]:
        return list(self.core.list_namespaced_pod(self.namespace, label_selector=pod_selector(trainjob)).items)

    def running_pods(
        self, trainjob: str, count: int, admission: int | None, timeout: float = 60.0, *, alone: bool = True
    ) -> list[Any]:
        """Wait until `count` pods of the TrainJob, of dispatch's admission `admission` (None: whatever it is), run;
        with `alone`, no other pod of the TrainJob is left (none Terminating either)."""

        def running() -> list[Any] | None:
            pods = self.pods(trainjob)
            live = [p for p in pods if p.metadata.deletion_timestamp is None and p.status.phase == "Running"]
            of_it = [
                p
                for p in live
                if admission is None or (p.metadata.labels or {}).get(v.POD_LABEL_ADMISSION) == str(admission)
            ]
            return of_it if len(of_it) == count and (not alone or len(pods) == count) else None

        return self.wait(f"{count} running pods of {trainjob}, admission {admission}", running, timeout)

    def ready(self, node: str) -> str | None:
        for condition in self.core.read_node(node).status.conditions or []:
            if condition.type == "Ready":
                return str(condition.status)
        return None

    def wait_ready(self, node: str, status: str, timeout: float = 90.0) -> None:
        self.wait(f"{node} Ready={status}", lambda: self.ready(node) == status or None, timeout)

    def _schedulable(self, node: str) -> bool:
        return self.ready(node) == "True" and not (self.core.read_node(node).spec.taints or [])

    # --- machines and the operator ----------------------------------------------------------------------------

    def set_state(self, node: str, state: str) -> None:
        """`frozen`, `lost`, `powered-off`... (the lab's machine states, acting on the hollow machine)."""
        self.cluster.set_node_state(node, state)

    def taint_out_of_service(self, node: str) -> None:
        """The operator confirmed the machine is off: non-graceful node shutdown (KEP-2268). The taint list is
        replaced as a whole, conditionally, again on a 409 (the node lifecycle controller writes taints too)."""
        for _ in range(10):
            live = self.core.read_node(node)
            taints = self.api.sanitize_for_serialization(live.spec.taints) or []
            body = {
                "metadata": {"resourceVersion": live.metadata.resource_version},
                "spec": {"taints": [*taints, OUT_OF_SERVICE]},
            }
            try:
                self.core.patch_node(node, body)
                return
            except ApiException as error:
                if error.status != 409:
                    raise
        raise AssertionError(f"node {node} kept changing under the taint")

    def fence(self, node: str) -> None:
        """Power the machine off, then taint its Node out-of-service, as the runbook says."""
        self.set_state(node, "powered-off")
        self.taint_out_of_service(node)

    def update_trainjob(self, name: str, change: Callable[[Obj], None], attempts: int = 10) -> Obj:
        """Read, change, replace; again on a 409 (the real Trainer writes the TrainJob too)."""
        for _ in range(attempts):
            live = self.trainjob(name)
            change(live)
            try:
                return dict(
                    self.custom.replace_namespaced_custom_object(*TRAINER, self.namespace, "trainjobs", name, live)
                )
            except ApiException as error:
                if error.status != 409:
                    raise
        raise AssertionError(f"TrainJob {name} kept changing under the update")

    # --- the ground truth ----------------------------------------------------------------------------------------

    def processes(self, trainjob: str) -> list[ProcessRecord]:
        namespace = self.namespace

        async def read() -> list[ProcessRecord]:
            return [copy.copy(r) for r in self.cluster.machines.recorder.processes(namespace, trainjob)]

        return self.cluster.run(read)

    def overlaps(self, trainjob: str) -> list[Overlap]:
        namespace = self.namespace

        async def read() -> list[Overlap]:
            return list(self.cluster.machines.recorder.overlaps(namespace, trainjob))

        return self.cluster.run(read)

    def process_runs(self, pod_uid: str) -> bool:
        """Whether the machine still runs the process of that pod, whatever the API says of the pod."""

        async def read() -> bool:
            return any(r.pod_uid == pod_uid and r.running for r in self.cluster.machines.recorder.records)

        return self.cluster.run(read)

    def admissions(self, trainjob: str) -> list[str | None]:
        """The admissions the ledger counted from the TrainJob's watch events, whoever made them: the A each
        admitting write carried."""
        namespace = self.namespace

        async def read() -> list[str | None]:
            return [a.admission_annotation for a in self.cluster.machines.ledger.history(namespace, trainjob)]

        return self.cluster.run(read)

"""Steps the Kueue tests take through the API: queues, queued TrainJobs, their Workloads, and Trainer's part.

Where a test runs Kueue without the workload controllers, it plays Trainer through the API the way Trainer
would: the TrainJob's `status.jobsStatus` (what `IsActive` reads) and its `Complete`/`Failed` conditions are a
merge patch of `trainjobs/status`.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import kubernetes
import urllib3
from kubernetes import watch

from airflow_provider_dispatch_lab.runtime import Lab
from airflow_provider_dispatch_lab.scenario import manifests
from airflow_provider_dispatch_lab.scenario.kueue import QueueSetup, SyncKueueScenario
from airflow_provider_dispatch_lab.simulated.kueue import constants as k

from .nodes_support import ZONE_LABEL
from .waiting import wait_for
from .workload_steps import TRAINER, Workloads, unique

Obj = dict[str, Any]
KUEUE = ("kueue.x-k8s.io", "v1beta2")
#: the Kueue kinds that live in a namespace (the others are cluster-scoped)
NAMESPACED = frozenset({"workloads"})
RUNTIME = "kueue-torch"


def condition(obj: Obj | None, kind: str) -> Obj | None:
    for entry in ((obj or {}).get("status") or {}).get("conditions") or ():
        if entry.get("type") == kind:
            return dict(entry)
    return None


def has(obj: Obj | None, kind: str, status: str, reason: str | None = None) -> bool:
    found = condition(obj, kind)
    return found is not None and found["status"] == status and (reason is None or found["reason"] == reason)


def checks(obj: Obj | None) -> dict[str, Obj]:
    return {c["name"]: c for c in ((obj or {}).get("status") or {}).get("admissionChecks") or ()}


def kueue_patch(trainjob: Obj) -> Obj:
    return next(p for p in trainjob["spec"].get("runtimePatches") or () if p["manager"] == k.RUNTIME_PATCH_MANAGER)


class KueueObjects(Workloads):
    """The official clients in one namespace, with Kueue's own objects: Workloads here, and the cluster-scoped
    ClusterQueues and AdmissionChecks. The cluster tests (`Kueue`) and the admission check controller's tests
    (`kueue.support.Steps`) read and wait on them alike."""

    def zone_runtime(self, zone: str, *, pod_replacement_policy: str | None = "Failed") -> str:
        """A runtime whose pods each ask for a whole 8-cpu node of `zone` (a zone of the test's own, so that
        quota and placement are the test's alone), with a 30 s grace period. `pod_replacement_policy=None` is
        upstream's runtime as it ships (the Job default, `TerminatingOrFailed`); `Failed` is what dispatch's
        runtime policy requires."""
        name = unique("rt")
        body = manifests.cluster_training_runtime(name, grace_seconds=30, pod_replacement_policy=pod_replacement_policy)
        pod_spec = body["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
        pod_spec["containers"][0]["resources"] = {"requests": {"cpu": "8"}}
        pod_spec["nodeSelector"] = {ZONE_LABEL: zone}
        self.create_runtime(body)
        return name

    def workload_name(self, trainjob: str, timeout: float = 30.0) -> str:
        """The Workload Kueue made for the TrainJob (the one it owns), once there is one."""
        uid = self.trainjob(trainjob)["metadata"]["uid"]

        def owned(wl: Obj | None) -> bool:
            refs = ((wl or {}).get("metadata") or {}).get("ownerReferences") or ()
            return any(ref.get("uid") == uid for ref in refs)

        found = self._wait_kueue("workloads", None, owned, timeout)
        return str(found["metadata"]["name"])

    def workload(self, name: str) -> Obj:
        return self._get_kueue("workloads", name)

    def wait_workload(
        self, name: str, predicate: Callable[[Obj | None], bool], timeout: float = 30.0, *, since: str | None = None
    ) -> Obj:
        """The Workload once `predicate` holds; with `since` (a `revision()`), the first version after it that holds
        (`waiting.wait_for`): for a state lab time moves past, such as an eviction before its re-queue."""
        return self._wait_kueue("workloads", name, predicate, timeout, since)

    def revision(self) -> str:
        """The resourceVersion of the cluster now (a list's), to wait from with `since`."""
        listed = self.custom.list_namespaced_custom_object(*KUEUE, self.namespace, "workloads", limit=1)
        return str(listed["metadata"]["resourceVersion"])

    def patch_workload(self, name: str, body: Obj) -> Obj:
        patched: Obj = self.custom.patch_namespaced_custom_object(*KUEUE, self.namespace, "workloads", name, body)
        return patched

    def cluster_queue(self, name: str) -> Obj:
        return self._get_kueue("clusterqueues", name)

    def wait_cluster_queue(self, name: str, predicate: Callable[[Obj | None], bool], timeout: float = 30.0) -> Obj:
        return self._wait_kueue("clusterqueues", name, predicate, timeout)

    def admission_check(self, name: str) -> Obj:
        return self._get_kueue("admissionchecks", name)

    def wait_admission_check(self, name: str, predicate: Callable[[Obj | None], bool], timeout: float = 30.0) -> Obj:
        return self._wait_kueue("admissionchecks", name, predicate, timeout)

    def _get_kueue(self, plural: str, name: str) -> Obj:
        """One object of a kind of Kueue's: a Workload in this namespace, the other kinds cluster-wide."""
        if plural in NAMESPACED:
            found: Obj = self.custom.get_namespaced_custom_object(*KUEUE, self.namespace, plural, name)
        else:
            found = self.custom.get_cluster_custom_object(*KUEUE, plural, name)
        return found

    def _wait_kueue(
        self,
        plural: str,
        name: str | None,
        predicate: Callable[[Any], bool],
        timeout: float,
        since: str | None = None,
    ) -> Obj:
        """`waiting.wait_for` on a kind of Kueue's: Workloads in this namespace, the other kinds cluster-wide."""
        if plural in NAMESPACED:
            list_fn, scope = self.custom.list_namespaced_custom_object, {"namespace": self.namespace}
        else:
            list_fn, scope = self.custom.list_cluster_custom_object, {}
        found: Obj = wait_for(
            list_fn,
            name,
            predicate,
            timeout=timeout,
            since=since,
            group=KUEUE[0],
            version=KUEUE[1],
            plural=plural,
            **scope,
        )
        return found


class Kueue(KueueObjects):
    """The official clients in one namespace, plus the Kueue scenario controls of the lab."""

    def __init__(self, api: kubernetes.client.ApiClient, namespace: str, lab: Lab) -> None:
        super().__init__(api, namespace)
        self.lab = lab
        self.scenario = SyncKueueScenario(lab)

    def close(self) -> None:
        self.scenario.close()

    def ensure_runtime(self, name: str = RUNTIME, *, grace_seconds: int = 30) -> str:
        try:
            self.custom.get_cluster_custom_object(*TRAINER, "clustertrainingruntimes", name)
        except kubernetes.client.ApiException as error:
            if error.status != 404:
                raise
            self.create_runtime(manifests.cluster_training_runtime(name, grace_seconds=grace_seconds))
        return name

    def queues(self, *, checks: tuple[str, ...] = (), **options: Any) -> QueueSetup:
        """A ClusterQueue and checks of this test's own (they are cluster-scoped), and a LocalQueue here."""
        names = tuple(unique(name) for name in checks)
        return self.scenario.create_queues(
            self.namespace, cluster_queue=unique("cq"), local_queue=unique("lq"), admission_checks=names, **options
        )

    def queued_trainjob(
        self,
        queue: QueueSetup,
        *,
        cpu: str | None = "2",
        nodes: int = 2,
        suspend: bool | None = False,
        labels: dict[str, str] | None = None,
        runtime: str = RUNTIME,
    ) -> str:
        name = unique("tj")
        trainjob = manifests.trainjob(name, queue=queue.local_queue, suspend=suspend, num_nodes=nodes, runtime=runtime)
        if cpu is not None:
            trainjob["spec"]["trainer"]["resourcesPerNode"] = {"requests": {"cpu": cpu}}
        trainjob["metadata"]["labels"].update(labels or {})
        self.create_trainjob(trainjob)
        return name

    # --- Trainer's part ----------------------------------------------------------------------------------------

    def report_jobs(self, trainjob: str, active: int, ready: int = 0) -> Obj:
        """What Trainer copies from the JobSet: one `node` entry of Job counts (`IsActive` reads `active`)."""
        entry = {"name": "node", "active": active, "ready": ready, "succeeded": 0, "failed": 0, "suspended": 0}
        body = {"status": {"jobsStatus": [entry]}}
        patched: Obj = self.custom.patch_namespaced_custom_object_status(
            *TRAINER, self.namespace, "trainjobs", trainjob, body
        )
        return patched

    def report_finished(
        self, trainjob: str, kind: str = "Complete", message: str = "jobset completed successfully"
    ) -> Obj:
        entry = {
            "type": kind,
            "status": "True",
            "reason": "AllJobsCompleted" if kind == "Complete" else "FailedJobs",
            "message": message,
            "lastTransitionTime": "2026-01-01T00:00:00Z",
        }
        jobs = {"name": "node", "active": 0, "ready": 0, "succeeded": 1, "failed": 0, "suspended": 0}
        body = {"status": {"conditions": [entry], "jobsStatus": [jobs]}}
        patched: Obj = self.custom.patch_namespaced_custom_object_status(
            *TRAINER, self.namespace, "trainjobs", trainjob, body
        )
        return patched


class Versions:
    """The versions of one object a watch delivered, with a wait for a given resourceVersion to arrive."""

    def __init__(self, first: list[Obj]) -> None:
        self.items = list(first)
        self._changed = threading.Condition()

    def add(self, obj: Obj) -> None:
        with self._changed:
            self.items.append(obj)
            self._changed.notify_all()

    def wait_for_version(self, resource_version: str, timeout: float = 30.0) -> list[Obj]:
        def arrived() -> bool:
            return any(v["metadata"]["resourceVersion"] == resource_version for v in self.items)

        with self._changed:
            if not self._changed.wait_for(arrived, timeout):
                raise TimeoutError(f"version {resource_version} did not arrive in {timeout} s")
            return list(self.items)


@contextmanager
def recorded_trainjob_versions(api: kubernetes.client.ApiClient, namespace: str, name: str) -> Iterator[Versions]:
    """Every version of a TrainJob the watch delivers while the block runs (to see intermediate writes)."""
    custom = kubernetes.client.CustomObjectsApi(api)
    listed = custom.list_namespaced_custom_object(
        *TRAINER, namespace, "trainjobs", field_selector=f"metadata.name={name}"
    )
    versions = Versions(listed["items"])
    watcher = watch.Watch()

    def follow() -> None:
        with contextlib.suppress(urllib3.exceptions.HTTPError):  # the stream ends abruptly when stopped
            _follow()

    def _follow() -> None:
        for event in watcher.stream(
            custom.list_namespaced_custom_object,
            *TRAINER,
            namespace,
            "trainjobs",
            field_selector=f"metadata.name={name}",
            resource_version=listed["metadata"]["resourceVersion"],
            timeout_seconds=60,
        ):
            if event["type"] in ("ADDED", "MODIFIED"):
                versions.add(event["object"])

    thread = threading.Thread(target=follow, daemon=True)
    thread.start()
    try:
        yield versions
    finally:
        watcher.stop()

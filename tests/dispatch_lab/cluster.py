"""Cluster state built through the lab's API, step by step, as the real controllers would leave it.

The lab's simulated controllers are not used here: each step below writes, through the official `kubernetes`
client and as the lab's admin, exactly what one controller's reconcile writes, and names that controller and
its source (via research/k8s-apis.md). So every adapter test starts from a state the real cluster could be in,
and the adapter sees it only over HTTP.

Simplification, said once: pods are created without the Job controller's `batch.kubernetes.io/job-tracking`
finalizer unless a test asks for it, so that PodGC's force deletion removes them at once (k8s-apis §5.2: the
Job controller removes that finalizer once it has accounted the pod; a test that needs the lingering object
passes `finalizers`).
"""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import kubernetes
from kubernetes.client import ApiException

from airflow_provider_dispatch.dispatch import vocabulary as v
from airflow_provider_dispatch.dispatch.admission import dispatch_runtime_patch
from airflow_provider_dispatch.dispatch.assessment import Execution
from airflow_provider_dispatch.dispatch.fencing import format_time, record
from airflow_provider_dispatch.dispatch.vocabulary import parse_time
from airflow_provider_dispatch_lab.scenario import manifests

Obj = dict[str, Any]
MERGE_PATCH = "application/merge-patch+json"
TIMESTAMP = "2026-08-21T10:00:00Z"
JOB_TRACKING_FINALIZER = "batch.kubernetes.io/job-tracking"
OUT_OF_SERVICE = {"key": v.TAINT_OUT_OF_SERVICE, "value": v.TAINT_OUT_OF_SERVICE_VALUE, "effect": "NoExecute"}
UNREACHABLE = {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute", "timeAdded": TIMESTAMP}
NOT_READY = {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute", "timeAdded": TIMESTAMP}


#: how long a node has been in its Ready state at its last report, unless a test says otherwise: a day
A_DAY = 86400


def ready_condition(status: str, ready_for: int = A_DAY) -> Obj:
    """A Node's Ready condition, last reported at TIMESTAMP, in that state for `ready_for` seconds then (fencing
    counts it for a node back from a partition). The kubelet posts True (`KubeletReady`); the node lifecycle
    controller writes Unknown when the kubelet stops posting (reason strings UNVERIFIED, k8s-apis §5.3)."""
    reasons = {"True": "KubeletReady", "False": "KubeletNotReady", "Unknown": "NodeStatusUnknown"}
    reported = parse_time(TIMESTAMP)
    assert reported is not None
    return {
        "type": v.CONDITION_READY,
        "status": status,
        "reason": reasons[status],
        "message": "set by the adapter tests",
        "lastHeartbeatTime": TIMESTAMP,
        "lastTransitionTime": format_time(reported - timedelta(seconds=ready_for)),
    }


@dataclass
class Cluster:
    """One test's namespace in the lab, and the cluster-scoped objects it needs."""

    api: kubernetes.client.ApiClient
    namespace: str

    def __post_init__(self) -> None:
        self.core = kubernetes.client.CoreV1Api(self.api)
        self.custom = kubernetes.client.CustomObjectsApi(self.api)
        self.suffix = uuid.uuid4().hex[:6]

    # --- installed by the operator: Trainer's runtime, nodes -----------------------------------------------

    def runtime(
        self,
        jobs: Sequence[str] = ("node",),
        grace_seconds: int = 30,
        *,
        pod_replacement_policy: str | None = "Failed",
        failure_policy: Mapping[str, Any] | None = None,
        name: str | None = None,
    ) -> str:
        """A ClusterTrainingRuntime as Trainer's manifests install it (`manifests/base/runtimes/`), with the
        given replicatedJobs, `podReplacementPolicy: Failed` as dispatch's runtime policy requires (None:
        upstream's default) and a JobSet `failurePolicy` when given. Cluster-scoped, so it is named per test."""
        body = manifests.cluster_training_runtime(
            name or f"rt-{self.suffix}-{len(jobs)}",
            grace_seconds=grace_seconds,
            pod_replacement_policy=pod_replacement_policy,
        )
        template = body["spec"]["template"]["spec"]["replicatedJobs"][0]
        body["spec"]["template"]["spec"]["replicatedJobs"] = [{**copy.deepcopy(template), "name": job} for job in jobs]
        if failure_policy is not None:
            body["spec"]["template"]["spec"]["failurePolicy"] = dict(failure_policy)
        try:
            self.custom.create_cluster_custom_object(*_TRAINER, "clustertrainingruntimes", body)
        except ApiException as error:
            if error.status != 409:
                raise
        return str(body["metadata"]["name"])

    def node(self, name: str, *, ready: str | None = "True", taints: Iterable[Mapping[str, Any]] = ()) -> str:
        """A Node as its kubelet registers it (`kubelet_node_status.go` `initialNode`) and reports Ready
        through /status; `ready=None` for a node whose kubelet never posted a Ready condition."""
        name = self.node_name(name)
        self.core.create_node(manifests.node(name))
        self.set_ready(name, ready)
        if taints:
            self.core.patch_node(name, {"spec": {"taints": [dict(t) for t in taints]}})
        return name

    def node_name(self, name: str) -> str:
        """Nodes are cluster-scoped: a per-test name."""
        return name if name.endswith(self.suffix) else f"{name}-{self.suffix}"

    def set_ready(self, node: str, ready: str | None, *, ready_for: int = A_DAY) -> None:
        """The node's conditions as the kubelet or the lifecycle controller writes them through /status, in that
        state for `ready_for` seconds. A JSON merge patch replaces the list as a whole (None removes it)."""
        conditions = None if ready is None else [ready_condition(ready, ready_for)]
        self.merge_patch(f"/api/v1/nodes/{node}/status", {"status": {"conditions": conditions}})

    def get(self, path: str) -> Obj | None:
        """The object at `path`, or None when there is none (404)."""
        try:
            response = self.api.call_api(
                path,
                "GET",
                header_params={"Accept": "application/json"},
                auth_settings=["BearerToken"],
                _preload_content=False,
            )
        except ApiException as error:
            if error.status == 404:
                return None
            raise
        found: Obj = json.loads(response.data)
        response.release_conn()
        return found

    def merge_patch(self, path: str, body: Mapping[str, Any]) -> None:
        response = self.api.call_api(
            path,
            "PATCH",
            header_params={"Content-Type": MERGE_PATCH, "Accept": "application/json"},
            body=dict(body),
            auth_settings=["BearerToken"],
            _preload_content=False,
        )
        assert response.data is not None  # read the answer, so the connection goes back to the pool clean
        response.release_conn()

    # --- node lifecycle and the operator -------------------------------------------------------------------

    def lose_node(self, node: str) -> None:
        """The kubelet stopped posting: the node lifecycle controller sets Ready=Unknown and adds the
        `unreachable:NoExecute` taint (k8s-apis §5.3, §6 rule 8). The pods on it stay as they are."""
        self.set_ready(node, "Unknown")
        self.add_taint(node, UNREACHABLE)

    def add_taint(self, node: str, taint: Mapping[str, Any]) -> None:
        """An operator (or the lifecycle controller) adds a taint; `spec.taints` is replaced as a whole."""
        current = self.core.api_client.sanitize_for_serialization(self.core.read_node(node).spec.taints) or []
        self.core.patch_node(node, {"spec": {"taints": [*current, dict(taint)]}})

    def taint_out_of_service(self, node: str, effect: str = "NoExecute", value: str | None = None) -> None:
        """The operator confirmed the machine is shut down: non-graceful node shutdown (k8s-apis §5.4)."""
        taint = {**OUT_OF_SERVICE, "effect": effect}
        if value is not None:
            taint["value"] = value
        self.add_taint(node, taint)

    def nodes_in_states(self, count: int) -> list[str]:
        """`count` nodes (at least 3), the first three in the states that need a person or prove cessation, the
        rest Ready=True: lost (Ready=Unknown and the unreachable taint), Ready=False, and fenced (lost, then
        tainted out-of-service by the operator)."""
        names = [self.node(f"n{j}") for j in range(count)]
        self.lose_node(names[0])
        self.set_ready(names[1], "False")
        self.lose_node(names[2])
        self.taint_out_of_service(names[2])
        return names

    def delete_node(self, node: str) -> None:
        """An operator or the cloud node controller deletes the Node object (k8s-apis §5.5)."""
        self.core.delete_node(node)

    # --- the TrainJob and what Trainer and JobSet make of it -----------------------------------------------

    def trainjob(
        self,
        name: str,
        *,
        runtime: str,
        job_id: str | None = None,
        submission: str = "1",
        admission: int | None = None,
        suspend: bool = True,
        dispatch_labels: bool = True,
        runtime_patches: Sequence[Mapping[str, Any]] = (),
        queue: str | None = None,
    ) -> Obj:
        """A TrainJob as dispatch left it: its labels, `spec.suspend`, A and the runtime patches. Trainer's
        mutating webhook stamps each patch's `time` (k8s-apis §1.5); the lab runs no webhook, so it is set."""
        body = manifests.trainjob(
            name, job_id=job_id, submission=submission, runtime=runtime, suspend=suspend, admission=admission
        )
        if not dispatch_labels:
            body["metadata"]["labels"] = {}
        if queue is not None:
            body["metadata"]["labels"][v.LABEL_KUEUE_QUEUE_NAME] = queue
        if runtime_patches:
            body["spec"]["runtimePatches"] = [{**dict(p), "time": TIMESTAMP} for p in runtime_patches]
        return dict(self.custom.create_namespaced_custom_object(*_TRAINER, self.namespace, "trainjobs", body))

    def dispatch_patch(self, runtime: str, execution: Execution) -> Obj:
        """The runtime patch an earlier release wrote for `execution` (admission.py)."""
        live = self.custom.get_cluster_custom_object(*_TRAINER, "clustertrainingruntimes", runtime)
        return dispatch_runtime_patch(live, execution)

    def trainer_observes(self, name: str, *, suspended: bool = True, jobs: Sequence[str] = ("node",)) -> None:
        """Trainer's reconcile: condition `Suspended` True (reason Suspended) while `spec.suspend` is true,
        False (reason Resumed) after, and `jobsStatus` copied from the JobSet with `active` 0 once the Job
        controller has marked the pods Terminating (k8s-apis §1.3, §2.2 consequence steps 4-5). Written with a
        JSON merge patch on /status, as the controller does."""
        condition = (
            {"type": "Suspended", "status": "True", "reason": "Suspended", "message": "TrainJob is suspended"}
            if suspended
            else {"type": "Suspended", "status": "False", "reason": "Resumed", "message": "TrainJob is resumed"}
        )
        status = {
            "conditions": [{**condition, "lastTransitionTime": TIMESTAMP}],
            "jobsStatus": [
                {"name": job, "ready": 0, "succeeded": 0, "failed": 0, "active": 0, "suspended": 1 if suspended else 0}
                for job in jobs
            ],
        }
        self.set_trainjob_status(name, status)

    def set_trainjob_status(self, name: str, status: Mapping[str, Any]) -> None:
        self.custom.patch_namespaced_custom_object_status(
            *_TRAINER, self.namespace, "trainjobs", name, {"status": dict(status)}, _content_type=MERGE_PATCH
        )

    def trainer_finishes(self, name: str, kind: str = "Complete") -> None:
        """Trainer copies the JobSet's Completed (as Complete) or Failed condition (k8s-apis §1.3)."""
        reason = "AllJobsCompleted" if kind == "Complete" else "FailedJobs"
        live = self.trainjob_object(name)
        conditions = [*live.get("status", {}).get("conditions", [])]
        conditions.append(
            {
                "type": kind,
                "status": "True",
                "reason": reason,
                "message": "set by the tests",
                "lastTransitionTime": TIMESTAMP,
            }
        )
        self.set_trainjob_status(name, {"conditions": conditions})

    def jobset(
        self, name: str, *, suspend: bool = True, jobs: Sequence[str] = ("node",), child_jobs: bool = True
    ) -> Obj:
        """The JobSet Trainer builds: same name and namespace, controller ownerReference to the TrainJob,
        `spec.suspend` = the TrainJob's, the pod-template labels of its runtime patches applied in order
        (k8s-apis §1.4 `Build`, §1.2); its status as JobSet computes it, `active` counting Jobs with active
        pods, which excludes Terminating ones (§2.2). With `child_jobs`, the Jobs JobSet creates for it
        (`job`)."""
        owner = self.trainjob_object(name)
        replicated = [
            {
                "name": job,
                "replicas": 1,
                "template": {
                    "spec": {
                        "template": {
                            "metadata": {"labels": _patched_pod_labels(owner, job)},
                            "spec": {
                                "restartPolicy": "OnFailure",
                                "containers": [{"name": "node", "image": "pytorch/pytorch:2.7.1"}],
                            },
                        }
                    }
                },
            }
            for job in jobs
        ]
        body = {
            "apiVersion": v.JOBSET.api_version,
            "kind": "JobSet",
            "metadata": {
                "name": name,
                "ownerReferences": [
                    {
                        "apiVersion": v.TRAINJOB.api_version,
                        "kind": "TrainJob",
                        "name": name,
                        "uid": owner["metadata"]["uid"],
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": {"suspend": suspend, "replicatedJobs": replicated},
        }
        created = self.custom.create_namespaced_custom_object(
            v.JOBSET.group, v.JOBSET.version, self.namespace, "jobsets", body
        )
        status = {
            "replicatedJobsStatus": [
                {"name": job, "ready": 0, "succeeded": 0, "failed": 0, "active": 0, "suspended": 1 if suspend else 0}
                for job in jobs
            ]
        }
        self.custom.patch_namespaced_custom_object_status(
            v.JOBSET.group,
            v.JOBSET.version,
            self.namespace,
            "jobsets",
            name,
            {"status": status},
            _content_type=MERGE_PATCH,
        )
        if child_jobs:
            for job in replicated:
                self.job(created, job, suspend=suspend)
        return dict(created)

    def job(self, jobset: Mapping[str, Any], replicated: Mapping[str, Any], *, suspend: bool = True) -> Obj:
        """The Job JobSet creates for index 0 of a replicated job: `<jobset>-<replicatedJob>-0`, controller
        ownerReference to the JobSet, the JobSet's pod template (JobSet's `constructJob`), suspended with it;
        its status as the Job controller leaves a Job that ran and was then suspended: `startTime` recorded,
        then the `Suspended` condition True (`job_controller.go` `syncJob`), or resumed (`Suspended` False)."""
        name = f"{v.name_of(jobset)}-{replicated['name']}-0"
        template = copy.deepcopy(replicated["template"]["spec"]["template"])
        template.setdefault("spec", {})["restartPolicy"] = "OnFailure"
        body = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": name,
                "labels": {v.LABEL_JOBSET_NAME: v.name_of(jobset)},
                "ownerReferences": [
                    {
                        "apiVersion": v.JOBSET.api_version,
                        "kind": "JobSet",
                        "name": v.name_of(jobset),
                        "uid": jobset["metadata"]["uid"],
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": {
                "suspend": suspend,
                "completionMode": "Indexed",
                "completions": 1,
                "parallelism": 1,
                "template": template,
            },
        }
        created = kubernetes.client.BatchV1Api(self.api).create_namespaced_job(self.namespace, body)
        condition = {
            "type": "Suspended",
            "status": "True" if suspend else "False",
            "reason": "JobSuspended" if suspend else "JobResumed",
            "message": "Job suspended" if suspend else "Job resumed",
            "lastProbeTime": TIMESTAMP,
            "lastTransitionTime": TIMESTAMP,
        }
        status = {"startTime": TIMESTAMP, "active": 0, "conditions": [condition]}
        self.merge_patch(f"/apis/batch/v1/namespaces/{self.namespace}/jobs/{name}/status", {"status": status})
        return dict(kubernetes.client.ApiClient().sanitize_for_serialization(created))

    # --- pods: Job controller, scheduler, kubelet, PodGC ---------------------------------------------------

    def pod(
        self,
        trainjob: str,
        *,
        node: str | None,
        index: int = 0,
        job: str = "node",
        execution: Execution | None = None,
        jobset_label: bool = True,
        phase: str = "Running",
        conditions: Iterable[Mapping[str, Any]] = (),
        annotations: Mapping[str, str] | None = None,
        finalizers: Sequence[str] = (),
        grace_seconds: int = 30,
        name: str | None = None,
    ) -> str:
        """A pod of the TrainJob's JobSet as the Job controller creates it: the JobSet labels (§2.1) and the
        Job's, and the pod-template labels of the runtime patches, dispatch's among them when `execution` is
        given (Trainer puts runtime-patch labels on pods, not the TrainJob's, §6 rule 4); bound to `node` as the
        scheduler's binding leaves it (`spec.nodeName`); its phase as its kubelet reports it (§5.1)."""
        job_name = f"{trainjob}-{job}-0"
        labels = {
            "batch.kubernetes.io/job-name": job_name,
            "jobset.sigs.k8s.io/replicatedjob-name": job,
            "jobset.sigs.k8s.io/job-index": "0",
        }
        if jobset_label:
            labels[v.LABEL_JOBSET_NAME] = trainjob
        if execution is not None:
            labels |= {
                v.LABEL_JOB_ID: execution.job_id,
                v.LABEL_SUBMISSION: execution.submission,
                v.POD_LABEL_ADMISSION: str(execution.admission),
            }
        pod_name = name or f"{job_name}-{index}-{uuid.uuid4().hex[:5]}"
        body = manifests.pod(
            pod_name, node_name=node, labels=labels, grace_seconds=grace_seconds, finalizers=list(finalizers)
        )
        if annotations:
            body["metadata"]["annotations"] = dict(annotations)
        self.core.create_namespaced_pod(self.namespace, body)
        status: Obj = {"phase": phase}
        if conditions:
            status["conditions"] = [dict(c) for c in conditions]
        self.core.patch_namespaced_pod_status(pod_name, self.namespace, {"status": status})
        return pod_name

    def job_controller_deletes(self, pod: str) -> None:
        """The Job of a suspended JobSet deletes its pods gracefully with their own grace period (§2.2 step 3,
        §3): the pod stays Terminating, phase unchanged, until its kubelet confirms; on a lost node, forever."""
        self.core.delete_namespaced_pod(pod, self.namespace)

    def podgc_force_deletes(self, pod: str) -> None:
        """PodGC `gcTerminating` on an out-of-service, not Ready node: phase Failed, then a delete with grace
        0 (k8s-apis §5.4, §6 rule 9a). The pod object is gone."""
        self.core.patch_namespaced_pod_status(pod, self.namespace, {"status": {"phase": "Failed"}})
        self.core.delete_namespaced_pod(pod, self.namespace, grace_period_seconds=0)

    def kubelet_finishes(self, pod: str, phase: str = "Succeeded") -> None:
        """The kubelet reports the containers' end: a terminal phase (§5.1)."""
        self.core.patch_namespaced_pod_status(pod, self.namespace, {"status": {"phase": phase}})

    # --- composites ------------------------------------------------------------------------------------------

    def running_execution(self, name: str, *, runtime: str, admission: int, observed: bool = True) -> Execution:
        """Execution `admission` admitted by dispatch and running: A and dispatch's runtime patch on the
        TrainJob, suspend false, and (unless `observed` is False) Trainer has observed it (condition Suspended
        False)."""
        execution = Execution(name, "1", admission)
        patch = self.dispatch_patch(runtime, execution)
        self.trainjob(name, runtime=runtime, admission=admission, suspend=False, runtime_patches=[patch])
        if observed:
            self.trainer_observes(name, suspended=False)
        return execution

    def held_after_execution(
        self,
        name: str,
        *,
        runtime: str,
        admission: int,
        pods_on: Sequence[str] = (),
        job_id: str | None = None,
        jobs: Sequence[str] = ("node",),
        terminating: bool = True,
    ) -> tuple[Execution, list[str]]:
        """Execution `admission` ran with one pod per entry of `pods_on` (node names), then dispatch held it:
        the TrainJob carries A and dispatch's runtime patch, suspend true; Trainer and JobSet observed the
        hold; the Job controller deleted the pods gracefully (Terminating) unless `terminating` is False."""
        execution = Execution(job_id or name, "1", admission)
        patch = self.dispatch_patch(runtime, execution)
        self.trainjob(name, runtime=runtime, job_id=job_id, admission=admission, runtime_patches=[patch])
        self.trainer_observes(name, jobs=jobs)
        self.jobset(name, jobs=jobs)
        pods = [
            self.pod(name, node=node, index=i, job=jobs[i % len(jobs)], execution=execution)
            for i, node in enumerate(pods_on)
        ]
        if terminating:
            for pod in pods:
                self.job_controller_deletes(pod)
        self.dispatch_recorded_hold(name, admission)
        return execution, pods

    def dispatch_recorded_hold(self, name: str, admission: int, *, since: str = TIMESTAMP) -> None:
        """dispatch's hold of execution `admission` at `since` (long before the lab's now: a settled hold): the
        record of its pods (fencing.py), read by lineage as the hold reads them, written with a JSON merge patch
        of the annotation. The conditional write the real hold makes is not what these tests are about."""
        pods = [
            kubernetes.client.ApiClient().sanitize_for_serialization(p)
            for p in self.core.list_namespaced_pod(self.namespace).items
        ]
        made = record(
            admission, [p for p in pods if v.labels_of(p).get(v.LABEL_JOBSET_NAME) == name], since=parse_time(since)
        )
        self.custom.patch_namespaced_custom_object(
            *_TRAINER,
            self.namespace,
            "trainjobs",
            name,
            {"metadata": {"annotations": {v.ANNOTATION_EXECUTION_PODS: made.to_annotation()}}},
            _content_type=MERGE_PATCH,
        )
        self._suspended_before(name, since)

    def _suspended_before(self, name: str, since: str) -> None:
        """The JobSet `name` and its Jobs were last changed (suspended) no later than the hold at `since`, as
        in a cluster where the hold reached them long ago: each managedFields entry's time is written back to
        `since` (a merge patch of `metadata.managedFields` alone, which the API server stores as sent). The
        settle counts from the last change of their spec when that is later than the record (evidence.py)."""
        batch = kubernetes.client.BatchV1Api(self.api)
        jobs = batch.list_namespaced_job(self.namespace, label_selector=f"{v.LABEL_JOBSET_NAME}={name}").items
        paths = [f"/apis/{v.JOBSET.group}/{v.JOBSET.version}/namespaces/{self.namespace}/jobsets/{name}"]
        paths += [f"/apis/batch/v1/namespaces/{self.namespace}/jobs/{job.metadata.name}" for job in jobs]
        for path in paths:
            current = self.get(path)
            if current is None:
                continue
            entries = [{**entry, "time": since} for entry in current["metadata"].get("managedFields") or []]
            self.merge_patch(path, {"metadata": {"managedFields": entries}})

    # --- reading back ----------------------------------------------------------------------------------------

    def trainjob_object(self, name: str) -> Obj:
        return dict(self.custom.get_namespaced_custom_object(*_TRAINER, self.namespace, "trainjobs", name))

    def resource_version(self, name: str) -> str:
        return str(self.trainjob_object(name)["metadata"]["resourceVersion"])

    def pod_names(self) -> list[str]:
        return [p.metadata.name for p in self.core.list_namespaced_pod(self.namespace).items]


_TRAINER = ("trainer.kubeflow.org", "v1alpha1")


def _patched_pod_labels(trainjob: Mapping[str, Any], replicated_job: str) -> dict[str, str]:
    """The pod-template labels the TrainJob's runtime patches put on a replicated job, later patches winning
    (Trainer applies `runtimePatches` in order onto the runtime's template, k8s-apis §1.2)."""
    labels: dict[str, str] = {}
    for patch in v.object_list(trainjob, "spec", "runtimePatches"):
        for job in v.object_list(patch, "trainingRuntimeSpec", "template", "spec", "replicatedJobs"):
            if job.get("name") == replicated_job:
                labels |= v.string_map(job, "template", "spec", "template", "metadata", "labels")
    return labels

"""Steps the workload tests take through the API: objects to create, and the kubelet's part.

The node side (scheduler, kubelets) is not part of the workload tests, so a test plays it through the API the
way those components would: bind a pod (`pods/binding`, what the scheduler posts), report it Running and Ready
or terminal (`pods/status`, what the kubelet posts), and confirm a termination by deleting with grace 0 (what
the kubelet does once the containers stopped, k8s-apis.md §5.2). Without that last step a deleted pod stays
Terminating forever, which is what a frozen node looks like.
"""

from __future__ import annotations

import copy
import uuid
from typing import Any

import kubernetes
from api_answers import answer_of, expect_answer
from kubernetes.client import ApiException

from airflow_provider_dispatch_lab.scenario import manifests

from .waiting import wait_for

Obj = dict[str, Any]
TRAINER = ("trainer.kubeflow.org", "v1alpha1")
JOBSET = ("jobset.x-k8s.io", "v1alpha2")
PATCH_MANAGER = "example.com/workload-test"
ATTEMPT_LABEL = "example.com/attempt"
NODE = "n1"


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def runtime(name: str, *, grace_seconds: int = 30, **job_spec: Any) -> Obj:
    """The sample torch runtime as upstream ships it (no `podReplacementPolicy`: the Job default,
    `TerminatingOrFailed`, whose hazards these tests reproduce), with extra fields in its `node` Job template
    spec."""
    obj = manifests.cluster_training_runtime(name, grace_seconds=grace_seconds, pod_replacement_policy=None)
    obj["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"].update(job_spec)
    return obj


def attempt_patch(attempt: str) -> Obj:
    """A runtime patch putting a label on the `node` pods, as dispatch's admission patch does."""
    return {
        "manager": PATCH_MANAGER,
        "trainingRuntimeSpec": {
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "template": {"spec": {"template": {"metadata": {"labels": {ATTEMPT_LABEL: attempt}}}}},
                        }
                    ]
                }
            }
        },
    }


class Workloads:
    """The official clients, in one namespace."""

    def __init__(self, api: kubernetes.client.ApiClient, namespace: str) -> None:
        self.namespace = namespace
        self.core = kubernetes.client.CoreV1Api(api)
        self.batch = kubernetes.client.BatchV1Api(api)
        self.custom = kubernetes.client.CustomObjectsApi(api)

    # ------------------------------------------------------------------------------------- objects

    def create_runtime(self, obj: Obj) -> Obj:
        created: Obj = self.custom.create_cluster_custom_object(*TRAINER, "clustertrainingruntimes", obj)
        return created

    def create_trainjob(self, obj: Obj) -> Obj:
        created: Obj = self.custom.create_namespaced_custom_object(*TRAINER, self.namespace, "trainjobs", obj)
        return created

    def trainjob(self, name: str) -> Obj:
        found: Obj = self.custom.get_namespaced_custom_object(*TRAINER, self.namespace, "trainjobs", name)
        return found

    def replace_trainjob(self, obj: Obj) -> Obj:
        replaced: Obj = self.custom.replace_namespaced_custom_object(
            *TRAINER, self.namespace, "trainjobs", obj["metadata"]["name"], obj
        )
        return replaced

    def update_trainjob(self, name: str, change: Any, attempts: int = 5) -> Obj:
        """Read, change, replace: the conditional update a client makes, retried on a 409 conflict
        (`retry.RetryOnConflict`), since Trainer writes the status meanwhile."""
        for attempt in range(attempts):
            obj = copy.deepcopy(self.trainjob(name))
            change(obj["spec"])
            try:
                return self.replace_trainjob(obj)
            except ApiException as error:
                if error.status != 409 or attempt == attempts - 1:
                    raise
        raise AssertionError("unreachable")

    def delete_trainjob(self, name: str) -> None:
        self.custom.delete_namespaced_custom_object(*TRAINER, self.namespace, "trainjobs", name)

    # ----------------------------------------------------------------------------------- waiting

    def wait_trainjob(self, name: str, predicate: Any, timeout: float = 30.0, *, since: str | None = None) -> Obj:
        """The TrainJob once `predicate` holds; with `since`, the first version after that resourceVersion that
        holds (`waiting.wait_for`)."""
        found: Obj = wait_for(
            self.custom.list_namespaced_custom_object,
            name,
            predicate,
            timeout=timeout,
            since=since,
            group=TRAINER[0],
            version=TRAINER[1],
            namespace=self.namespace,
            plural="trainjobs",
        )
        return found

    def wait_jobset(self, name: str, predicate: Any, timeout: float = 30.0) -> Obj | None:
        found: Obj | None = wait_for(
            self.custom.list_namespaced_custom_object,
            name,
            predicate,
            timeout=timeout,
            group=JOBSET[0],
            version=JOBSET[1],
            namespace=self.namespace,
            plural="jobsets",
        )
        return found

    def wait_job(self, name: str, predicate: Any, timeout: float = 30.0) -> Any:
        return wait_for(self.batch.list_namespaced_job, name, predicate, timeout=timeout, namespace=self.namespace)

    def pods(self, selector: str = "") -> list[Any]:
        return list(self.core.list_namespaced_pod(self.namespace, label_selector=selector).items)

    def wait_pods(self, selector: str, predicate: Any, timeout: float = 30.0) -> list[Any]:
        """The pods matching `selector` once `predicate(pods)` holds (re-listed on every pod event)."""
        seen: list[list[Any]] = []

        def holds(_changed: Any) -> bool:
            seen[:] = [self.pods(selector)]
            return bool(predicate(seen[0]))

        if holds(None):
            return seen[0]
        wait_for(self.core.list_namespaced_pod, None, holds, timeout=timeout, namespace=self.namespace)
        return seen[0]

    # ------------------------------------------------------------------------ the kubelet's part

    def bind(self, pod: str, node: str = NODE) -> None:
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": pod},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        self.core.create_namespaced_pod_binding(pod, self.namespace, body, _preload_content=False)

    def report_running(self, pod: str) -> None:
        self.core.patch_namespaced_pod_status(
            pod,
            self.namespace,
            {"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}},
        )

    def start(self, pods: list[Any]) -> None:
        """Schedule and run pods, as the scheduler and a kubelet would."""
        for pod in pods:
            if not pod.spec.node_name:
                self.bind(pod.metadata.name)
            self.report_running(pod.metadata.name)

    def report_finished(self, pod: str, phase: str) -> None:
        code = 0 if phase == "Succeeded" else 1
        status = {
            "phase": phase,
            "conditions": [{"type": "Ready", "status": "False"}],
            "containerStatuses": [
                {
                    "name": "node",
                    "ready": False,
                    "restartCount": 0,
                    "image": "pytorch/pytorch",
                    "imageID": "",
                    "state": {"terminated": {"exitCode": code, "reason": "Completed" if code == 0 else "Error"}},
                }
            ],
        }
        self.core.patch_namespaced_pod_status(pod, self.namespace, {"status": status})

    def confirm_termination(self, pod: str) -> None:
        """What the kubelet does once the containers stopped: report the pod Failed (typical in recent
        releases, k8s-apis.md §5.2, unverified in source), then delete it with grace 0."""
        try:
            if self.core.read_namespaced_pod(pod, self.namespace).status.phase not in ("Succeeded", "Failed"):
                self.report_finished(pod, "Failed")
            self.core.delete_namespaced_pod(pod, self.namespace, grace_period_seconds=0)
        except ApiException as error:
            if error.status != 404:
                raise


def replace_jobset(
    custom: kubernetes.client.CustomObjectsApi, namespace: str, name: str, change: Any, attempts: int = 10
) -> Obj:
    """Read the JobSet, apply `change` to its spec, replace it: again from a fresh read on a 409 Conflict
    (`retry.RetryOnConflict`), since the JobSet controller writes the JobSet too (its status, from the moment it
    sees the JobSet: a suspended one gets its `Suspended` condition). An update built from an older read, such as
    the answer to the create, meets that write as a 409 before any webhook sees it (the API server checks the
    resourceVersion before validating admission, `registry/generic/registry/store.go` `Update`). Any other
    answer is raised, for the caller to check."""
    for _ in range(attempts):
        body = copy.deepcopy(custom.get_namespaced_custom_object(*JOBSET, namespace, "jobsets", name))
        change(body["spec"])
        try:
            replaced: Obj = custom.replace_namespaced_custom_object(*JOBSET, namespace, "jobsets", name, body)
            return replaced
        except ApiException as error:
            if error.status != 409:
                raise
    raise AssertionError(f"JobSet {namespace}/{name} changed under each of {attempts} updates")


def immutable_replicated_jobs(error: ApiException, jobset: str) -> Obj:
    """The Status of JobSet v0.12.0's refusal of a change to `spec.replicatedJobs` (`ValidateUpdate` returns
    `apierrors.NewInvalid`, which controller-runtime passes on: 422 Invalid, the cause in the details), checked
    and returned. The lab and the real control plane answer alike (docs/fidelity.md)."""
    answer = answer_of(error)
    status = expect_answer(answer, 422, "Invalid")
    assert status["code"] == 422, answer
    assert status["message"].startswith(
        f'admission webhook "vjobset.kb.io" denied the request: JobSet.jobset.x-k8s.io "{jobset}" is invalid: '
        "spec.replicatedJobs: Invalid value: "
    ), answer
    assert status["message"].endswith(": field is immutable"), answer
    assert [(c["field"], c["reason"]) for c in status["details"]["causes"]] == [
        ("spec.replicatedJobs", "FieldValueInvalid")
    ], answer
    assert status["details"]["kind"] == "JobSet", answer
    return status


def trainjob_selector(name: str) -> str:
    """Kueue's and dispatch's pod selector for a TrainJob (k8s-apis.md §2.1)."""
    return f"jobset.sigs.k8s.io/jobset-name={name}"


def condition(obj: Any, kind: str) -> Obj | None:
    status = obj.get("status") if isinstance(obj, dict) else None
    for entry in (status or {}).get("conditions") or ():
        if entry.get("type") == kind:
            return dict(entry)
    return None


def job_condition(job: Any, kind: str) -> Any:
    for entry in (job.status.conditions if job is not None and job.status else None) or ():
        if entry.type == kind:
            return entry
    return None

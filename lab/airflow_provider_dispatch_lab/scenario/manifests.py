"""Sample objects for the lab: nodes, a Trainer runtime, dispatch TrainJobs, Kueue queues.

They are shaped like the upstream examples (Trainer's `torch-distributed` ClusterTrainingRuntime in
`kubeflow/trainer:manifests/base/runtimes/`, Kueue's single-ClusterQueue setup in `kueue:site/static/examples/`)
so that the demo, the drills and the tests exercise the same shapes a cluster would hold.
"""

from __future__ import annotations

from typing import Any

from airflow_provider_dispatch.dispatch.vocabulary import (
    ANNOTATION_ADMISSION,
    LABEL_JOB_ID,
    LABEL_SUBMISSION,
)

Obj = dict[str, Any]

TRAINER_API = "trainer.kubeflow.org/v1alpha1"
KUEUE_API = "kueue.x-k8s.io/v1beta2"
DEFAULT_RUNTIME = "torch-distributed"


def node(
    name: str, *, cpu: str = "32", memory: str = "128Gi", gpus: int = 0, labels: dict[str, str] | None = None
) -> Obj:
    """A Ready node as a kubelet registers it (`pkg/kubelet/kubelet_node_status.go` `initialNode`)."""
    capacity = {"cpu": cpu, "memory": memory, "pods": "110"}
    if gpus:
        capacity["nvidia.com/gpu"] = str(gpus)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", **(labels or {})},
        },
        "spec": {},
        "status": {
            "capacity": capacity,
            "allocatable": dict(capacity),
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "message": "kubelet is posting ready status",
                }
            ],
            "addresses": [{"type": "Hostname", "address": name}],
        },
    }


def pod(
    name: str,
    *,
    node_name: str | None = None,
    labels: dict[str, str] | None = None,
    grace_seconds: int | None = None,
    finalizers: list[str] | None = None,
) -> Obj:
    spec: Obj = {"containers": [{"name": "main", "image": "busybox:1.36", "command": ["sleep", "infinity"]}]}
    if node_name:
        spec["nodeName"] = node_name
    if grace_seconds is not None:
        spec["terminationGracePeriodSeconds"] = grace_seconds
    metadata: Obj = {"name": name, "labels": dict(labels or {})}
    if finalizers:
        metadata["finalizers"] = list(finalizers)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def cluster_training_runtime(
    name: str = DEFAULT_RUNTIME, *, grace_seconds: int = 30, pod_replacement_policy: str | None = "Failed"
) -> Obj:
    """A PyTorch runtime with one replicated job `node`, as Trainer's `torch-distributed`, but with the Job's
    `podReplacementPolicy: Failed` that dispatch's runtime policy requires (dispatch/policy.py). Upstream's
    runtimes leave it unset, so the Job default `TerminatingOrFailed` applies: pass None for that."""
    job_spec: Obj = {
        "template": {
            "spec": {
                "terminationGracePeriodSeconds": grace_seconds,
                "containers": [
                    {
                        "name": "node",
                        "image": "pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime",
                        "command": ["torchrun", "/workspace/train.py"],
                    }
                ],
            }
        }
    }
    if pod_replacement_policy is not None:
        job_spec["podReplacementPolicy"] = pod_replacement_policy
    return {
        "apiVersion": TRAINER_API,
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": name, "labels": {"trainer.kubeflow.org/framework": "torch"}},
        "spec": {
            "mlPolicy": {"numNodes": 1, "torch": {}},
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "template": {
                                "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
                                "spec": job_spec,
                            },
                        }
                    ]
                }
            },
        },
    }


def trainjob(
    name: str,
    *,
    job_id: str | None = None,
    submission: str = "1",
    num_nodes: int = 2,
    runtime: str = DEFAULT_RUNTIME,
    suspend: bool | None = True,
    queue: str | None = None,
    admission: int | None = None,
) -> Obj:
    """A TrainJob managed by dispatch: the job-id and submission labels on the object."""
    labels = {LABEL_JOB_ID: job_id or name, LABEL_SUBMISSION: submission}
    if queue:
        labels["kueue.x-k8s.io/queue-name"] = queue
    metadata: Obj = {"name": name, "labels": labels}
    if admission is not None:
        metadata["annotations"] = {ANNOTATION_ADMISSION: str(admission)}
    spec: Obj = {
        "runtimeRef": {"name": runtime, "apiGroup": "trainer.kubeflow.org", "kind": "ClusterTrainingRuntime"},
        "trainer": {"numNodes": num_nodes},
    }
    if suspend is not None:
        spec["suspend"] = suspend
    return {"apiVersion": TRAINER_API, "kind": "TrainJob", "metadata": metadata, "spec": spec}


def cluster_queue(
    name: str = "cluster-queue",
    *,
    cpu: str = "64",
    memory: str = "256Gi",
    admission_checks: list[str] | None = None,
    flavor: str = "default-flavor",
) -> Obj:
    spec: Obj = {
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": ["cpu", "memory"],
                "flavors": [
                    {
                        "name": flavor,
                        "resources": [
                            {"name": "cpu", "nominalQuota": cpu},
                            {"name": "memory", "nominalQuota": memory},
                        ],
                    }
                ],
            }
        ],
    }
    if admission_checks:
        spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": check} for check in admission_checks]}
    return {"apiVersion": KUEUE_API, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def local_queue(name: str = "user-queue", *, cluster_queue_name: str = "cluster-queue") -> Obj:
    return {
        "apiVersion": KUEUE_API,
        "kind": "LocalQueue",
        "metadata": {"name": name},
        "spec": {"clusterQueue": cluster_queue_name},
    }


def admission_check(name: str = "dispatch-drained", *, controller: str = "dispatch.phpboyscout.uk/drained") -> Obj:
    return {
        "apiVersion": KUEUE_API,
        "kind": "AdmissionCheck",
        "metadata": {"name": name},
        "spec": {"controllerName": controller},
    }


def quota_reserved_status(check: str, at: str, *, cluster_queue: str = "cluster-queue", count: int = 1) -> Obj:
    """A Workload's status once Kueue reserved quota for it in `cluster_queue` at `at`, with the admission check
    `check` still Pending: what the admission check controller acts on (one pod set `node` of `count` pods)."""
    return {
        "conditions": [
            {
                "type": "QuotaReserved",
                "status": "True",
                "reason": "QuotaReserved",
                "message": f"Quota reserved in ClusterQueue {cluster_queue}",
                "lastTransitionTime": at,
            }
        ],
        "admission": {
            "clusterQueue": cluster_queue,
            "podSetAssignments": [
                {"name": "node", "flavors": {"cpu": "default-flavor"}, "resourceUsage": {"cpu": "1"}, "count": count}
            ],
        },
        "admissionChecks": [{"name": check, "state": "Pending", "message": "", "lastTransitionTime": at}],
    }

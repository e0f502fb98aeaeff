"""The pods of a benchmark namespace: one TrainJob's ranks, and the neighbours of other TrainJobs around them.

Each pod is shaped like a running rank of a Trainer v2 TrainJob as the API server stores it, so that the bytes a
list carries and the work a client does to decode it are those of a real cluster, not of a toy pod:

* metadata as the Job controller writes it for a JobSet's child Job (k8s-apis.md §2.1: the JobSet labels and the
  same keys as annotations, the Job's `batch.kubernetes.io/*` labels, the `job-tracking` finalizer, the controller
  ownerReference to the Job), plus dispatch's runtime-patch labels (DESIGN §2) on dispatch-managed jobs;
* managedFields for the two writers every such pod has: kube-controller-manager's create (`Update`) and the
  kubelet's status (`Update`, subresource `status`), abridged to their top-level field sets;
* the spec Trainer's `torch-distributed` runtime gives a rank (`kubeflow/trainer:manifests/base/runtimes/`:
  torchrun, the `PET_*` environment), with the service-account token volume the ServiceAccount admission plugin
  adds (`plugin/pkg/admission/serviceaccount/admission.go`, `kube-api-access-*`);
* the status the kubelet reports for a running container (`pkg/kubelet/status/status_manager.go`): conditions,
  IPs, start time and one container status.

The lab's defaulting and admission (tolerations, priority, imagePullPolicy, ...) add the rest on create, as the
real API server's do. A pod is about 5 KB of JSON as stored; `docs/performance.md` gives the measured size.

Strings in a template may hold `{i}` (the pod's index) and `{g}` (its group: index // group size), which the
lab's bulk seeding (`lab/apiserver/seeding.py` `render`) fills in.
"""

from __future__ import annotations

from typing import Any

from airflow_provider_dispatch.dispatch import vocabulary as v

Obj = dict[str, Any]

STARTED = "2026-08-21T10:00:00Z"
IMAGE = "pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime"
CONDITIONS = ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")
IMAGE_ID = "docker.io/pytorch/pytorch@sha256:5e2c0bd5fbd7b0a9e4c4d6fd4a3f2a6a8a1d5c0b9e8f7a6b5c4d3e2f1a0b9c8d"


def _fields(*keys: str) -> Obj:
    return {f"f:{key}": {} for key in keys}


def pod_template(
    trainjob: str,
    *,
    job_id: str | None,
    submission: str = "1",
    admission: int = 1,
    rank: str = "{i}",
    node: str = "node-{g}",
    name: str | None = None,
    phase: str = "Running",
) -> Obj:
    """A running rank of `trainjob` (its JobSet has the TrainJob's name). `job_id` None: not managed by dispatch."""
    job = f"{trainjob}-node-0"
    jobset_keys = {
        v.LABEL_JOBSET_NAME: trainjob,
        "jobset.sigs.k8s.io/jobset-uid": "0b6d3c6e-2f4a-4e0f-9d7a-5f2c8e1b4a90",
        "jobset.sigs.k8s.io/replicatedjob-name": "node",
        "jobset.sigs.k8s.io/replicatedjob-replicas": "1",
        "jobset.sigs.k8s.io/global-replicas": "1",
        "jobset.sigs.k8s.io/job-index": "0",
        "jobset.sigs.k8s.io/job-global-index": "0",
        "jobset.sigs.k8s.io/job-key": "4f1c5b7e9d2a8c3f6b0e1d4a7c9f2b5e8d1a4c7f",
        "jobset.sigs.k8s.io/restart-attempt": "0",
        "jobset.sigs.k8s.io/group-name": "default",
        "jobset.sigs.k8s.io/group-replicas": "1",
        "jobset.sigs.k8s.io/job-group-index": "0",
    }
    labels = {
        **jobset_keys,
        "batch.kubernetes.io/controller-uid": "7d3f0a2c-1b4e-4c6d-8e9f-0a1b2c3d4e5f",
        "batch.kubernetes.io/job-name": job,
        "controller-uid": "7d3f0a2c-1b4e-4c6d-8e9f-0a1b2c3d4e5f",
        "job-name": job,
        "batch.kubernetes.io/job-completion-index": rank,
        "trainer.kubeflow.org/trainjob-ancestor-step": "trainer",
    }
    if job_id is not None:
        labels |= {
            v.LABEL_JOB_ID: job_id,
            v.LABEL_SUBMISSION: submission,
            v.POD_LABEL_ADMISSION: str(admission),
        }
    annotations = {**jobset_keys, "batch.kubernetes.io/job-completion-index": rank}
    env = [
        {"name": "PET_NNODES", "value": "16"},
        {"name": "PET_NPROC_PER_NODE", "value": "8"},
        {"name": "PET_NODE_RANK", "value": rank},
        {"name": "PET_MASTER_ADDR", "value": f"{job}-0.{trainjob}"},
        {"name": "PET_MASTER_PORT", "value": "29400"},
        {
            "name": "JOB_COMPLETION_INDEX",
            "valueFrom": {
                "fieldRef": {
                    "apiVersion": "v1",
                    "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']",
                }
            },
        },
    ]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name or f"{job}-{rank}-x7k2p",
            "generateName": f"{job}-{rank}-",
            "labels": labels,
            "annotations": annotations,
            "finalizers": ["batch.kubernetes.io/job-tracking"],
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": job,
                    "uid": "7d3f0a2c-1b4e-4c6d-8e9f-0a1b2c3d4e5f",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
            "managedFields": [
                {
                    "manager": "kube-controller-manager",
                    "operation": "Update",
                    "apiVersion": "v1",
                    "time": STARTED,
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {
                        "f:metadata": {
                            **_fields("annotations", "generateName", "finalizers"),
                            "f:labels": _fields(*sorted(labels)),
                            "f:ownerReferences": {},
                        },
                        "f:spec": _fields(
                            "containers",
                            "dnsPolicy",
                            "enableServiceLinks",
                            "hostname",
                            "restartPolicy",
                            "schedulerName",
                            "securityContext",
                            "subdomain",
                            "terminationGracePeriodSeconds",
                        ),
                    },
                },
                {
                    "manager": "kubelet",
                    "operation": "Update",
                    "apiVersion": "v1",
                    "time": STARTED,
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {
                        "f:status": _fields(
                            "conditions",
                            "containerStatuses",
                            "hostIP",
                            "hostIPs",
                            "phase",
                            "podIP",
                            "podIPs",
                            "startTime",
                        )
                    },
                    "subresource": "status",
                },
            ],
        },
        "spec": {
            "containers": [
                {
                    "name": "node",
                    "image": IMAGE,
                    "command": ["torchrun", "/workspace/train.py"],
                    "args": ["--epochs", "90", "--checkpoint-dir", "/checkpoints"],
                    "env": env,
                    "ports": [{"name": "c10d", "containerPort": 29400, "protocol": "TCP"}],
                    "resources": {
                        "limits": {"cpu": "32", "memory": "256Gi", "nvidia.com/gpu": "8"},
                        "requests": {"cpu": "32", "memory": "256Gi", "nvidia.com/gpu": "8"},
                    },
                    "volumeMounts": [
                        {"name": "checkpoints", "mountPath": "/checkpoints"},
                        {
                            "name": "kube-api-access-4m9qz",
                            "readOnly": True,
                            "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                        },
                    ],
                }
            ],
            "volumes": [
                {"name": "checkpoints", "persistentVolumeClaim": {"claimName": f"{trainjob}-checkpoints"}},
                {
                    "name": "kube-api-access-4m9qz",
                    "projected": {
                        "sources": [
                            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                            {
                                "downwardAPI": {
                                    "items": [
                                        {
                                            "path": "namespace",
                                            "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"},
                                        }
                                    ]
                                }
                            },
                        ],
                        "defaultMode": 420,
                    },
                },
            ],
            "restartPolicy": "OnFailure",
            "terminationGracePeriodSeconds": 30,
            "serviceAccountName": "default",
            "serviceAccount": "default",
            "hostname": f"{job}-{rank}",
            "subdomain": trainjob,
            "nodeName": node,
        },
        "status": {
            "phase": phase,
            "conditions": [
                {"type": condition, "status": "True", "lastProbeTime": None, "lastTransitionTime": STARTED}
                for condition in CONDITIONS
            ],
            "hostIP": "10.0.0.12",
            "hostIPs": [{"ip": "10.0.0.12"}],
            "podIP": "10.244.3.17",
            "podIPs": [{"ip": "10.244.3.17"}],
            "startTime": STARTED,
            "containerStatuses": [
                {
                    "name": "node",
                    "state": {"running": {"startedAt": STARTED}},
                    "lastState": {},
                    "ready": True,
                    "restartCount": 0,
                    "image": IMAGE,
                    "imageID": IMAGE_ID,
                    "containerID": "containerd://9f8e7d6c5b4a39281706f5e4d3c2b1a09f8e7d6c5b4a39281706f5e4d3c2b1a0",
                    "started": True,
                }
            ],
            "qosClass": "Guaranteed",
        },
    }


def neighbour_template() -> Obj:
    """Ranks of other dispatch-managed TrainJobs (`bg-{g}`, one per seeding group): they carry the same label
    keys as the job's pods with other values, so both server-side selectors have pods to skip."""
    return pod_template("bg-{g}", job_id="bg-{g}", name="bg-{g}-node-0-{i}-x7k2p", node="node-{g}")

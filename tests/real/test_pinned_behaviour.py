"""What the lab was changed to match, seen on the real control plane of the pinned versions (issue 16 item 5).

JobSet v0.12.0 defaults a JobSet on create only and refuses an update that drops a defaulted field with 422
Invalid; Trainer v2.3.0's suspend and resume still reach the JobSet (kubeflow/trainer#3008 does not bite here);
Kueue v0.19.2 waits for the pods to be ready (`PodsReady`). The lab's tests of the same behaviour are in
`tests/cluster/test_workloads_jobset.py` and `tests/cluster/test_kueue_pods_ready.py`; docs/fidelity.md says why
each matters.

Every wait polls the API with a deadline (`wait_for`); nothing sleeps to let the cluster catch up.
"""

from __future__ import annotations

import uuid
from typing import Any

import kubernetes
import pytest
from kubernetes.client.exceptions import ApiException

from airflow_provider_dispatch_lab.real import RealCluster
from airflow_provider_dispatch_lab.real.processes import wait_for
from airflow_provider_dispatch_lab.scenario import manifests
from tests.cluster.workload_steps import immutable_replicated_jobs, replace_jobset

pytestmark = pytest.mark.slow

TRAINER = ("trainer.kubeflow.org", "v1alpha1")
JOBSET = ("jobset.x-k8s.io", "v1alpha2")
KUEUE = ("kueue.x-k8s.io", "v1beta2")


def _unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _runtime(custom: kubernetes.client.CustomObjectsApi) -> str:
    name = _unique("pinned")
    custom.create_cluster_custom_object(
        *TRAINER, "clustertrainingruntimes", manifests.cluster_training_runtime(name, grace_seconds=5)
    )
    return name


def _condition(obj: dict[str, Any] | None, kind: str) -> dict[str, Any] | None:
    for entry in ((obj or {}).get("status") or {}).get("conditions") or ():
        if entry.get("type") == kind:
            return dict(entry)
    return None


def test_a_jobset_update_that_drops_a_defaulted_field_is_refused(
    real_admin: kubernetes.client.ApiClient, real_namespace: str
) -> None:
    custom = kubernetes.client.CustomObjectsApi(real_admin)
    name = _unique("js")
    body = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name},
        "spec": {
            "suspend": True,
            "replicatedJobs": [
                {
                    "name": "worker",
                    "replicas": 1,
                    "template": {
                        "spec": {
                            "parallelism": 1,
                            "completions": 1,
                            "template": {"spec": {"containers": [{"name": "node", "image": "busybox:1.36"}]}},
                        }
                    },
                }
            ],
        },
    }
    created = custom.create_namespaced_custom_object(*JOBSET, real_namespace, "jobsets", body)
    assert created["spec"]["replicatedJobs"][0]["template"]["spec"]["completionMode"] == "Indexed"  # on create

    def drop_completion_mode(spec: dict[str, Any]) -> None:
        del spec["replicatedJobs"][0]["template"]["spec"]["completionMode"]

    # from a fresh read, again on a 409: the JobSet controller writes the JobSet's status meanwhile
    with pytest.raises(ApiException) as refused:
        replace_jobset(custom, real_namespace, name, drop_completion_mode)
    immutable_replicated_jobs(refused.value, name)  # the lab's answer, checked by the same function


def test_trainers_suspend_and_resume_reach_the_jobset(
    real_cluster: RealCluster, real_admin: kubernetes.client.ApiClient, real_namespace: str
) -> None:
    custom = kubernetes.client.CustomObjectsApi(real_admin)
    name = _unique("tj")
    custom.create_namespaced_custom_object(
        *TRAINER,
        real_namespace,
        "trainjobs",
        manifests.trainjob(name, num_nodes=1, runtime=_runtime(custom), suspend=False),
    )

    def jobset_suspend() -> Any:
        try:
            return custom.get_namespaced_custom_object(*JOBSET, real_namespace, "jobsets", name)["spec"].get("suspend")
        except ApiException as error:
            if error.status == 404:
                return None
            raise

    wait_for("the JobSet", lambda: jobset_suspend() is False or None, timeout=60, programs=real_cluster.programs)
    for suspend in (True, False, True):
        custom.patch_namespaced_custom_object(
            *TRAINER, real_namespace, "trainjobs", name, {"spec": {"suspend": suspend}}
        )
        wait_for(
            f"the JobSet with suspend={suspend}",
            lambda wanted=suspend: jobset_suspend() is wanted or None,
            timeout=60,
            programs=real_cluster.programs,
        )


def test_kueue_writes_pods_ready_once_the_pods_run(
    real_cluster: RealCluster, real_admin: kubernetes.client.ApiClient, real_namespace: str
) -> None:
    custom = kubernetes.client.CustomObjectsApi(real_admin)
    flavor, cluster_queue = _unique("rf"), _unique("cq")
    custom.create_cluster_custom_object(
        *KUEUE,
        "resourceflavors",
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": flavor}},
    )
    custom.create_cluster_custom_object(*KUEUE, "clusterqueues", manifests.cluster_queue(cluster_queue, flavor=flavor))
    local_queue = manifests.local_queue("lq", cluster_queue_name=cluster_queue)
    custom.create_namespaced_custom_object(*KUEUE, real_namespace, "localqueues", local_queue)
    name = _unique("tj")
    custom.create_namespaced_custom_object(
        *TRAINER,
        real_namespace,
        "trainjobs",
        manifests.trainjob(name, num_nodes=1, runtime=_runtime(custom), suspend=True, queue="lq"),
    )

    def pods_ready() -> dict[str, Any] | None:
        for workload in custom.list_namespaced_custom_object(*KUEUE, real_namespace, "workloads")["items"]:
            found = _condition(workload, "PodsReady")
            if found is not None and found["status"] == "True":
                return found
        return None

    ready = wait_for("PodsReady=True", pods_ready, timeout=120, programs=real_cluster.programs)
    assert (ready["reason"], ready["message"]) == ("Started", "All pods reached readiness and the workload is running")

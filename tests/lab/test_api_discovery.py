"""Discovery through the official clients: what they and the dynamic client need to find every kind."""

from __future__ import annotations

import kubernetes
import kubernetes_asyncio
import pytest
from kubernetes.dynamic import DynamicClient


def test_version_and_core_versions(api_client: kubernetes.client.ApiClient) -> None:
    version = kubernetes.client.VersionApi(api_client).get_code()
    assert (version.major, version.minor) == ("1", "34")
    assert kubernetes.client.CoreApi(api_client).get_api_versions().versions == ["v1"]


def test_group_list_serves_each_crd_at_its_storage_version(api_client: kubernetes.client.ApiClient) -> None:
    groups = {g.name: g for g in kubernetes.client.ApisApi(api_client).get_api_versions().groups}
    assert [v.version for v in groups["trainer.kubeflow.org"].versions] == ["v1alpha1"]
    assert [v.version for v in groups["jobset.x-k8s.io"].versions] == ["v1alpha2"]
    # Kueue is served at v1beta2 only: the CRDs carry no conversion webhook for the deprecated v1beta1.
    assert [v.version for v in groups["kueue.x-k8s.io"].versions] == ["v1beta2"]
    assert groups["batch"].preferred_version.group_version == "batch/v1"


def test_core_resource_list_has_subresources(api_client: kubernetes.client.ApiClient) -> None:
    resources = {r.name: r for r in kubernetes.client.CoreV1Api(api_client).get_api_resources().resources}
    assert resources["pods"].namespaced is True
    assert resources["nodes"].namespaced is False
    assert "watch" in resources["pods"].verbs
    assert set(resources["pods/status"].verbs) == {"get", "patch", "update"}
    assert resources["pods/binding"].verbs == ["create"]
    assert {"namespaces", "events", "nodes/status"} <= set(resources)


@pytest.mark.parametrize(
    ("api_version", "kind", "plural", "namespaced"),
    [
        ("trainer.kubeflow.org/v1alpha1", "TrainJob", "trainjobs", True),
        ("trainer.kubeflow.org/v1alpha1", "ClusterTrainingRuntime", "clustertrainingruntimes", False),
        ("trainer.kubeflow.org/v1alpha1", "TrainingRuntime", "trainingruntimes", True),
        ("jobset.x-k8s.io/v1alpha2", "JobSet", "jobsets", True),
        ("kueue.x-k8s.io/v1beta2", "Workload", "workloads", True),
        ("kueue.x-k8s.io/v1beta2", "AdmissionCheck", "admissionchecks", False),
        ("kueue.x-k8s.io/v1beta2", "ClusterQueue", "clusterqueues", False),
        ("kueue.x-k8s.io/v1beta2", "LocalQueue", "localqueues", True),
        ("batch/v1", "Job", "jobs", True),
        ("coordination.k8s.io/v1", "Lease", "leases", True),
    ],
)
def test_dynamic_client_discovers(
    api_client: kubernetes.client.ApiClient, api_version: str, kind: str, plural: str, namespaced: bool
) -> None:
    resource = DynamicClient(api_client).resources.get(api_version=api_version, kind=kind)
    assert (resource.name, resource.namespaced) == (plural, namespaced)


async def test_async_client_discovery(async_api_client: kubernetes_asyncio.client.ApiClient) -> None:
    groups = await kubernetes_asyncio.client.ApisApi(async_api_client).get_api_versions()
    assert "trainer.kubeflow.org" in {g.name for g in groups.groups}
    resources = await kubernetes_asyncio.client.CustomObjectsApi(async_api_client).get_api_resources(
        "kueue.x-k8s.io", "v1beta2"
    )
    assert {"workloads", "workloads/status", "admissionchecks/status"} <= {r.name for r in resources.resources}


def test_unknown_group_is_404(api_client: kubernetes.client.ApiClient) -> None:
    with pytest.raises(kubernetes.client.ApiException) as raised:
        kubernetes.client.CustomObjectsApi(api_client).list_cluster_custom_object(
            "kueue.x-k8s.io", "v1beta1", "workloads"
        )
    assert raised.value.status == 404

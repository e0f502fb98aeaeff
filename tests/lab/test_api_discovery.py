"""Discovery through the official clients: what they and the dynamic client need to find every kind."""

from __future__ import annotations

import kubernetes
import kubernetes_asyncio
import pytest
from api_answers import expect_answer
from kubernetes.dynamic import DynamicClient
from servers import SERVERS, Server

API_SERVERS = SERVERS


def test_version_and_core_versions(server: Server, api_client: kubernetes.client.ApiClient) -> None:
    version = kubernetes.client.VersionApi(api_client).get_code()
    # The lab answers as the Kubernetes release its behaviour was read from; the real one is the pinned build
    # (controlplane/versions). docs/fidelity.md, "Differential results".
    assert (version.major, version.minor) == server.expect(lab=("1", "34"), real=("1", "36"))
    assert kubernetes.client.CoreApi(api_client).get_api_versions().versions == ["v1"]


def test_group_list_serves_each_crd_at_its_storage_version(
    server: Server, api_client: kubernetes.client.ApiClient
) -> None:
    groups = {g.name: g for g in kubernetes.client.ApisApi(api_client).get_api_versions().groups}
    assert [v.version for v in groups["trainer.kubeflow.org"].versions] == ["v1alpha1"]
    assert [v.version for v in groups["jobset.x-k8s.io"].versions] == ["v1alpha2"]
    # The lab serves Kueue at v1beta2 only: its CRDs carry no conversion webhook for the deprecated v1beta1. Real
    # Kueue v0.19 serves both, converting v1beta1 through its webhook (docs/fidelity.md).
    assert [v.version for v in groups["kueue.x-k8s.io"].versions] == server.expect(
        lab=["v1beta2"], real=["v1beta2", "v1beta1"]
    )
    assert groups["kueue.x-k8s.io"].preferred_version.version == "v1beta2"
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


@pytest.mark.parametrize(("group", "version"), [("kueue.x-k8s.io", "v1alpha9"), ("unknown.example.com", "v1")])
def test_unknown_group_is_404(api_client: kubernetes.client.ApiClient, group: str, version: str) -> None:
    with pytest.raises(kubernetes.client.ApiException) as raised:
        kubernetes.client.CustomObjectsApi(api_client).list_cluster_custom_object(group, version, "workloads")
    expect_answer(raised.value, 404)


def test_kueue_v1beta1_is_served_by_the_real_kueue_only(
    server: Server, api_client: kubernetes.client.ApiClient
) -> None:
    """The deprecated v1beta1: 404 from the lab (no conversion webhook), listed by the real Kueue (docs/fidelity.md)."""
    custom = kubernetes.client.CustomObjectsApi(api_client)
    if server.name == "lab":
        with pytest.raises(kubernetes.client.ApiException) as raised:
            custom.list_cluster_custom_object("kueue.x-k8s.io", "v1beta1", "workloads")
        expect_answer(raised.value, 404)
    else:
        listed = custom.list_cluster_custom_object("kueue.x-k8s.io", "v1beta1", "workloads")
        assert listed["apiVersion"] == "kueue.x-k8s.io/v1beta1"

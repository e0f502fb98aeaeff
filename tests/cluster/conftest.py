"""Fixtures for tests that need a simulated cluster: a lab with controllers.

`cluster_lab` builds a fresh lab with the controller factories a test module names in its `CONTROLLERS` list
(module attribute), so each module runs exactly the controllers its behaviour depends on. A controller task that
crashed fails the test at teardown.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import kubernetes
import pytest

from airflow_provider_dispatch_lab.runtime import Lab
from airflow_provider_dispatch_lab.scenario.scenario import Scenario

from .kueue_steps import Kueue
from .nodes_support import Zone
from .workload_steps import Workloads


@pytest.fixture(scope="module")
def cluster_lab(request: pytest.FixtureRequest) -> Iterator[Lab]:
    factories = getattr(request.module, "CONTROLLERS", ())
    speed = getattr(request.module, "LAB_SPEED", 100.0)
    with Lab(speed=speed, controllers=tuple(factories)) as lab:
        yield lab
        crashes = lab.call(lambda: list(lab.inner.crashes))
        assert not crashes, f"lab controllers crashed: {crashes}"


@pytest.fixture(scope="module")
def cluster_kubeconfig(cluster_lab: Lab) -> Path:
    return cluster_lab.kubeconfig("cluster")


@pytest.fixture(scope="module")
def cluster_api(cluster_kubeconfig: Path) -> Iterator[kubernetes.client.ApiClient]:
    client = kubernetes.config.new_client_from_config(config_file=str(cluster_kubeconfig))
    yield client
    client.close()


@pytest.fixture
def cluster_namespace(cluster_api: kubernetes.client.ApiClient) -> str:
    import uuid

    name = f"c-{uuid.uuid4().hex[:10]}"
    kubernetes.client.CoreV1Api(cluster_api).create_namespace({"metadata": {"name": name}})
    return name


@pytest.fixture(scope="module")
def scenario(cluster_lab: Lab) -> Iterator[Scenario]:
    """The lab's scenario controls (nodes, machines, time), for the module's lab."""
    with Scenario(cluster_lab) as running:
        yield running


@pytest.fixture
def core(cluster_api: kubernetes.client.ApiClient) -> kubernetes.client.CoreV1Api:
    """The official core client on the module's lab."""
    return kubernetes.client.CoreV1Api(cluster_api)


@pytest.fixture
def zone(scenario: Scenario) -> Zone:
    """A zone of the test's own: the node names and zone label it gives are the test's alone."""
    return Zone(scenario)


@pytest.fixture
def workloads(cluster_api: kubernetes.client.ApiClient, cluster_namespace: str) -> Workloads:
    """The official clients for the workload objects, in the test's namespace."""
    return Workloads(cluster_api, cluster_namespace)


@pytest.fixture
def kueue(cluster_api: kubernetes.client.ApiClient, cluster_namespace: str, cluster_lab: Lab) -> Iterator[Kueue]:
    """The official clients in the test's namespace, with Kueue's objects and the lab's Kueue scenario controls."""
    steps = Kueue(cluster_api, cluster_namespace, cluster_lab)
    yield steps
    steps.close()

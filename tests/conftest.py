"""Shared fixtures: one lab per test session, reached over real HTTP through kubeconfigs.

Every test works in a namespace of its own, so tests do not see each other's objects although they share the
lab (and its one global resourceVersion, which is what a real cluster has too).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import kubernetes
import kubernetes_asyncio
import pytest

from airflow_provider_dispatch.lab.runtime import Lab


@pytest.fixture(scope="session")
def lab() -> Iterator[Lab]:
    with Lab(speed=100.0) as running:
        yield running


@pytest.fixture(scope="session")
def kubeconfig(lab: Lab) -> Path:
    return lab.kubeconfig()


@pytest.fixture(scope="session")
def api_client(kubeconfig: Path) -> Iterator[kubernetes.client.ApiClient]:
    client = kubernetes.config.new_client_from_config(config_file=str(kubeconfig))
    yield client
    client.close()


@pytest.fixture(scope="session")
def core_v1(api_client: kubernetes.client.ApiClient) -> kubernetes.client.CoreV1Api:
    return kubernetes.client.CoreV1Api(api_client)


@pytest.fixture(scope="session")
def custom_objects(api_client: kubernetes.client.ApiClient) -> kubernetes.client.CustomObjectsApi:
    return kubernetes.client.CustomObjectsApi(api_client)


@pytest.fixture
async def async_api_client(kubeconfig: Path) -> AsyncIterator[kubernetes_asyncio.client.ApiClient]:
    client = await kubernetes_asyncio.config.new_client_from_config(config_file=str(kubeconfig))
    async with client:
        yield client


@pytest.fixture
def namespace(core_v1: kubernetes.client.CoreV1Api) -> str:
    name = f"t-{uuid.uuid4().hex[:10]}"
    core_v1.create_namespace({"metadata": {"name": name}})
    return name

"""Shared fixtures: one lab per test session, reached over real HTTP through kubeconfigs; and, for the tests that
check API semantics, the real control plane too (`servers.py`).

Every test works in a namespace of its own, so tests do not see each other's objects although they share the
lab (and its one global resourceVersion, which is what a real cluster has too).

A module that sets `API_SERVERS = ("lab", "real")` runs each of its tests against both API servers (a test that
asks for the `lab` fixture itself uses a lab control, and runs against the lab only): the fixtures
below (`server`, `kubeconfig`, `api_client`, `core_v1`, `custom_objects`, `async_api_client`, `namespace`) then
reach the lab's server or the real one. The real control plane is one per session (`real_cluster`), shared with
`tests/real/`.
"""

from __future__ import annotations

import socket
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import kubernetes
import kubernetes_asyncio
import pytest
import pytest_timeout
from servers import SERVERS, Server

from airflow_provider_dispatch_lab.real import RealCluster
from airflow_provider_dispatch_lab.real.binaries import locate
from airflow_provider_dispatch_lab.runtime import Lab, write_kubeconfig
from airflow_provider_dispatch_lab.scenario import manifests

FIXTURE_PHASE_TIMEOUT = 900.0
"""Seconds a test's setup (or its teardown) may take before pytest-timeout dumps every thread's stack and fails
it: a hang guard for the fixtures, apart from the test's own (`timeout` in pyproject.toml, or its marker), which
with `timeout_func_only` counts the test function alone. Otherwise whichever test first asks for a session fixture
(the real control plane, an Airflow deployment: minutes on a loaded machine) would pay its start out of its own
300 s, and in a random order that is any of them. Each fixture's waits have their own bounds; this only catches
what hangs."""


def _fixture_phase(item: pytest.Item) -> Iterator[None]:
    """Arm pytest-timeout's timer (its `pytest_timeout_set_timer` hook, same method) around one fixture phase."""
    settings = pytest_timeout._get_item_settings(item)
    hooks = item.config.pluginmanager.hook
    if not settings.timeout:
        yield
        return
    phase = settings._replace(timeout=max(FIXTURE_PHASE_TIMEOUT, settings.timeout))
    hooks.pytest_timeout_set_timer(item=item, settings=phase)
    try:
        yield
    finally:
        hooks.pytest_timeout_cancel_timer(item=item)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    yield from _fixture_phase(item)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    yield from _fixture_phase(item)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    servers = getattr(metafunc.module, "API_SERVERS", None)
    if servers and "server" in metafunc.fixturenames:
        unknown = set(servers) - set(SERVERS)
        if unknown:
            raise pytest.UsageError(f"{metafunc.module.__name__}: unknown API servers {sorted(unknown)}")
        # A test that uses a lab control (its clock, its store) checks the lab alone.
        chosen = ["lab"] if "lab" in metafunc.fixturenames else list(servers)
        metafunc.parametrize("server", chosen, indirect=True, scope="session")


@pytest.fixture(scope="session")
def lab() -> Iterator[Lab]:
    with Lab(speed=100.0) as running:
        yield running


@pytest.fixture(scope="session")
def real_cluster() -> Iterator[RealCluster]:
    """The real control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, JobSet, Trainer,
    Kueue) with two hollow nodes (the real kubelet on simulated processes). The build, if this machine has none, is
    scripts/test's job: a fixture's time is bounded by pytest-timeout."""
    with RealCluster(build=locate(build=False), nodes=("node-1", "node-2")) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def server(request: pytest.FixtureRequest) -> Server:
    """The API server of this test: the lab unless the module asks for both (`API_SERVERS`)."""
    name = getattr(request, "param", "lab")
    if name == "lab":
        lab: Lab = request.getfixturevalue("lab")
        return Server("lab", lab.kubeconfig(), lab=lab)
    cluster: RealCluster = request.getfixturevalue("real_cluster")
    config = cluster.kubeconfig("admin")
    # The TrainJobs of the conformance tests name the default runtime, and Trainer's webhook looks it up.
    client = kubernetes.config.new_client_from_config(config_file=str(config))
    try:
        kubernetes.client.CustomObjectsApi(client).create_cluster_custom_object(
            "trainer.kubeflow.org", "v1alpha1", "clustertrainingruntimes", manifests.cluster_training_runtime()
        )
    except kubernetes.client.ApiException as error:
        if error.status != 409:
            raise
    finally:
        client.close()
    return Server("real", config, real=cluster)


@pytest.fixture(scope="session")
def closed_port_kubeconfig(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A kubeconfig for a loopback port nothing listens on: connection refused. Any token does: no request
    gets as far as sending one."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return write_kubeconfig(tmp_path_factory.mktemp("closed") / "kubeconfig", f"http://127.0.0.1:{port}", "token")


@pytest.fixture(scope="session")
def kubeconfig(server: Server) -> Path:
    return server.kubeconfig


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
def namespace(core_v1: kubernetes.client.CoreV1Api, server: Server) -> Iterator[str]:
    name = f"t-{uuid.uuid4().hex[:10]}"
    core_v1.create_namespace({"metadata": {"name": name}})
    yield name
    if server.name == "real":
        # The real controllers act on what a test leaves (Trainer builds JobSets, Jobs make pods that the
        # nodes' kubelets run): the namespace controller removes it all.
        core_v1.delete_namespace(name)

"""The real tier: the real control plane of the session (`real_cluster`, tests/conftest.py), reached through the
official client as one of the lab's identities.

etcd, kube-apiserver, kube-controller-manager, kube-scheduler, JobSet, Trainer and Kueue as built by
`controlplane/build` (`scripts/test` runs it and exports `DISPATCH_CONTROLPLANE_BIN`; without that variable the
fixture asks the build for its cached folder, and fails with what to run if there is none). The nodes are the
real kubelets of hollow machines (lab/real/machine.py). Teardown stops every program's process group, so nothing is
left running.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import kubernetes
import pytest

from airflow_provider_dispatch_lab.real import RealCluster

from .deploy_steps import deploy_tools
from .steps import RealSteps


def client_for(cluster: RealCluster, identity: str = "admin") -> kubernetes.client.ApiClient:
    """An official-client ApiClient from the identity's kubeconfig (the caller closes it)."""
    return kubernetes.config.new_client_from_config(config_file=str(cluster.kubeconfig(identity)))


@pytest.fixture(scope="session")
def tools() -> Path:
    """The folder with the pinned helm and kustomize (controlplane/deploy-tools/build)."""
    return deploy_tools()


@pytest.fixture(scope="session")
def real_admin(real_cluster: RealCluster) -> Iterator[kubernetes.client.ApiClient]:
    client = client_for(real_cluster)
    yield client
    client.close()


@pytest.fixture
def real_namespace(real_admin: kubernetes.client.ApiClient) -> str:
    name = f"r-{uuid.uuid4().hex[:10]}"
    kubernetes.client.CoreV1Api(real_admin).create_namespace({"metadata": {"name": name}})
    return name


@pytest.fixture
def steps(real_cluster: RealCluster, real_admin: kubernetes.client.ApiClient) -> Iterator[RealSteps]:
    """A scenario's namespace and nodes of a zone of its own (`steps.py`); its nodes and namespace go after it."""
    made = RealSteps(real_cluster, real_admin)
    yield made
    made.close()

"""Differential: the real kubectl's `auth can-i`, `auth can-i --list`, `auth whoami` and `get crd` against the real
API server (v1.36.3) and against the lab (TLS and RBAC on, the same identities from the same manifests).

The answers must be the same, but for what names one server's objects (a service account's uid, a token's id) and
the lab serving a subset of the real cluster's CRDs.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_dispatch.lab.apiserver.auth.rbac_setup import IDENTITIES
from airflow_provider_dispatch.lab.real import RealCluster
from airflow_provider_dispatch.lab.real.binaries import locate
from airflow_provider_dispatch.lab.runtime import Lab

Kubectl = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture(scope="module")
def rbac_lab() -> Iterator[Lab]:
    with Lab(speed=100.0, rbac=True, tls=True) as lab:
        yield lab


@pytest.fixture(scope="module")
def kubeconfigs(real_cluster: RealCluster, rbac_lab: Lab) -> dict[str, Callable[[str], Path]]:
    return {"real": real_cluster.kubeconfig, "lab": rbac_lab.kubeconfig_for}


@pytest.fixture
def kubectl(tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    program = locate(build=False).program("kubectl")
    home = tmp_path_factory.mktemp("kubectl-home")

    def run(kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "KUBECONFIG": str(kubeconfig), "HOME": str(home)}
        return subprocess.run([program, *args], env=env, capture_output=True, text=True, timeout=120, check=False)

    return run


def both(kubeconfigs: dict[str, Callable[[str], Path]], kubectl: Kubectl, identity: str, *args: str) -> list[Any]:
    return [kubectl(kubeconfigs[server](identity), *args) for server in ("real", "lab")]


@pytest.mark.parametrize(
    ("identity", "question"),
    [
        ("admin", ["delete", "nodes"]),
        ("writer", ["patch", "trainjobs.trainer.kubeflow.org", "-n", "ml"]),
        ("reader", ["patch", "trainjobs.trainer.kubeflow.org", "-n", "ml"]),
        ("reader", ["create", "namespaces"]),
        ("no-nodes", ["get", "nodes"]),
        ("controller", ["patch", "workloads.kueue.x-k8s.io", "--subresource", "status", "-n", "ml"]),
        ("reader", ["get", "/metrics"]),
    ],
)
def test_can_i_answers_as_the_real_server(
    kubeconfigs: dict[str, Callable[[str], Path]], kubectl: Kubectl, identity: str, question: list[str]
) -> None:
    real, lab = both(kubeconfigs, kubectl, identity, "auth", "can-i", *question)
    assert (lab.stdout, lab.returncode, lab.stderr) == (real.stdout, real.returncode, real.stderr)


@pytest.mark.parametrize("identity", ["reader", "no-nodes", "controller"])
def test_can_i_list_lists_the_real_servers_rules(
    kubeconfigs: dict[str, Callable[[str], Path]], kubectl: Kubectl, identity: str
) -> None:
    real, lab = both(kubeconfigs, kubectl, identity, "auth", "can-i", "--list", "-n", "default")
    assert real.returncode == lab.returncode == 0, real.stderr + lab.stderr

    def rows(text: str) -> list[tuple[str, ...]]:
        return sorted(tuple(re.split(r"\s{2,}", line.strip())) for line in text.splitlines()[1:])

    assert rows(lab.stdout) == rows(real.stdout)


@pytest.mark.parametrize("identity", IDENTITIES)
def test_whoami_is_the_real_servers_but_for_uids_and_token_ids(
    kubeconfigs: dict[str, Callable[[str], Path]], kubectl: Kubectl, identity: str
) -> None:
    real, lab = both(kubeconfigs, kubectl, identity, "auth", "whoami", "-o", "json")

    def shape(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
        assert done.returncode == 0, done.stderr
        info = json.loads(done.stdout)["status"]["userInfo"]
        masked = {key: [value[:4] for value in values] for key, values in (info.get("extra") or {}).items()}
        uid = info.get("uid", "")
        return {**info, "uid": uid if identity == "admin" else bool(uid), "extra": masked}

    assert shape(lab) == shape(real)


def test_get_crd_reads_as_on_the_real_server(kubeconfigs: dict[str, Callable[[str], Path]], kubectl: Kubectl) -> None:
    real, lab = both(kubeconfigs, kubectl, "admin", "get", "crd")
    assert real.returncode == lab.returncode == 0, real.stderr + lab.stderr
    header = [re.split(r"\s{2,}", done.stdout.splitlines()[0].strip()) for done in (real, lab)]
    assert header[0] == header[1] == ["NAME", "CREATED AT"]
    names = [{line.split()[0] for line in done.stdout.splitlines()[1:]} for done in (real, lab)]
    assert names[1] <= names[0], names[1] - names[0]
    condition = 'jsonpath={.status.conditions[?(@.type=="Established")].status} {.status.storedVersions}'
    real_crd, lab_crd = both(
        kubeconfigs, kubectl, "admin", "get", "crd", "trainjobs.trainer.kubeflow.org", "-o", condition
    )
    assert lab_crd.stdout == real_crd.stdout == 'True ["v1alpha1"]'

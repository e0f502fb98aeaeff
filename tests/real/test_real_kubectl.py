"""Differential: the real kubectl's `auth can-i`, `auth can-i --list`, `auth whoami` and `get crd` against the real
API server (v1.36.3) and against the lab (TLS and RBAC on, the same identities from the same manifests).

The answers must be the same, but for what names one server's objects (a service account's uid, a token's id) and
the lab serving a subset of the real cluster's CRDs. The lab answers as v1.36.3 does; the version matrix
(`controlplane/matrix`) runs this module against other releases, and two answers changed in v1.37, read in the
modules themselves: `ClusterTrustBundle` went GA and on by default (`pkg/features/kube_features.go`), and with it
the bootstrap policy binds `system:cluster-trust-bundle-discovery` (get, list, watch `clustertrustbundles`) to
every service account (`plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go`), so `can-i --list` shows one
more row; and CRDs got a table convertor (kubernetes/kubernetes#131599, `apiextensions-apiserver`
`pkg/registry/customresourcedefinition/tableconvertor`, new in v0.37), so `get crd` prints Scope and Versions.
On those releases the tests allow exactly that difference.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest

from airflow_provider_dispatch_lab.apiserver.auth.rbac_setup import IDENTITIES
from airflow_provider_dispatch_lab.real import RealCluster
from airflow_provider_dispatch_lab.real.binaries import locate
from airflow_provider_dispatch_lab.runtime import Lab

from .steps import server_release

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


#: the first release whose bootstrap policy lets every service account read ClusterTrustBundles, and whose CRDs
#: print Scope and Versions (module docstring)
CHANGED_IN = (1, 37)
CLUSTER_TRUST_BUNDLES_ROW = ("clustertrustbundles.certificates.k8s.io", "[]", "[]", "[get list watch]")


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
    kubeconfigs: dict[str, Callable[[str], Path]],
    kubectl: Kubectl,
    identity: str,
    real_admin: kubernetes.client.ApiClient,
) -> None:
    real, lab = both(kubeconfigs, kubectl, identity, "auth", "can-i", "--list", "-n", "default")
    assert real.returncode == lab.returncode == 0, real.stderr + lab.stderr

    def rows(text: str) -> list[tuple[str, ...]]:
        return sorted(tuple(re.split(r"\s{2,}", line.strip())) for line in text.splitlines()[1:])

    real_rows, lab_rows = rows(real.stdout), rows(lab.stdout)
    if server_release(real_admin) >= CHANGED_IN and CLUSTER_TRUST_BUNDLES_ROW in real_rows:
        # a service account's rows (the matrix's v1.37.2 run showed it for reader, no-nodes and controller)
        assert CLUSTER_TRUST_BUNDLES_ROW not in lab_rows, lab.stdout
        real_rows.remove(CLUSTER_TRUST_BUNDLES_ROW)
    assert lab_rows == real_rows


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


def test_get_crd_reads_as_on_the_real_server(
    kubeconfigs: dict[str, Callable[[str], Path]], kubectl: Kubectl, real_admin: kubernetes.client.ApiClient
) -> None:
    real, lab = both(kubeconfigs, kubectl, "admin", "get", "crd")
    assert real.returncode == lab.returncode == 0, real.stderr + lab.stderr
    header = [re.split(r"\s{2,}", done.stdout.splitlines()[0].strip()) for done in (real, lab)]
    assert header[1] == ["NAME", "CREATED AT"]
    changed = server_release(real_admin) >= CHANGED_IN
    assert header[0] == (["NAME", "SCOPE", "VERSIONS", "CREATED AT"] if changed else header[1])
    names = [{line.split()[0] for line in done.stdout.splitlines()[1:]} for done in (real, lab)]
    assert names[1] <= names[0], names[1] - names[0]
    condition = 'jsonpath={.status.conditions[?(@.type=="Established")].status} {.status.storedVersions}'
    real_crd, lab_crd = both(
        kubeconfigs, kubectl, "admin", "get", "crd", "trainjobs.trainer.kubeflow.org", "-o", condition
    )
    assert lab_crd.stdout == real_crd.stdout == 'True ["v1alpha1"]'

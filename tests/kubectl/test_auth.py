"""`kubectl auth can-i`, `kubectl auth whoami`, `kubectl get crd` and kubectl's typed creates against `dispatch lab
serve --tls --rbac`, with each identity's kubeconfig (kubectl sends its token over TLS only).

kubectl posts its reviews and its `create namespace|rolebinding|...` objects in protobuf (client-go's typed
clients); the lab decodes those (`lab.apiserver.protobuf`) and answers from its RBAC as kube-apiserver does
(tests/real/test_real_kubectl.py runs the same commands against both servers and compares).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from .conftest import KubectlRun, Served, serve, stop

LAB_CRDS = [
    "admissionchecks.kueue.x-k8s.io",
    "clusterqueues.kueue.x-k8s.io",
    "clustertrainingruntimes.trainer.kubeflow.org",
    "jobsets.jobset.x-k8s.io",
    "localqueues.kueue.x-k8s.io",
    "trainingruntimes.trainer.kubeflow.org",
    "trainjobs.trainer.kubeflow.org",
    "workloads.kueue.x-k8s.io",
]


@pytest.fixture(scope="module")
def rbac_served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    served = serve(tmp_path_factory.mktemp("rbac-lab"), "--bare", "--tls", "--rbac")
    yield served
    assert stop(served) == 0


@pytest.mark.parametrize(
    ("identity", "question", "answer"),
    [
        ("admin", ["delete", "nodes"], "yes"),
        ("writer", ["patch", "trainjobs.trainer.kubeflow.org", "-n", "ml"], "yes"),
        ("reader", ["list", "trainjobs.trainer.kubeflow.org", "-n", "ml"], "yes"),
        ("reader", ["patch", "trainjobs.trainer.kubeflow.org", "-n", "ml"], "no"),
        ("reader", ["create", "namespaces"], "no"),
        ("no-nodes", ["get", "nodes"], "no"),
        ("controller", ["patch", "workloads.kueue.x-k8s.io", "--subresource", "status", "-n", "ml"], "yes"),
        ("reader", ["get", "/version"], "yes"),
        ("reader", ["get", "/metrics"], "no"),
    ],
)
def test_can_i_answers_from_the_labs_rbac(
    rbac_served: Served, kubectl: KubectlRun, identity: str, question: list[str], answer: str
) -> None:
    done = kubectl(rbac_served.kubeconfigs[identity], "auth", "can-i", *question)
    assert (done.stdout, done.returncode) == (f"{answer}\n", 0 if answer == "yes" else 1), done.stderr
    assert "BadRequest" not in done.stderr


def test_can_i_list_shows_the_rules_that_apply(rbac_served: Served, kubectl: KubectlRun) -> None:
    done = kubectl(rbac_served.kubeconfigs["reader"], "auth", "can-i", "--list", "-n", "ml")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert re.split(r"\s{2,}", lines[0].strip()) == ["Resources", "Non-Resource URLs", "Resource Names", "Verbs"]
    rows = {tuple(re.split(r"\s{2,}", line.strip())) for line in lines[1:]}
    assert ("trainjobs.trainer.kubeflow.org", "[]", "[]", "[get list watch]") in rows
    assert ("nodes", "[]", "[]", "[get list watch]") in rows
    assert ("selfsubjectreviews.authentication.k8s.io", "[]", "[]", "[create]") in rows
    assert ("[/version]", "[]", "[get]") in rows
    assert not any(row[0].startswith("namespaces") for row in rows)


def test_whoami_names_the_user_behind_each_kubeconfig(rbac_served: Served, kubectl: KubectlRun) -> None:
    admin = kubectl(rbac_served.kubeconfigs["admin"], "auth", "whoami")
    assert admin.returncode == 0, admin.stderr
    assert [re.split(r"\s{2,}", line.strip()) for line in admin.stdout.splitlines()] == [
        ["ATTRIBUTE", "VALUE"],
        ["Username", "lab-admin"],
        ["UID", "lab-admin"],
        ["Groups", "[system:masters system:authenticated]"],
    ]
    reader = kubectl(rbac_served.kubeconfigs["reader"], "auth", "whoami", "-o", "json")
    assert reader.returncode == 0, reader.stderr
    info = json.loads(reader.stdout)["status"]["userInfo"]
    token = yaml.safe_load(rbac_served.kubeconfigs["reader"].read_text())["users"][0]["user"]["token"]
    assert info["username"] == "system:serviceaccount:dispatch-system:dispatch-reader"
    assert info["groups"] == [
        "system:serviceaccounts",
        "system:serviceaccounts:dispatch-system",
        "system:authenticated",
    ]
    account = kubectl(
        rbac_served.kubeconfigs["admin"], "get", "serviceaccount", "dispatch-reader", "-n", "dispatch-system",
        "-o", "jsonpath={.metadata.uid}",
    )  # fmt: skip
    assert info["uid"] == account.stdout
    (credential,) = info["extra"]["authentication.kubernetes.io/credential-id"]
    assert credential.startswith("JTI=")
    assert token.count(".") == 2


def test_get_crd_lists_the_crds_the_lab_serves(rbac_served: Served, kubectl: KubectlRun) -> None:
    admin = rbac_served.kubeconfigs["admin"]
    listed = kubectl(admin, "get", "crd")
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert re.split(r"\s{2,}", lines[0].strip()) == ["NAME", "CREATED AT"]
    assert [line.split()[0] for line in lines[1:]] == LAB_CRDS
    established = kubectl(
        admin, "get", "crd", "workloads.kueue.x-k8s.io", "-o",
        'jsonpath={.status.conditions[?(@.type=="Established")].status} {.status.storedVersions} '
        "{.spec.versions[*].served}",
    )  # fmt: skip
    assert established.stdout == 'True ["v1beta2"] false true'
    refused = kubectl(admin, "delete", "crd", "trainjobs.trainer.kubeflow.org")
    assert refused.returncode == 1
    assert refused.stderr.strip() == (
        "Error from server (MethodNotAllowed): delete is not supported on resources of kind "
        '"customresourcedefinitions.apiextensions.k8s.io"'
    )
    assert kubectl(rbac_served.kubeconfigs["reader"], "get", "crd").returncode == 1  # RBAC: no rule for CRDs


def test_kubectls_typed_creates_are_decoded_and_take_effect(rbac_served: Served, kubectl: KubectlRun) -> None:
    """`kubectl create namespace` and `create rolebinding` post protobuf; the binding then answers can-i."""
    admin, reader = rbac_served.kubeconfigs["admin"], rbac_served.kubeconfigs["reader"]
    assert kubectl(reader, "auth", "can-i", "patch", "trainjobs.trainer.kubeflow.org", "-n", "team").stdout == "no\n"
    made = kubectl(admin, "create", "namespace", "team")
    assert (made.returncode, made.stdout) == (0, "namespace/team created\n"), made.stderr
    bound = kubectl(
        admin, "create", "rolebinding", "reader-writes", "-n", "team", "--clusterrole", "dispatch-writer",
        "--serviceaccount", "dispatch-system:dispatch-reader", "-o", "json",
    )  # fmt: skip
    assert bound.returncode == 0, bound.stderr
    binding = json.loads(bound.stdout)
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "dispatch-reader", "namespace": "dispatch-system"}
    ]
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": "dispatch-writer",
    }
    assert kubectl(reader, "auth", "can-i", "patch", "trainjobs.trainer.kubeflow.org", "-n", "team").stdout == "yes\n"
    assert kubectl(reader, "auth", "can-i", "patch", "trainjobs.trainer.kubeflow.org", "-n", "ml").stdout == "no\n"


def test_impersonation_is_refused_in_words(rbac_served: Served, kubectl: KubectlRun, tmp_path: Path) -> None:
    done = kubectl(rbac_served.kubeconfigs["admin"], "auth", "can-i", "get", "pods", "--as", "someone")
    assert done.returncode == 1
    assert done.stderr.splitlines()[-1] == (
        "Error from server (BadRequest): the lab does not implement impersonation (Impersonate-User): ask as that "
        "identity with its own kubeconfig, or use the real control plane (dispatch lab real)"
    )

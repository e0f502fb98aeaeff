"""RBAC by bearer token, through the official client: the lab's identities, 401 and 403 bodies, bindings.

One lab with `rbac=True` serves the module. Its admin (system:masters) sets objects up; each identity then asks
for what dispatch needs, and the answers are the real apiserver's: 403 Status bodies as `responsewriters.Forbidden`
words them, 401 `Unauthorized`, SelfSubjectAccessReview reasons as `RBACAuthorizer` gives them.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import yaml
from api_answers import answer_of, expect_answer
from kubernetes.client import ApiException
from servers import SERVERS

from airflow_provider_dispatch_lab.apiserver.auth.rbac_setup import (
    IDENTITIES,
    SERVICE_ACCOUNTS,
    LabRbac,
    bootstrap_policy,
    dispatch_manifests,
)
from airflow_provider_dispatch_lab.real import RealCluster
from airflow_provider_dispatch_lab.real.cluster import write_kubeconfig as write_real_kubeconfig
from airflow_provider_dispatch_lab.real.processes import wait_for
from airflow_provider_dispatch_lab.runtime import Lab, write_kubeconfig
from airflow_provider_dispatch_lab.scenario import manifests

TRAINER = ("trainer.kubeflow.org", "v1alpha1")
KUEUE = ("kueue.x-k8s.io", "v1beta2")
JOBSET = ("jobset.x-k8s.io", "v1alpha2")
WRITER = "system:serviceaccount:dispatch-system:dispatch-writer"
READER = "system:serviceaccount:dispatch-system:dispatch-reader"
NO_NODES = "system:serviceaccount:dispatch-system:dispatch-no-nodes"
CONTROLLER = "system:serviceaccount:dispatch-system:dispatch-admission-controller"


@dataclass
class RbacServer:
    """The server under test with RBAC on: the lab's (`Lab(rbac=True)`) or the real one (the same identities, from
    the same manifests); the controls that are not API calls: kubeconfigs by identity or by token, and a token
    for a service account."""

    name: str
    url: str
    kubeconfig_for: Callable[[str], Path]
    token_kubeconfig: Callable[[Path, str], Path]
    issue: Callable[[str, str], str]
    ca_file: str | None = None


def _lab_server(lab: Lab) -> RbacServer:
    def issue(namespace: str, account: str) -> str:
        rbac = lab.inner.rbac
        assert rbac is not None
        return lab.call(lambda: rbac.service_accounts.issue(namespace, account))

    return RbacServer(
        "lab", lab.url, lab.kubeconfig_for, lambda path, token: write_kubeconfig(path, lab.url, token, "u"), issue
    )


def _real_server(cluster: RealCluster) -> RbacServer:
    def issue(namespace: str, account: str) -> str:
        admin = kubernetes.config.new_client_from_config(config_file=str(cluster.kubeconfig("admin")))
        with admin:
            answer = _core(admin).create_namespaced_service_account_token(
                account, namespace, {"spec": {"expirationSeconds": 3600}}
            )
        return str(answer.status.token)

    def token_kubeconfig(path: Path, token: str) -> Path:
        return write_real_kubeconfig(path, cluster.url, cluster.ca_file, token, "u", "default")

    return RbacServer("real", cluster.url, cluster.kubeconfig, token_kubeconfig, issue, str(cluster.ca_file))


@pytest.fixture(scope="module")
def rbac_lab() -> Iterator[Lab]:
    with Lab(speed=100.0, rbac=True) as lab:
        yield lab


@pytest.fixture(scope="module", params=SERVERS)
def rbac_server(request: pytest.FixtureRequest) -> Iterator[RbacServer]:
    if request.param == "lab":
        server = _lab_server(request.getfixturevalue("rbac_lab"))
    else:
        server = _real_server(request.getfixturevalue("real_cluster"))
    with kubernetes.client.ApiClient(_configuration(server.kubeconfig_for("admin"))) as admin:
        # A node nothing may be scheduled on (on the real cluster, the scheduler would otherwise place pods there).
        # A name of its own, gone after the module: the real cluster is the session's, and the conformance tests
        # bind pods to a node "n1" that must not exist there (a node without a kubelet goes Unknown, is tainted
        # and has its pods evicted).
        node = manifests.node("rbac-node")
        node["spec"] = {"unschedulable": True}
        for create in (
            lambda: kubernetes.client.CoreV1Api(admin).create_node(node),
            lambda: kubernetes.client.CustomObjectsApi(admin).create_cluster_custom_object(
                *TRAINER, "clustertrainingruntimes", manifests.cluster_training_runtime()
            ),
        ):
            try:
                create()
            except ApiException as error:
                if error.status != 409:  # the real cluster is the session's: made by an earlier module
                    raise
    yield server
    with kubernetes.client.ApiClient(_configuration(server.kubeconfig_for("admin"))) as admin:
        try:
            kubernetes.client.CoreV1Api(admin).delete_node("rbac-node")
        except ApiException as error:
            if error.status != 404:
                raise


def _configuration(kubeconfig: Path) -> kubernetes.client.Configuration:
    configuration = kubernetes.client.Configuration()
    kubernetes.config.load_kube_config(str(kubeconfig), client_configuration=configuration)
    configuration.retries = 0
    return configuration


@pytest.fixture(scope="module")
def clients(rbac_server: RbacServer) -> Iterator[dict[str, kubernetes.client.ApiClient]]:
    made = {name: kubernetes.client.ApiClient(_configuration(rbac_server.kubeconfig_for(name))) for name in IDENTITIES}
    yield made
    for client in made.values():
        client.close()


@pytest.fixture
def ns(rbac_server: RbacServer, clients: dict[str, kubernetes.client.ApiClient]) -> str:
    """A namespace with a held TrainJob `ft` in it, made by the admin (on the real cluster, once Trainer has built
    its JobSet, so that every identity's calls meet the same objects)."""
    name = f"r-{uuid.uuid4().hex[:10]}"
    admin = kubernetes.client.CustomObjectsApi(clients["admin"])
    kubernetes.client.CoreV1Api(clients["admin"]).create_namespace({"metadata": {"name": name}})
    admin.create_namespaced_custom_object(*TRAINER, name, "trainjobs", manifests.trainjob("ft"))
    if rbac_server.name == "real":
        wait_for(
            "Trainer builds the JobSet of TrainJob ft",
            lambda: admin.get_namespaced_custom_object(*JOBSET, name, "jobsets", "ft"),
            timeout=30,
        )
    return name


def _status(call: Callable[[], Any]) -> tuple[int, dict[str, Any] | None]:
    """The HTTP status of a call, and the Status body of a failure."""
    try:
        answer = call()
    except ApiException as error:
        return error.status, json.loads(error.body)
    status = getattr(answer, "status", None)
    if isinstance(status, int):  # a raw watch response
        answer.close()  # a watch stream: its connection cannot go back to the pool
        return status, None
    return 200, None


def forbidden_body(message: str, kind: str, name: str | None = None, group: str = "") -> dict[str, Any]:
    """The Status the apiserver sends for a 403 (`apierrors.NewForbidden`)."""
    details: dict[str, Any] = {"kind": kind}
    if name:
        details["name"] = name
    if group:
        details["group"] = group
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": "Forbidden",
        "details": details,
        "code": 403,
    }


# ------------------------------------------------------------------------------------------------ the matrix

Call = Callable[[kubernetes.client.ApiClient, str], Any]


def _core(api: kubernetes.client.ApiClient) -> kubernetes.client.CoreV1Api:
    return kubernetes.client.CoreV1Api(api)


def _custom(api: kubernetes.client.ApiClient) -> kubernetes.client.CustomObjectsApi:
    return kubernetes.client.CustomObjectsApi(api)


def _replace_trainjob(api: kubernetes.client.ApiClient, ns: str) -> Any:
    """Read and replace, again on a 409: on the real cluster, Trainer writes the new TrainJob too."""
    for attempt in range(10):
        current = _custom(api).get_namespaced_custom_object(*TRAINER, ns, "trainjobs", "ft")
        current["metadata"].setdefault("labels", {})["touched"] = "yes"
        try:
            return _custom(api).replace_namespaced_custom_object(*TRAINER, ns, "trainjobs", "ft", current)
        except ApiException as error:
            if error.status != 409 or attempt == 9:
                raise
    raise AssertionError("unreachable")


CALLS: dict[str, tuple[Call, int]] = {
    # name: (call, HTTP status when allowed)
    "list nodes": (lambda api, ns: _core(api).list_node(), 200),
    "get node": (lambda api, ns: _core(api).read_node("rbac-node"), 200),
    "watch nodes": (lambda api, ns: _core(api).list_node(watch=True, _preload_content=False, timeout_seconds=1), 200),
    "list pods": (lambda api, ns: _core(api).list_namespaced_pod(ns), 200),
    "watch pods": (
        lambda api, ns: _core(api).list_namespaced_pod(ns, watch=True, _preload_content=False, timeout_seconds=1),
        200,
    ),
    "get trainjob": (lambda api, ns: _custom(api).get_namespaced_custom_object(*TRAINER, ns, "trainjobs", "ft"), 200),
    "list trainjobs": (lambda api, ns: _custom(api).list_namespaced_custom_object(*TRAINER, ns, "trainjobs"), 200),
    # before "delete trainjob": on the real cluster the garbage collector then deletes the JobSet, at its own pace
    "get jobset": (lambda api, ns: _custom(api).get_namespaced_custom_object(*JOBSET, ns, "jobsets", "ft"), 404),
    "create trainjob": (
        lambda api, ns: _custom(api).create_namespaced_custom_object(
            *TRAINER, ns, "trainjobs", manifests.trainjob("t2")
        ),
        200,
    ),
    "replace trainjob": (_replace_trainjob, 200),
    "patch trainjob": (
        lambda api, ns: _custom(api).patch_namespaced_custom_object(
            *TRAINER, ns, "trainjobs", "ft", {"metadata": {"annotations": {"a": "b"}}}
        ),
        200,
    ),
    "delete trainjob": (
        lambda api, ns: _custom(api).delete_namespaced_custom_object(*TRAINER, ns, "trainjobs", "ft"),
        200,
    ),
    "get runtime": (
        lambda api, ns: _custom(api).get_cluster_custom_object(
            *TRAINER, "clustertrainingruntimes", "torch-distributed"
        ),
        200,
    ),
    "list workloads": (lambda api, ns: _custom(api).list_namespaced_custom_object(*KUEUE, ns, "workloads"), 200),
    "patch workload": (
        lambda api, ns: _custom(api).patch_namespaced_custom_object(
            *KUEUE, ns, "workloads", "w", {"spec": {"active": False}}
        ),
        404,
    ),
    "patch workload status": (
        lambda api, ns: _custom(api).patch_namespaced_custom_object_status(
            *KUEUE, ns, "workloads", "w", {"status": {}}
        ),
        404,
    ),
    "create pod": (lambda api, ns: _core(api).create_namespaced_pod(ns, manifests.pod("p")), 200),
    "delete pods": (lambda api, ns: _core(api).delete_collection_namespaced_pod(ns), 200),
}

ALLOWED: dict[str, set[str]] = {
    "admin": set(CALLS),
    "writer": set(CALLS) - {"delete trainjob", "patch workload status", "create pod", "delete pods"},
    "reader": {
        "list nodes", "get node", "watch nodes", "list pods", "watch pods", "get trainjob", "list trainjobs",
        "get jobset", "get runtime", "list workloads",
    },
    "no-nodes": set(CALLS) - {
        "delete trainjob", "patch workload status", "create pod", "delete pods", "list nodes", "get node",
        "watch nodes",
    },
    "controller": {
        "list nodes", "get node", "watch nodes", "list pods", "watch pods", "get trainjob",
        "replace trainjob", "get jobset", "get runtime", "list workloads", "patch workload status",
    },
}  # fmt: skip


@pytest.mark.parametrize("identity", IDENTITIES)
def test_each_identity_can_do_exactly_its_verbs(
    rbac_server: RbacServer, identity: str, clients: dict[str, kubernetes.client.ApiClient], ns: str
) -> None:
    api = clients[identity]
    answers = {name: _status(partial(call, api, ns)) for name, (call, _) in CALLS.items()}
    allowed = {name: code for name, (_, code) in CALLS.items()}
    if rbac_server.name == "real":
        allowed["get jobset"] = 200  # the real Trainer built the TrainJob's JobSet; the lab here runs no Trainer
    expected = {name: (allowed[name] if name in ALLOWED[identity] else 403) for name in CALLS}
    outcomes = {name: code for name, (code, _) in answers.items()}
    unexpected = {name: str(answer_of(answers[name])) for name in CALLS if outcomes[name] != expected[name]}
    assert outcomes == expected, unexpected


# ------------------------------------------------------------------------------------------------ 403 bodies


@pytest.mark.parametrize(
    ("identity", "call", "body"),
    [
        (
            "no-nodes",
            "list nodes",
            forbidden_body(
                f'nodes is forbidden: User "{NO_NODES}" cannot list resource "nodes" in API group "" at the '
                "cluster scope",
                "nodes",
            ),
        ),
        (
            "no-nodes",
            "get node",
            forbidden_body(
                f'nodes "rbac-node" is forbidden: User "{NO_NODES}" cannot get resource "nodes" in API group "" at the '
                "cluster scope",
                "nodes",
                "rbac-node",
            ),
        ),
        (
            "no-nodes",
            "watch nodes",
            forbidden_body(
                f'nodes is forbidden: User "{NO_NODES}" cannot watch resource "nodes" in API group "" at the '
                "cluster scope",
                "nodes",
            ),
        ),
        (
            "writer",
            "patch workload status",
            forbidden_body(
                f'workloads.kueue.x-k8s.io "w" is forbidden: User "{WRITER}" cannot patch resource '
                '"workloads/status" in API group "kueue.x-k8s.io" in the namespace "{ns}"',
                "workloads",
                "w",
                "kueue.x-k8s.io",
            ),
        ),
        (
            "reader",
            "delete pods",
            forbidden_body(
                f'pods is forbidden: User "{READER}" cannot deletecollection resource "pods" in API group "" in '
                'the namespace "{ns}"',
                "pods",
            ),
        ),
        (
            "controller",
            "create trainjob",
            forbidden_body(
                f'trainjobs.trainer.kubeflow.org is forbidden: User "{CONTROLLER}" cannot create resource '
                '"trainjobs" in API group "trainer.kubeflow.org" in the namespace "{ns}"',
                "trainjobs",
                group="trainer.kubeflow.org",
            ),
        ),
    ],
)
def test_forbidden_bodies_are_the_apiservers(
    identity: str, call: str, body: dict[str, Any], clients: dict[str, kubernetes.client.ApiClient], ns: str
) -> None:
    answer = expect_answer(_status(lambda: CALLS[call][0](clients[identity], ns)), 403)
    assert answer == json.loads(json.dumps(body).replace("{ns}", ns))


WRITES: list[tuple[str, Call]] = [
    ("create node", lambda api, ns: _core(api).create_node(manifests.node("n9"))),
    ("patch node", lambda api, ns: _core(api).patch_node("rbac-node", {"metadata": {"labels": {"x": "y"}}})),
    ("patch node status", lambda api, ns: _core(api).patch_node_status("rbac-node", {"status": {}})),
    ("delete node", lambda api, ns: _core(api).delete_node("rbac-node")),
    ("create pod", CALLS["create pod"][0]),
    ("delete pods", CALLS["delete pods"][0]),
    ("create trainjob", CALLS["create trainjob"][0]),
    ("replace trainjob", lambda api, ns: _custom(api).replace_namespaced_custom_object(
        *TRAINER, ns, "trainjobs", "ft", manifests.trainjob("ft"))),
    ("patch trainjob", CALLS["patch trainjob"][0]),
    ("delete trainjob", CALLS["delete trainjob"][0]),
    ("patch trainjob status", lambda api, ns: _custom(api).patch_namespaced_custom_object_status(
        *TRAINER, ns, "trainjobs", "ft", {"status": {}})),
    ("patch workload", CALLS["patch workload"][0]),
    ("patch workload status", CALLS["patch workload status"][0]),
    ("delete jobset", lambda api, ns: _custom(api).delete_namespaced_custom_object(*JOBSET, ns, "jobsets", "ft")),
    ("create namespace", lambda api, ns: _core(api).create_namespace({"metadata": {"name": f"{ns}-x"}})),
    ("create role", lambda api, ns: kubernetes.client.RbacAuthorizationV1Api(api).create_namespaced_role(
        ns, {"metadata": {"name": "r"}, "rules": []})),
]  # fmt: skip


@pytest.mark.parametrize(("write", "call"), WRITES, ids=[w for w, _ in WRITES])
def test_the_reader_is_refused_every_write(
    write: str, call: Call, clients: dict[str, kubernetes.client.ApiClient], ns: str
) -> None:
    body = expect_answer(_status(lambda: call(clients["reader"], ns)), 403, "Forbidden")
    assert f'User "{READER}" cannot ' in body["message"]


def test_no_nodes_cannot_reach_node_status_either(clients: dict[str, kubernetes.client.ApiClient]) -> None:
    status, body = _status(lambda: _core(clients["no-nodes"]).read_node_status("rbac-node"))
    assert (status, body) == (
        403,
        forbidden_body(
            f'nodes "rbac-node" is forbidden: User "{NO_NODES}" cannot get resource "nodes/status" in API group "" at '
            "the cluster scope",
            "nodes",
            "rbac-node",
        ),
    )


# ------------------------------------------------------------------------------------------ authentication


UNAUTHORIZED = {
    "kind": "Status",
    "apiVersion": "v1",
    "metadata": {},
    "status": "Failure",
    "message": "Unauthorized",
    "reason": "Unauthorized",
    "code": 401,
}


def _client_with_token(server: RbacServer, token: str, tmp_path: Path) -> kubernetes.client.ApiClient:
    return kubernetes.client.ApiClient(_configuration(server.token_kubeconfig(tmp_path / "kc.yaml", token)))


@pytest.mark.parametrize("token", ["not-a-token", "a.b.c", "lab-admin-token-but-wrong"])
def test_an_unknown_token_is_401(rbac_server: RbacServer, token: str, tmp_path: Path) -> None:
    api = _client_with_token(rbac_server, token, tmp_path)
    assert _status(lambda: _core(api).list_namespaced_pod("default")) == (401, UNAUTHORIZED)
    assert _status(lambda: kubernetes.client.VersionApi(api).get_code()) == (401, UNAUTHORIZED)


def test_a_service_account_token_dies_with_its_account(
    rbac_server: RbacServer, clients: dict[str, kubernetes.client.ApiClient], ns: str, tmp_path: Path
) -> None:
    admin = _core(clients["admin"])
    admin.create_namespaced_service_account(ns, {"metadata": {"name": "short-lived"}})
    token = rbac_server.issue(ns, "short-lived")
    api = _client_with_token(rbac_server, token, tmp_path)
    expect_answer(_status(lambda: kubernetes.client.VersionApi(api).get_code()), 200)
    admin.delete_namespaced_service_account("short-lived", ns)
    # The lab refuses the token at once. The real API server caches a successful token authentication for 10 s
    # (`kubeapiserver/options/authentication.go`, `TokenSuccessCacheTTL`) and finds the account gone through its
    # informer: the token dies within that (docs/fidelity.md).
    deadline = time.monotonic() + (15.0 if rbac_server.name == "real" else 0.0)
    while (status := _status(lambda: kubernetes.client.VersionApi(api).get_code()))[0] == 200:
        if time.monotonic() >= deadline:
            break
        time.sleep(0.2)  # a poll interval: each try asks the server again
    assert status == (401, UNAUTHORIZED)


def test_anonymous_requests_see_public_info_only(rbac_server: RbacServer) -> None:
    configuration = kubernetes.client.Configuration()
    configuration.host = rbac_server.url
    configuration.ssl_ca_cert = rbac_server.ca_file
    configuration.retries = 0
    api = kubernetes.client.ApiClient(configuration)
    expect_answer(_status(lambda: kubernetes.client.VersionApi(api).get_code()), 200)
    status, body = _status(lambda: kubernetes.client.CoreApi(api).get_api_versions())  # GET /api/
    assert (status, body and body["reason"], body and body["message"]) == (
        403,
        "Forbidden",
        'forbidden: User "system:anonymous" cannot get path "/api/"',
    )
    body = expect_answer(_status(lambda: _core(api).list_namespaced_pod("default")), 403, "Forbidden")
    assert body["message"] == (
        'pods is forbidden: User "system:anonymous" cannot list resource "pods" in API group "" in the namespace '
        '"default"'
    )


@pytest.mark.parametrize("identity", IDENTITIES)
def test_every_identity_may_discover_the_api(identity: str, clients: dict[str, kubernetes.client.ApiClient]) -> None:
    api = clients[identity]
    groups = kubernetes.client.ApisApi(api).get_api_versions()
    resources = kubernetes.client.CoreV1Api(api).get_api_resources()
    assert "rbac.authorization.k8s.io" in [g.name for g in groups.groups]
    assert {"serviceaccounts", "pods", "nodes"} <= {r.name for r in resources.resources}
    assert kubernetes.client.VersionApi(api).get_code().git_version.startswith("v1.")


# --------------------------------------------------------------------------------------------------- bindings


@pytest.fixture
def runner(
    rbac_server: RbacServer, clients: dict[str, kubernetes.client.ApiClient], ns: str, tmp_path: Path
) -> kubernetes.client.ApiClient:
    """A client as ServiceAccount `runner` of the test's namespace, which nothing is bound to yet."""
    _core(clients["admin"]).create_namespaced_service_account(ns, {"metadata": {"name": "runner"}})
    return _client_with_token(rbac_server, rbac_server.issue(ns, "runner"), tmp_path)


def _rbac(api: kubernetes.client.ApiClient) -> kubernetes.client.RbacAuthorizationV1Api:
    return kubernetes.client.RbacAuthorizationV1Api(api)


def _becomes(server: RbacServer, call: Callable[[], Any], code: int) -> None:
    """The call answers `code` once RBAC has taken in the objects just written: at once in the lab; on the real
    API server when its RBAC authorizer's informers have seen them (milliseconds here; docs/fidelity.md)."""
    deadline = time.monotonic() + (10.0 if server.name == "real" else 0.0)
    while True:
        answer = _status(call)
        if answer[0] == code or time.monotonic() >= deadline:
            break
        time.sleep(0.05)  # a poll interval: each try asks the server again
    expect_answer(answer, code)


def _binding(name: str, role_kind: str, role: str, subjects: list[dict[str, str]]) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role},
        "subjects": subjects,
    }


def test_rbac_objects_take_effect_at_once(
    rbac_server: RbacServer,
    clients: dict[str, kubernetes.client.ApiClient],
    runner: kubernetes.client.ApiClient,
    ns: str,
) -> None:
    admin = _rbac(clients["admin"])
    list_pods = lambda: _core(runner).list_namespaced_pod(ns)  # noqa: E731
    _becomes(rbac_server, list_pods, 403)
    admin.create_namespaced_role(
        ns,
        {"metadata": {"name": "pod-lister"}, "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]},
    )
    _becomes(rbac_server, list_pods, 403)  # a role alone grants nothing
    admin.create_namespaced_role_binding(
        ns, _binding("runner-lists", "Role", "pod-lister", [{"kind": "ServiceAccount", "name": "runner"}])
    )
    _becomes(rbac_server, list_pods, 200)
    admin.patch_namespaced_role(
        "pod-lister", ns, {"rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]}
    )
    _becomes(rbac_server, list_pods, 403)
    admin.patch_namespaced_role(
        "pod-lister", ns, {"rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]}
    )
    _becomes(rbac_server, list_pods, 200)
    admin.delete_namespaced_role_binding("runner-lists", ns)
    _becomes(rbac_server, list_pods, 403)


def test_a_rolebinding_to_a_clusterrole_grants_in_its_namespace_only(
    rbac_server: RbacServer,
    clients: dict[str, kubernetes.client.ApiClient],
    runner: kubernetes.client.ApiClient,
    ns: str,
) -> None:
    admin = clients["admin"]
    other = f"{ns}-b"
    _core(admin).create_namespace({"metadata": {"name": other}})
    _rbac(admin).create_namespaced_role_binding(
        ns, _binding("read", "ClusterRole", "dispatch-reader", [{"kind": "ServiceAccount", "name": "runner"}])
    )
    user = f"system:serviceaccount:{ns}:runner"
    _becomes(rbac_server, lambda: _core(runner).list_namespaced_pod(ns), 200)
    assert _status(lambda: _core(runner).list_namespaced_pod(other)) == (
        403,
        forbidden_body(
            f'pods is forbidden: User "{user}" cannot list resource "pods" in API group "" in the namespace "{other}"',
            "pods",
        ),
    )
    assert _status(lambda: _core(runner).list_pod_for_all_namespaces()) == (
        403,
        forbidden_body(
            f'pods is forbidden: User "{user}" cannot list resource "pods" in API group "" at the cluster scope',
            "pods",
        ),
    )
    # the ClusterRole's cluster-scoped entry (clustertrainingruntimes) is not granted by a RoleBinding
    runtime = lambda: _custom(runner).get_cluster_custom_object(  # noqa: E731
        *TRAINER, "clustertrainingruntimes", "torch-distributed"
    )
    _becomes(rbac_server, runtime, 403)
    _rbac(admin).create_cluster_role_binding(
        _binding(
            f"read-{ns}",
            "ClusterRole",
            "dispatch-reader",
            [{"kind": "ServiceAccount", "name": "runner", "namespace": ns}],
        )
    )
    try:
        _becomes(rbac_server, runtime, 200)
        _becomes(rbac_server, lambda: _core(runner).list_namespaced_pod(other), 200)
        _becomes(rbac_server, lambda: _core(runner).list_pod_for_all_namespaces(), 200)
    finally:
        _rbac(admin).delete_cluster_role_binding(f"read-{ns}")


def test_resource_names_limit_a_rule_to_named_objects(
    rbac_server: RbacServer,
    clients: dict[str, kubernetes.client.ApiClient],
    runner: kubernetes.client.ApiClient,
    ns: str,
) -> None:
    admin = clients["admin"]
    for name in ("p1", "p2"):
        _core(admin).create_namespaced_pod(ns, manifests.pod(name))
    _rbac(admin).create_namespaced_role(
        ns,
        {
            "metadata": {"name": "one-pod"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "resourceNames": ["p1"], "verbs": ["get", "list"]}],
        },
    )
    _rbac(admin).create_namespaced_role_binding(
        ns, _binding("one-pod", "Role", "one-pod", [{"kind": "ServiceAccount", "name": "runner"}])
    )
    user = f"system:serviceaccount:{ns}:runner"
    _becomes(rbac_server, lambda: _core(runner).read_namespaced_pod("p1", ns), 200)
    assert _core(runner).read_namespaced_pod("p1", ns).metadata.name == "p1"
    assert _status(lambda: _core(runner).read_namespaced_pod("p2", ns)) == (
        403,
        forbidden_body(
            f'pods "p2" is forbidden: User "{user}" cannot get resource "pods" in API group "" in the namespace "{ns}"',
            "pods",
            "p2",
        ),
    )
    _becomes(rbac_server, lambda: _core(runner).list_namespaced_pod(ns), 403)  # a list names no object


def test_subresource_rules_are_separate_from_their_resource(
    rbac_server: RbacServer,
    clients: dict[str, kubernetes.client.ApiClient],
    runner: kubernetes.client.ApiClient,
    ns: str,
) -> None:
    admin = clients["admin"]
    _core(admin).create_namespaced_pod(ns, manifests.pod("p1"))
    role = {
        "metadata": {"name": "pods"},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "patch"]}],
    }
    _rbac(admin).create_namespaced_role(ns, role)
    _rbac(admin).create_namespaced_role_binding(
        ns, _binding("pods", "Role", "pods", [{"kind": "ServiceAccount", "name": "runner"}])
    )
    user = f"system:serviceaccount:{ns}:runner"
    patch_status = lambda: _core(runner).patch_namespaced_pod_status(  # noqa: E731
        "p1", ns, {"status": {"conditions": [{"type": "Lab", "status": "True"}]}}
    )
    _becomes(
        rbac_server, lambda: _core(runner).patch_namespaced_pod("p1", ns, {"metadata": {"labels": {"a": "b"}}}), 200
    )
    assert _status(patch_status) == (
        403,
        forbidden_body(
            f'pods "p1" is forbidden: User "{user}" cannot patch resource "pods/status" in API group "" in the '
            f'namespace "{ns}"',
            "pods",
            "p1",
        ),
    )
    _rbac(admin).patch_namespaced_role(
        "pods", ns, {"rules": [*role["rules"], {"apiGroups": [""], "resources": ["*/status"], "verbs": ["patch"]}]}
    )
    _becomes(rbac_server, patch_status, 200)


def test_bindings_by_user_and_group_subjects(
    rbac_server: RbacServer,
    clients: dict[str, kubernetes.client.ApiClient],
    runner: kubernetes.client.ApiClient,
    ns: str,
) -> None:
    admin = _rbac(clients["admin"])
    admin.create_namespaced_role_binding(
        ns,
        _binding(
            "by-group", "ClusterRole", "dispatch-reader", [{"kind": "Group", "name": f"system:serviceaccounts:{ns}"}]
        ),
    )
    _becomes(rbac_server, lambda: _core(runner).list_namespaced_pod(ns), 200)
    admin.delete_namespaced_role_binding("by-group", ns)
    admin.create_namespaced_role_binding(
        ns,
        _binding(
            "by-user",
            "ClusterRole",
            "dispatch-reader",
            [{"kind": "User", "name": f"system:serviceaccount:{ns}:runner"}],
        ),
    )
    _becomes(rbac_server, lambda: _core(runner).list_namespaced_pod(ns), 200)


# --------------------------------------------------------------------------------------- access reviews


def _review(api: kubernetes.client.ApiClient, spec: dict[str, Any]) -> dict[str, Any]:
    answer = kubernetes.client.AuthorizationV1Api(api).create_self_subject_access_review({"spec": spec})
    return {key: value for key, value in answer.status.to_dict().items() if value is not None}


@pytest.mark.parametrize(
    ("identity", "spec", "status"),
    [
        (
            "writer",
            {"resourceAttributes": {"verb": "list", "resource": "nodes"}},
            {
                "allowed": True,
                "reason": 'RBAC: allowed by ClusterRoleBinding "dispatch-node-reader" of ClusterRole '
                '"dispatch-node-reader" to ServiceAccount "dispatch-writer/dispatch-system"',
            },
        ),
        (
            "writer",
            {"resourceAttributes": {"verb": "update", "group": "trainer.kubeflow.org", "resource": "trainjobs",
                                    "namespace": "ml", "name": "ft"}},
            {
                "allowed": True,
                "reason": 'RBAC: allowed by ClusterRoleBinding "dispatch-writer" of ClusterRole "dispatch-writer" '
                'to ServiceAccount "dispatch-writer/dispatch-system"',
            },
        ),
        ("no-nodes", {"resourceAttributes": {"verb": "get", "resource": "nodes", "name": "rbac-node"}},
         {"allowed": False}),
        ("reader", {"resourceAttributes": {"verb": "patch", "group": "trainer.kubeflow.org", "resource": "trainjobs",
                                           "namespace": "ml"}}, {"allowed": False}),
        (
            "controller",
            {"resourceAttributes": {"verb": "patch", "group": "kueue.x-k8s.io", "resource": "workloads",
                                    "subresource": "status", "namespace": "ml"}},
            {
                "allowed": True,
                "reason": 'RBAC: allowed by ClusterRoleBinding "dispatch-admission-controller" of ClusterRole '
                '"dispatch-admission-controller" to ServiceAccount "dispatch-admission-controller/dispatch-system"',
            },
        ),
        ("controller", {"resourceAttributes": {"verb": "patch", "group": "kueue.x-k8s.io", "resource": "workloads",
                                               "namespace": "ml"}}, {"allowed": False}),
        (
            "reader",
            {"nonResourceAttributes": {"verb": "get", "path": "/apis/batch/v1"}},
            {
                "allowed": True,
                "reason": 'RBAC: allowed by ClusterRoleBinding "system:discovery" of ClusterRole "system:discovery" '
                'to Group "system:authenticated"',
            },
        ),
        ("reader", {"nonResourceAttributes": {"verb": "get", "path": "/metrics"}}, {"allowed": False}),
        ("admin", {"resourceAttributes": {"verb": "delete", "resource": "nodes"}}, {"allowed": True}),
    ],
)  # fmt: skip
def test_self_subject_access_reviews_answer_from_the_same_authorizer(
    identity: str, spec: dict[str, Any], status: dict[str, Any], clients: dict[str, kubernetes.client.ApiClient]
) -> None:
    assert _review(clients[identity], spec) == status


def test_an_access_review_must_name_one_kind_of_attributes(clients: dict[str, kubernetes.client.ApiClient]) -> None:
    api = kubernetes.client.AuthorizationV1Api(clients["reader"])
    code, status = _status(lambda: api.create_self_subject_access_review({"spec": {}}))
    assert code == 422
    assert status is not None
    assert (status["reason"], status["message"]) == (
        "Invalid",
        '.authorization.k8s.io "" is invalid: spec.resourceAttributes: Invalid value: null: exactly one of '
        "nonResourceAttributes or resourceAttributes must be specified",
    )
    both = {"resourceAttributes": {"verb": "get", "resource": "pods"}, "nonResourceAttributes": {"path": "/x"}}
    code, status = _status(lambda: api.create_self_subject_access_review({"spec": both}))
    assert (code, status and status["message"]) == (
        422,
        '.authorization.k8s.io "" is invalid: spec.nonResourceAttributes: Invalid value: {"Path":"/x","Verb":""}: '
        "cannot be specified in combination with resourceAttributes",
    )


def _token_claims(kubeconfig: Path) -> dict[str, Any]:
    token = yaml.safe_load(kubeconfig.read_text())["users"][0]["user"]["token"]
    payload = token.split(".")[1]
    return dict(json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))))


@pytest.mark.parametrize("identity", IDENTITIES)
def test_a_self_subject_review_is_the_user_the_token_authenticates(
    identity: str, rbac_server: RbacServer, clients: dict[str, kubernetes.client.ApiClient]
) -> None:
    """What `kubectl auth whoami` shows: the static admin with its token file's uid; a service account with its
    uid, its groups and its token's id (`JTI=...`)."""
    review = kubernetes.client.AuthenticationV1Api(clients[identity]).create_self_subject_review({})
    info = review.status.user_info
    if identity == "admin":
        assert (info.username, info.uid, info.groups, info.extra) == (
            "lab-admin", "lab-admin", ["system:masters", "system:authenticated"], None,
        )  # fmt: skip
        return
    account = _core(clients["admin"]).read_namespaced_service_account(SERVICE_ACCOUNTS[identity], "dispatch-system")
    assert info.username == LabRbac.username_of(identity)
    assert info.uid == account.metadata.uid
    assert info.groups == ["system:serviceaccounts", "system:serviceaccounts:dispatch-system", "system:authenticated"]
    jti = _token_claims(rbac_server.kubeconfig_for(identity))["jti"]
    assert info.extra == {"authentication.kubernetes.io/credential-id": [f"JTI={jti}"]}
    assert review.metadata.creation_timestamp is not None


def _applying_rules(user: str, groups: set[str]) -> list[dict[str, Any]]:
    """The rules of every ClusterRole that a ClusterRoleBinding of the lab's policy (the bootstrap part a client
    meets, and the project's manifests) binds to `user` or one of `groups`: what RBAC resolves for them."""
    documents = [*bootstrap_policy(), *dispatch_manifests()]
    roles = {d["metadata"]["name"]: d.get("rules") or [] for d in documents if d["kind"] == "ClusterRole"}
    found: list[dict[str, Any]] = []
    for binding in (d for d in documents if d["kind"] == "ClusterRoleBinding"):
        for subject in binding.get("subjects") or []:
            name = subject["name"]
            if subject["kind"] == "ServiceAccount":
                name = f"system:serviceaccount:{subject.get('namespace')}:{name}"
            if (subject["kind"] == "Group" and name in groups) or (subject["kind"] != "Group" and name == user):
                found.extend(roles[binding["roleRef"]["name"]])
                break
    return found


def _rule_set(rules: list[dict[str, Any]], *keys: str) -> set[tuple[tuple[str, ...], ...]]:
    return {tuple(tuple(sorted(rule.get(key) or [])) for key in keys) for rule in rules}


@pytest.mark.parametrize("identity", ["reader", "no-nodes"])
def test_a_self_subject_rules_review_lists_what_rbac_resolves(
    identity: str, clients: dict[str, kubernetes.client.ApiClient]
) -> None:
    """What `kubectl auth can-i --list` shows: every rule bound to the account or its groups, resource rules and
    non-resource rules apart, in any order (the real server's comes from an informer's map)."""
    review = kubernetes.client.AuthorizationV1Api(clients[identity]).create_self_subject_rules_review(
        {"spec": {"namespace": "default"}}
    )
    answer = clients[identity].sanitize_for_serialization(review)
    groups = {"system:serviceaccounts", "system:serviceaccounts:dispatch-system", "system:authenticated"}
    expected = _applying_rules(LabRbac.username_of(identity), groups)
    resource_keys = ("verbs", "apiGroups", "resources", "resourceNames")
    assert _rule_set(answer["status"]["resourceRules"], *resource_keys) == _rule_set(
        [r for r in expected if r.get("resources")], *resource_keys
    )
    assert _rule_set(answer["status"]["nonResourceRules"], "verbs", "nonResourceURLs") == _rule_set(
        [r for r in expected if r.get("nonResourceURLs")], "verbs", "nonResourceURLs"
    )
    assert answer["status"]["incomplete"] is False
    assert "evaluationError" not in answer["status"]
    code, status = _status(
        lambda: kubernetes.client.AuthorizationV1Api(clients[identity]).create_self_subject_rules_review({"spec": {}})
    )
    assert (code, status and status["message"]) == (400, "no namespace on request")


def test_a_binding_to_a_missing_role_is_the_denial_reason(
    rbac_server: RbacServer,
    clients: dict[str, kubernetes.client.ApiClient],
    runner: kubernetes.client.ApiClient,
    ns: str,
) -> None:
    _rbac(clients["admin"]).create_namespaced_role_binding(
        ns, _binding("dangling", "ClusterRole", "no-such-role", [{"kind": "ServiceAccount", "name": "runner"}])
    )
    spec = {"resourceAttributes": {"verb": "list", "resource": "pods", "namespace": ns}}
    reason = 'RBAC: clusterrole.rbac.authorization.k8s.io "no-such-role" not found'
    # the real API server's RBAC authorizer reads bindings through its informers: the reason appears once it has
    # seen this one (a CI run met the review before it had; `_becomes` waits the same way for codes)
    deadline = time.monotonic() + (10.0 if rbac_server.name == "real" else 0.0)
    while (review := _review(runner, spec)) != {"allowed": False, "reason": reason}:
        if time.monotonic() >= deadline:
            break
        time.sleep(0.05)  # a poll interval: each try asks the server again
    assert review == {"allowed": False, "reason": reason}
    status = expect_answer(_status(lambda: _core(runner).list_namespaced_pod(ns)), 403)
    assert status["message"].endswith(f": {reason}")  # the apiserver appends the authorizer's reason


# ------------------------------------------------------------------------------------ the RBAC kinds themselves


def _invalid(call: Callable[[], Any]) -> str:
    body = expect_answer(_status(call), 422, "Invalid")
    return str(body["message"])


def test_rbac_kinds_are_validated_as_upstream(clients: dict[str, kubernetes.client.ApiClient], ns: str) -> None:
    admin = _rbac(clients["admin"])
    role = {"metadata": {"name": "bad"}, "rules": [{"nonResourceURLs": ["/healthz"], "verbs": ["get"]}]}
    assert _invalid(lambda: admin.create_namespaced_role(ns, role)) == (
        'Role.rbac.authorization.k8s.io "bad" is invalid: rules[0].nonResourceURLs: Invalid value: '
        '["/healthz"]: namespaced rules cannot apply to non-resource URLs'
    )
    unbound = _binding(f"bad-{ns}", "ClusterRole", "view", [{"kind": "ServiceAccount", "name": "runner"}])
    assert _invalid(lambda: admin.create_cluster_role_binding(unbound)) == (
        f'ClusterRoleBinding.rbac.authorization.k8s.io "bad-{ns}" is invalid: subjects[0].namespace: Required value'
    )
    wrong_kind = _binding(f"bad2-{ns}", "Role", "view", [])
    assert _invalid(lambda: admin.create_cluster_role_binding(wrong_kind)) == (
        f'ClusterRoleBinding.rbac.authorization.k8s.io "bad2-{ns}" is invalid: roleRef.kind: Unsupported value: '
        '"Role": supported values: "ClusterRole"'
    )


def test_a_bindings_role_ref_is_defaulted_and_immutable(
    clients: dict[str, kubernetes.client.ApiClient], ns: str
) -> None:
    admin = _rbac(clients["admin"])
    body = {
        "metadata": {"name": "rb"},
        "roleRef": {"kind": "ClusterRole", "name": "dispatch-reader"},
        "subjects": [{"kind": "User", "name": "alice"}, {"kind": "ServiceAccount", "name": "runner"}],
    }
    created = admin.create_namespaced_role_binding(ns, body)
    assert created.role_ref.api_group == "rbac.authorization.k8s.io"
    # a ServiceAccount's "" is the default, and `omitempty`: no field at all (as the real API server answers)
    assert [s.api_group for s in created.subjects] == ["rbac.authorization.k8s.io", None]
    assert _invalid(
        lambda: admin.patch_namespaced_role_binding("rb", ns, {"roleRef": {"name": "dispatch-writer"}})
    ) == (
        'RoleBinding.rbac.authorization.k8s.io "rb" is invalid: roleRef: Invalid value: '
        '{"APIGroup":"rbac.authorization.k8s.io","Kind":"ClusterRole","Name":"dispatch-writer"}: '
        "cannot change roleRef"
    )


def test_the_lab_provisions_its_roles_and_identities(
    rbac_server: RbacServer, clients: dict[str, kubernetes.client.ApiClient]
) -> None:
    admin = _rbac(clients["admin"])
    roles = {r.metadata.name for r in admin.list_cluster_role().items}
    assert {"cluster-admin", "system:discovery", "system:basic-user", "system:public-info-viewer"} <= roles
    assert {"dispatch-writer", "dispatch-reader", "dispatch-node-reader", "dispatch-admission-controller"} <= roles
    accounts = _core(clients["admin"]).list_namespaced_service_account("dispatch-system").items
    # The real controller manager's ServiceAccount controller adds `default` to every namespace; the lab runs none.
    default = ["default"] if rbac_server.name == "real" else []
    assert sorted(a.metadata.name for a in accounts) == [
        *default, "dispatch-admission-controller", "dispatch-no-nodes", "dispatch-reader", "dispatch-writer",
    ]  # fmt: skip
    assert [LabRbac.username_of(i) for i in ("writer", "reader", "no-nodes", "controller")] == [
        WRITER, READER, NO_NODES, CONTROLLER,
    ]  # fmt: skip


def test_identities_need_rbac_and_known_names(rbac_lab: Lab) -> None:
    with pytest.raises(KeyError, match="unknown lab identity 'root'"):
        rbac_lab.kubeconfig_for("root")
    with Lab(speed=100.0) as plain, pytest.raises(RuntimeError, match="without RBAC"):
        plain.kubeconfig_for("writer")

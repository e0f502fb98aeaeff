"""Status bodies for 403, 429 and 500, and the cncf-kubernetes hooks reaching the lab through a kubeconfig."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import kubernetes
import pytest
from airflow.providers.cncf.kubernetes.hooks.kubernetes import AsyncKubernetesHook, KubernetesHook
from api_answers import expect_answer
from kubernetes.client import ApiException
from servers import SERVERS, make_pod

from airflow_provider_dispatch_lab.apiserver.auth.auth import Decision, UserInfo
from airflow_provider_dispatch_lab.apiserver.faults import FaultInjector, FaultRule
from airflow_provider_dispatch_lab.apiserver.requests import RequestInfo
from airflow_provider_dispatch_lab.runtime import Lab
from airflow_provider_dispatch_lab.scenario import manifests

API_SERVERS = SERVERS


class ReadOnlyAuthorizer:
    """Allows reads only: the shape of the lab's read-only identity, without tokens."""

    def authenticate(self, authorization: str | None) -> UserInfo | None:
        return UserInfo("reader")

    def authorize(self, user: UserInfo, request: RequestInfo) -> Decision:
        allowed = not request.is_resource or request.verb in ("get", "list", "watch")
        return Decision(allowed, "" if allowed else "reads only")


@pytest.fixture(scope="module")
def faulty_lab() -> Iterator[tuple[Lab, FaultInjector]]:
    injector = FaultInjector(seed=7)
    with Lab(speed=100.0, middlewares=(injector.middleware,)) as lab:
        yield lab, injector


@pytest.fixture(scope="module")
def faulty_core(faulty_lab: tuple[Lab, FaultInjector]) -> kubernetes.client.CoreV1Api:
    lab, _ = faulty_lab
    configuration = kubernetes.client.Configuration()
    kubernetes.config.load_kube_config(str(lab.kubeconfig("faulty")), client_configuration=configuration)
    configuration.retries = 0  # urllib3 would otherwise retry 429/5xx itself for some methods
    return kubernetes.client.CoreV1Api(kubernetes.client.ApiClient(configuration))


def test_forbidden_is_403_with_the_rbac_message() -> None:
    authorizer = ReadOnlyAuthorizer()
    with Lab(speed=100.0, authenticator=authorizer, authorizer=authorizer) as lab:
        core = kubernetes.client.CoreV1Api(kubernetes.config.new_client_from_config(str(lab.kubeconfig())))
        assert core.list_namespaced_pod("default").items == []
        with pytest.raises(ApiException) as raised:
            core.create_namespaced_pod("default", make_pod("p"))
    status = expect_answer(raised.value, 403, "Forbidden")
    assert status["message"] == (
        'pods is forbidden: User "reader" cannot create resource "pods" in API group "" in the namespace "default": '
        "reads only"
    )


def test_429_carries_retry_after(
    faulty_lab: tuple[Lab, FaultInjector], faulty_core: kubernetes.client.CoreV1Api
) -> None:
    _, injector = faulty_lab
    injector.add(
        FaultRule("429", verbs=frozenset({"list"}), resources=frozenset({"pods"}), count=1, retry_after_seconds=3)
    )
    with pytest.raises(ApiException) as raised:
        faulty_core.list_namespaced_pod("default")
    status = expect_answer(raised.value, 429)
    assert raised.value.headers["Retry-After"] == "3"
    assert status["details"]["retryAfterSeconds"] == 3
    assert faulty_core.list_namespaced_pod("default").items == []  # the rule was spent


def test_500_is_an_internal_error_status(
    faulty_lab: tuple[Lab, FaultInjector], faulty_core: kubernetes.client.CoreV1Api
) -> None:
    _, injector = faulty_lab
    injector.add(FaultRule("500", verbs=frozenset({"get"}), resources=frozenset({"namespaces"}), count=1))
    with pytest.raises(ApiException) as raised:
        faulty_core.read_namespace("default")
    expect_answer(raised.value, 500, "InternalError")
    assert faulty_core.read_namespace("default").metadata.name == "default"


def test_fault_rates_are_reproducible_from_the_seed() -> None:
    def fired(seed: int) -> list[bool]:
        injector = FaultInjector(seed=seed)
        rule = injector.add(FaultRule("500", rate=0.5))
        info = RequestInfo(True, "/api/v1/pods", "list", "", "v1", "pods")
        outcomes = []
        for _ in range(20):
            before = rule.fired
            injector._pick(info)
            outcomes.append(rule.fired > before)
        return outcomes

    assert fired(3) == fired(3)
    assert fired(3) != fired(4)
    assert 0 < sum(fired(3)) < 20


def test_kubernetes_hook_through_a_kubeconfig(kubeconfig: Path, namespace: str) -> None:
    hook = KubernetesHook(conn_id=None, config_file=str(kubeconfig))
    hook.core_v1_client.create_namespaced_pod(namespace, make_pod("p"))
    assert [p.metadata.name for p in hook.core_v1_client.list_namespaced_pod(namespace).items] == ["p"]
    created = hook.create_custom_object(
        group="trainer.kubeflow.org",
        version="v1alpha1",
        plural="trainjobs",
        body=manifests.trainjob("tj"),
        namespace=namespace,
    )
    assert created["metadata"]["uid"]


async def test_async_kubernetes_hook_through_connection_extras(kubeconfig: Path, namespace: str) -> None:
    hook = AsyncKubernetesHook(conn_id=None, connection_extras={"kube_config_path": str(kubeconfig)})
    kubernetes.client.CoreV1Api(kubernetes.config.new_client_from_config(str(kubeconfig))).create_namespaced_pod(
        namespace, make_pod("p")
    )
    pod = await hook.get_pod("p", namespace)
    assert pod.metadata.name == "p"

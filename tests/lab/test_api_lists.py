"""Lists: selectors, pagination over one snapshot, resourceVersion semantics, 410 on expired tokens."""

from __future__ import annotations

import kubernetes
import pytest
from api_answers import expect_answer
from kubernetes.client import ApiException
from servers import SERVERS, Server, make_pod

API_SERVERS = SERVERS


def _make_pods(core_v1: kubernetes.client.CoreV1Api, namespace: str) -> None:
    core_v1.create_namespaced_pod(namespace, make_pod("a", labels={"app": "x", "tier": "web"}, node_name="n1"))
    core_v1.create_namespaced_pod(namespace, make_pod("b", labels={"app": "x", "tier": "db"}, node_name="n2"))
    core_v1.create_namespaced_pod(namespace, make_pod("c", labels={"app": "y"}))
    core_v1.patch_namespaced_pod_status("b", namespace, {"status": {"phase": "Running"}})


def _names(pods: kubernetes.client.V1PodList) -> list[str]:
    return [p.metadata.name for p in pods.items]


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("app=x", ["a", "b"]),
        ("app==x,tier!=web", ["b"]),
        ("tier", ["a", "b"]),
        ("!tier", ["c"]),
        ("tier in (web, db)", ["a", "b"]),
        ("tier notin (web)", ["b", "c"]),
        ("app in (y),!tier", ["c"]),
        ("", ["a", "b", "c"]),
    ],
)
def test_label_selectors(
    core_v1: kubernetes.client.CoreV1Api, namespace: str, selector: str, expected: list[str]
) -> None:
    _make_pods(core_v1, namespace)
    assert _names(core_v1.list_namespaced_pod(namespace, label_selector=selector)) == expected


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("metadata.name=b", ["b"]),
        ("spec.nodeName=n1", ["a"]),
        ("spec.nodeName=", ["c"]),
        ("status.phase=Running", ["b"]),
        ("status.phase!=Running,spec.nodeName!=n1", ["c"]),
    ],
)
def test_field_selectors(
    core_v1: kubernetes.client.CoreV1Api, namespace: str, selector: str, expected: list[str]
) -> None:
    _make_pods(core_v1, namespace)
    assert _names(core_v1.list_namespaced_pod(namespace, field_selector=selector)) == expected


@pytest.mark.parametrize(
    ("label_selector", "field_selector"),
    [("a b", ""), ("a,", ""), ("app in (x", ""), ("", "spec.unknownField=x"), ("", "nonsense")],
)
def test_bad_selectors_are_400(
    core_v1: kubernetes.client.CoreV1Api, namespace: str, label_selector: str, field_selector: str
) -> None:
    with pytest.raises(ApiException) as raised:
        core_v1.list_namespaced_pod(namespace, label_selector=label_selector, field_selector=field_selector)
    expect_answer(raised.value, 400, "BadRequest")


def test_cross_namespace_list_and_cluster_scope(core_v1: kubernetes.client.CoreV1Api, namespace: str) -> None:
    _make_pods(core_v1, namespace)
    everywhere = core_v1.list_pod_for_all_namespaces(label_selector="app=x")
    assert {(p.metadata.namespace, p.metadata.name) for p in everywhere.items} >= {
        (namespace, "a"),
        (namespace, "b"),
    }


def test_pages_come_from_one_snapshot(core_v1: kubernetes.client.CoreV1Api, namespace: str) -> None:
    for index in range(7):
        core_v1.create_namespaced_pod(namespace, make_pod(f"p{index}"))
    first = core_v1.list_namespaced_pod(namespace, limit=3)
    assert _names(first) == ["p0", "p1", "p2"]
    assert first.metadata.remaining_item_count == 4
    snapshot = first.metadata.resource_version
    # Changes after the first page must not show in the later pages.
    core_v1.delete_namespaced_pod("p5", namespace)
    core_v1.create_namespaced_pod(namespace, make_pod("p9"))
    second = core_v1.list_namespaced_pod(namespace, limit=3, _continue=first.metadata._continue)
    third = core_v1.list_namespaced_pod(namespace, limit=3, _continue=second.metadata._continue)
    assert _names(second) + _names(third) == ["p3", "p4", "p5", "p6"]
    assert second.metadata.resource_version == third.metadata.resource_version == snapshot
    assert third.metadata._continue is None
    assert "p9" in _names(core_v1.list_namespaced_pod(namespace))


def test_expired_continue_token_is_410(server: Server, core_v1: kubernetes.client.CoreV1Api, namespace: str) -> None:
    for index in range(3):
        core_v1.create_namespaced_pod(namespace, make_pod(f"p{index}"))
    first = core_v1.list_namespaced_pod(namespace, limit=1)
    core_v1.create_namespaced_pod(namespace, make_pod("later"))
    server.compact()
    if server.name == "real":
        # The real API server serves the page from its watch cache's snapshot, which an etcd compaction does not
        # end: the token expires only when the cache's window passes it (docs/fidelity.md).
        page = core_v1.list_namespaced_pod(namespace, limit=1, _continue=first.metadata._continue)
        assert (_names(page), page.metadata.resource_version) == (["p1"], first.metadata.resource_version)
        return
    with pytest.raises(ApiException) as raised:
        core_v1.list_namespaced_pod(namespace, limit=1, _continue=first.metadata._continue)
    status = expect_answer(raised.value, 410, "Expired")
    assert status["message"].startswith("The provided continue parameter is too old")
    assert status["metadata"]["continue"]  # the inconsistent-continue token to carry on with


def test_exact_resource_version_reads_the_past(
    server: Server, core_v1: kubernetes.client.CoreV1Api, namespace: str
) -> None:
    core_v1.create_namespaced_pod(namespace, make_pod("old"))
    before = core_v1.list_namespaced_pod(namespace).metadata.resource_version
    core_v1.create_namespaced_pod(namespace, make_pod("new"))
    core_v1.delete_namespaced_pod("old", namespace)
    past = core_v1.list_namespaced_pod(namespace, resource_version=before, resource_version_match="Exact")
    assert _names(past) == ["old"]
    assert past.metadata.resource_version == before
    assert _names(core_v1.list_namespaced_pod(namespace)) == ["new"]
    server.compact()
    if server.name == "real":
        # served from the watch cache's snapshot at `before`, which outlives the etcd compaction (docs/fidelity.md)
        assert _names(
            core_v1.list_namespaced_pod(namespace, resource_version=before, resource_version_match="Exact")
        ) == ["old"]
        return
    with pytest.raises(ApiException) as raised:
        core_v1.list_namespaced_pod(namespace, resource_version=before, resource_version_match="Exact")
    expect_answer(raised.value, 410)


def test_resource_version_semantics(core_v1: kubernetes.client.CoreV1Api, namespace: str) -> None:
    core_v1.create_namespaced_pod(namespace, make_pod("p"))
    current = int(core_v1.list_namespaced_pod(namespace).metadata.resource_version)
    not_older = core_v1.list_namespaced_pod(namespace, resource_version=str(current - 1))
    assert int(not_older.metadata.resource_version) >= current
    assert _names(core_v1.list_namespaced_pod(namespace, resource_version="0")) == ["p"]
    with pytest.raises(ApiException) as too_new:
        core_v1.list_namespaced_pod(namespace, resource_version=str(current + 1_000_000))
    assert "Too large resource version" in expect_answer(too_new.value, 504)["message"]
    # `ValidateListOptions`: one 422 Invalid on ListOptions, as the real API server answers
    with pytest.raises(ApiException) as no_version:
        core_v1.list_namespaced_pod(namespace, resource_version_match="Exact")
    assert expect_answer(no_version.value, 422)["message"] == (
        'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden '
        "unless resourceVersion is provided"
    )
    with pytest.raises(ApiException) as exact_zero:
        core_v1.list_namespaced_pod(namespace, resource_version="0", resource_version_match="Exact")
    status = expect_answer(exact_zero.value, 422, "Invalid")
    assert (status["details"]["kind"], status["details"]["group"]) == ("ListOptions", "meta.k8s.io")
    assert status["details"]["causes"] == [
        {
            "reason": "FieldValueForbidden",
            "message": 'Forbidden: resourceVersionMatch "exact" is forbidden for resourceVersion "0"',
            "field": "resourceVersionMatch",
        }
    ]

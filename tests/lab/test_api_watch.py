"""Watches through the official clients' watch helpers: events, selectors, bookmarks, 410."""

from __future__ import annotations

import kubernetes
import kubernetes_asyncio
import pytest
from kubernetes import watch
from kubernetes.client import ApiException

from airflow_provider_dispatch.lab import manifests
from airflow_provider_dispatch.lab.runtime import Lab


def test_watch_from_a_resource_version_sees_every_change(core_v1: kubernetes.client.CoreV1Api, namespace: str) -> None:
    start = core_v1.list_namespaced_pod(namespace).metadata.resource_version
    core_v1.create_namespaced_pod(namespace, manifests.pod("p"))
    core_v1.patch_namespaced_pod("p", namespace, {"metadata": {"labels": {"x": "1"}}})
    core_v1.delete_namespaced_pod("p", namespace)
    seen = [
        (event["type"], event["object"].metadata.name)
        for event in watch.Watch().stream(
            core_v1.list_namespaced_pod, namespace, resource_version=start, timeout_seconds=1
        )
    ]
    assert seen == [("ADDED", "p"), ("MODIFIED", "p"), ("DELETED", "p")]


def test_watch_without_a_version_starts_with_the_current_state(
    core_v1: kubernetes.client.CoreV1Api, namespace: str
) -> None:
    core_v1.create_namespaced_pod(namespace, manifests.pod("a"))
    core_v1.create_namespaced_pod(namespace, manifests.pod("b"))
    stream = watch.Watch().stream(core_v1.list_namespaced_pod, namespace, timeout_seconds=1)
    assert sorted((e["type"], e["object"].metadata.name) for e in stream) == [("ADDED", "a"), ("ADDED", "b")]


def test_selector_changes_become_added_and_deleted(core_v1: kubernetes.client.CoreV1Api, namespace: str) -> None:
    start = core_v1.list_namespaced_pod(namespace).metadata.resource_version
    core_v1.create_namespaced_pod(namespace, manifests.pod("p", labels={"run": "old"}))
    core_v1.patch_namespaced_pod("p", namespace, {"metadata": {"labels": {"run": "new"}}})
    core_v1.patch_namespaced_pod("p", namespace, {"metadata": {"labels": {"run": "old"}}})
    seen = [
        event["type"]
        for event in watch.Watch().stream(
            core_v1.list_namespaced_pod,
            namespace,
            label_selector="run=new",
            resource_version=start,
            timeout_seconds=1,
        )
    ]
    assert seen == ["ADDED", "DELETED"]


def test_bookmarks_carry_the_resource_version(lab: Lab, core_v1: kubernetes.client.CoreV1Api, namespace: str) -> None:
    start = core_v1.list_namespaced_pod(namespace).metadata.resource_version
    core_v1.create_namespaced_pod(namespace, manifests.pod("p"))
    response = core_v1.list_namespaced_pod(
        namespace,
        watch=True,
        resource_version=start,
        allow_watch_bookmarks=True,
        timeout_seconds=2,
        _preload_content=False,
    )
    first = response.readline()
    assert b'"ADDED"' in first
    lab.call(lambda: lab.clock.advance(61))  # the cacher bookmarks about once a minute of lab time
    bookmark = response.readline()
    response.close()
    assert b'"BOOKMARK"' in bookmark
    assert b'"resourceVersion"' in bookmark


def test_send_initial_events_ends_with_an_annotated_bookmark(
    core_v1: kubernetes.client.CoreV1Api, namespace: str
) -> None:
    core_v1.create_namespaced_pod(namespace, manifests.pod("p"))
    events = list(
        watch.Watch().stream(
            core_v1.list_namespaced_pod,
            namespace,
            send_initial_events=True,
            resource_version_match="NotOlderThan",
            allow_watch_bookmarks=True,
            timeout_seconds=1,
        )
    )
    assert [e["type"] for e in events[:2]] == ["ADDED", "BOOKMARK"]
    assert events[1]["raw_object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
    # Later events, if the second of wall time lets lab time pass a bookmark period, are plain bookmarks.
    assert {e["type"] for e in events[2:]} <= {"BOOKMARK"}


def test_too_old_resource_version_is_410(lab: Lab, core_v1: kubernetes.client.CoreV1Api, namespace: str) -> None:
    start = core_v1.list_namespaced_pod(namespace).metadata.resource_version
    core_v1.create_namespaced_pod(namespace, manifests.pod("p"))
    lab.call(lambda: lab.inner.store.compact())
    with pytest.raises(ApiException) as raised:
        # With a timeout the client does not retry the 410 itself: it raises, and a caller must relist.
        list(watch.Watch().stream(core_v1.list_namespaced_pod, namespace, resource_version=start, timeout_seconds=1))
    assert raised.value.status == 410
    assert "too old resource version" in raised.value.reason


async def test_async_watch(async_api_client: kubernetes_asyncio.client.ApiClient, namespace: str) -> None:
    core = kubernetes_asyncio.client.CoreV1Api(async_api_client)
    start = (await core.list_namespaced_pod(namespace)).metadata.resource_version
    await core.create_namespaced_pod(namespace, manifests.pod("p"))
    seen = []
    async with kubernetes_asyncio.watch.Watch() as stream:
        async for event in stream.stream(
            core.list_namespaced_pod, namespace, resource_version=start, timeout_seconds=1
        ):
            seen.append((event["type"], event["object"].metadata.name))
    assert seen == [("ADDED", "p")]

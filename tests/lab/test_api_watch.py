"""Watches through the official clients' watch helpers: events, selectors, bookmarks, 410."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

import kubernetes
import kubernetes_asyncio
import pytest
from api_answers import expect_answer
from kubernetes import watch
from kubernetes.client import ApiException
from servers import SERVERS, Server, make_pod

from airflow_provider_dispatch_lab.runtime import Lab

API_SERVERS = SERVERS
#: long enough for a write to land well before the real cacher's pre-timeout bookmark (decided 1 to 3 s before)
PRETIMEOUT_WATCH_SECONDS = 8


def test_watch_from_a_resource_version_sees_every_change(core_v1: kubernetes.client.CoreV1Api, namespace: str) -> None:
    start = core_v1.list_namespaced_pod(namespace).metadata.resource_version
    core_v1.create_namespaced_pod(namespace, make_pod("p"))
    core_v1.patch_namespaced_pod("p", namespace, {"metadata": {"labels": {"x": "1"}}})
    core_v1.delete_namespaced_pod("p", namespace)
    seen = [
        (event["type"], event["object"].metadata.name, event["object"].metadata.deletion_timestamp is not None)
        for event in watch.Watch().stream(
            core_v1.list_namespaced_pod, namespace, resource_version=start, timeout_seconds=1
        )
    ]
    # The unscheduled pod's grace period is 0, but the registry's graceful path first writes it as being deleted
    # (a MODIFIED with its deletionTimestamp), then removes it (`registry/store.go`; docs/fidelity.md).
    assert seen == [("ADDED", "p", False), ("MODIFIED", "p", False), ("MODIFIED", "p", True), ("DELETED", "p", True)]


def test_watch_without_a_version_starts_with_the_current_state(
    core_v1: kubernetes.client.CoreV1Api, namespace: str
) -> None:
    core_v1.create_namespaced_pod(namespace, make_pod("a"))
    core_v1.create_namespaced_pod(namespace, make_pod("b"))
    stream = watch.Watch().stream(core_v1.list_namespaced_pod, namespace, timeout_seconds=1)
    assert sorted((e["type"], e["object"].metadata.name) for e in stream) == [("ADDED", "a"), ("ADDED", "b")]


def test_selector_changes_become_added_and_deleted(core_v1: kubernetes.client.CoreV1Api, namespace: str) -> None:
    start = core_v1.list_namespaced_pod(namespace).metadata.resource_version
    core_v1.create_namespaced_pod(namespace, make_pod("p", labels={"run": "old"}))
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


def _bookmarked_watch(
    core_v1: kubernetes.client.CoreV1Api, namespace: str, start: str, *, timeout: int, label_selector: str = ""
) -> Any:
    """A raw watch of the namespace's pods from `start`, with bookmarks, ending after `timeout` seconds."""
    return core_v1.list_namespaced_pod(
        namespace,
        label_selector=label_selector,
        watch=True,
        resource_version=start,
        allow_watch_bookmarks=True,
        timeout_seconds=timeout,
        _preload_content=False,
    )


def test_bookmarks_carry_the_resource_version(lab: Lab, core_v1: kubernetes.client.CoreV1Api, namespace: str) -> None:
    """The cacher's periodic bookmark, about once a minute: lab time is a lab control, so the lab alone."""
    start = core_v1.list_namespaced_pod(namespace).metadata.resource_version
    core_v1.create_namespaced_pod(namespace, make_pod("p"))
    response = _bookmarked_watch(core_v1, namespace, start, timeout=2)
    first = response.readline()
    assert b'"ADDED"' in first
    lab.call(lambda: lab.clock.advance(61))  # the cacher bookmarks about once a minute of lab time
    bookmark = response.readline()
    response.close()
    assert b'"BOOKMARK"' in bookmark
    assert b'"resourceVersion"' in bookmark


def test_a_bookmark_comes_before_the_timeout_at_the_newest_revision(
    server: Server, core_v1: kubernetes.client.CoreV1Api, namespace: str
) -> None:
    """`cache_watcher.go` `nextBookmarkTime`: a bookmark about 2 s before the watch's timeout, at the newest
    revision, so that a client resumes from near now.

    The real cacher sends a bookmark only at a revision newer than the last event it sent that watcher
    (`cache_watcher.go` `process`), and its bookmarks carry the newest revision its cache of pods has processed
    (`cacher.go` `dispatchEvents`). On a quiet cluster there is none: the watch of a lone pod gets no bookmark at
    all (kube-apiserver v1.36.3, measured; an etcd compaction changes nothing). So the test writes a pod the watch
    does not select once the watch has started, and the bookmark must carry that write's revision or a later one.
    The real cacher decides a watcher's pre-timeout bookmark up to a second early (its one-second buckets), so
    the watch lasts long enough that the write comes well before. The lab's clock is stopped meanwhile, so that
    its periodic bookmarks (about once a minute of lab time) cannot stand in for the pre-timeout one."""
    start = core_v1.list_namespaced_pod(namespace).metadata.resource_version
    core_v1.create_namespaced_pod(namespace, make_pod("p", labels={"watched": "yes"}))
    with _lab_time_stopped(server):
        response = _bookmarked_watch(
            core_v1, namespace, start, timeout=PRETIMEOUT_WATCH_SECONDS, label_selector="watched=yes"
        )
        events = [json.loads(response.readline())]
        unselected = core_v1.create_namespaced_pod(namespace, make_pod("q", labels={"watched": "no"}))
        while line := response.readline():  # until the server ends the watch at its timeout
            events.append(json.loads(line))
        response.close()
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events[:1]] == [("ADDED", "p")]
    bookmarks = [int(e["object"]["metadata"]["resourceVersion"]) for e in events[1:] if e["type"] == "BOOKMARK"]
    assert [e["type"] for e in events[1:]] == ["BOOKMARK"] * len(bookmarks), events  # q is not selected
    assert bookmarks, f"no bookmark before the watch's timeout: {events}"
    assert bookmarks[-1] >= int(unselected.metadata.resource_version), (bookmarks, unselected.metadata)


@contextlib.contextmanager
def _lab_time_stopped(server: Server) -> Iterator[None]:
    """On the lab, its clock stopped for the block (lab time is a lab control; the real server has none)."""
    lab = server.lab
    if lab is None:
        yield
        return
    speed = lab.call(lambda: lab.clock.speed)
    lab.call(lambda: lab.clock.set_speed(0.0))
    try:
        yield
    finally:
        lab.call(lambda: lab.clock.set_speed(speed))


def test_send_initial_events_ends_with_an_annotated_bookmark(
    core_v1: kubernetes.client.CoreV1Api, namespace: str
) -> None:
    core_v1.create_namespaced_pod(namespace, make_pod("p"))
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


def test_too_old_resource_version_is_410(server: Server, core_v1: kubernetes.client.CoreV1Api, namespace: str) -> None:
    start = core_v1.list_namespaced_pod(namespace).metadata.resource_version
    core_v1.create_namespaced_pod(namespace, make_pod("p"))
    server.compact()
    if server.name == "real":
        # The real API server serves the watch from its watch cache, whose window an etcd compaction does not
        # shorten: the events after `start` are still there (docs/fidelity.md).
        events = watch.Watch().stream(core_v1.list_namespaced_pod, namespace, resource_version=start, timeout_seconds=1)
        assert [(e["type"], e["object"].metadata.name) for e in events] == [("ADDED", "p")]
        return
    with pytest.raises(ApiException) as raised:
        # With a timeout the client does not retry the 410 itself: it raises, and a caller must relist.
        list(watch.Watch().stream(core_v1.list_namespaced_pod, namespace, resource_version=start, timeout_seconds=1))
    expect_answer(raised.value, 410)
    assert "too old resource version" in raised.value.reason


async def test_async_watch(async_api_client: kubernetes_asyncio.client.ApiClient, namespace: str) -> None:
    core = kubernetes_asyncio.client.CoreV1Api(async_api_client)
    start = (await core.list_namespaced_pod(namespace)).metadata.resource_version
    await core.create_namespaced_pod(namespace, make_pod("p"))
    seen = []
    async with kubernetes_asyncio.watch.Watch() as stream:
        async for event in stream.stream(
            core.list_namespaced_pod, namespace, resource_version=start, timeout_seconds=1
        ):
            seen.append((event["type"], event["object"].metadata.name))
    assert seen == [("ADDED", "p")]

"""The adapters themselves: construction, options, one reused client, no credentials in errors, the wire form."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import urllib3
import yaml

from airflow_provider_dispatch import dispatch
from airflow_provider_dispatch.dispatch import AsyncDispatchAdapter, DispatchAdapter
from airflow_provider_dispatch.dispatch import vocabulary as v
from airflow_provider_dispatch.dispatch.errors import ForbiddenError, NotFoundError, RefusedError
from airflow_provider_dispatch.dispatch.programs import (
    ApiFailure,
    CreateObject,
    GetNode,
    GetObject,
    ListObjects,
    ReplaceObject,
)
from airflow_provider_dispatch.dispatch.transport import decode_answer, describe_transport_error, http_call

from .cluster import Cluster
from .conftest import READER, WRITER, DispatchLab, MakeAdapter
from .either import Either

# --- the wire form (transport.py) --------------------------------------------------------------------------

BODY = {"metadata": {"name": "ft-7", "namespace": "ml", "resourceVersion": "12"}, "spec": {"suspend": False}}


@pytest.mark.parametrize(
    ("request_", "method", "path", "query"),
    [
        (
            GetObject(v.TRAINJOB, "ml", "ft-7"),
            "GET",
            "/apis/trainer.kubeflow.org/v1alpha1/namespaces/ml/trainjobs/ft-7",
            (),
        ),
        (
            GetObject(v.CLUSTER_TRAINING_RUNTIME, None, "rt"),
            "GET",
            "/apis/trainer.kubeflow.org/v1alpha1/clustertrainingruntimes/rt",
            (),
        ),
        (GetNode("n1"), "GET", "/api/v1/nodes/n1", ()),
        (
            ListObjects(v.POD, "ml", "a=b", "7", "Exact", 5),
            "GET",
            "/api/v1/namespaces/ml/pods",
            (("labelSelector", "a=b"), ("resourceVersion", "7"), ("resourceVersionMatch", "Exact"), ("limit", "5")),
        ),
        (
            ListObjects(v.POD, "ml", limit=5, continue_="tok"),
            "GET",
            "/api/v1/namespaces/ml/pods",
            (("limit", "5"), ("continue", "tok")),
        ),
        (
            ReplaceObject(v.TRAINJOB, BODY),
            "PUT",
            "/apis/trainer.kubeflow.org/v1alpha1/namespaces/ml/trainjobs/ft-7",
            (),
        ),
        (
            CreateObject(v.TRAINJOB, "ml", BODY),
            "POST",
            "/apis/trainer.kubeflow.org/v1alpha1/namespaces/ml/trainjobs",
            (),
        ),
    ],
)
def test_http_call(request_: Any, method: str, path: str, query: tuple[tuple[str, str], ...]) -> None:
    call = http_call(request_)
    assert (call.method, call.path, call.query) == (method, path, query)
    assert call.body == (BODY if method in ("PUT", "POST") else None)


@pytest.mark.parametrize(
    ("status", "data", "expected"),
    [
        (200, b'{"a": 1}', {"a": 1}),
        (201, '{"a": 1}', {"a": 1}),
        (200, b"[1]", ApiFailure(None, "the API server answered 200 with a body that is not a JSON object")),
        (200, b"<html>", ApiFailure(None, "the API server answered 200 with a body that is not a JSON object")),
        (404, b'{"kind": "Status", "reason": "NotFound"}', ApiFailure(404, {"kind": "Status", "reason": "NotFound"})),
        (503, b"upstream connect error", ApiFailure(503, "upstream connect error")),
        (500, None, ApiFailure(500, "")),
    ],
)
def test_decode_answer(status: int, data: bytes | str | None, expected: object) -> None:
    assert decode_answer(status, data) == expected


def _chained(outer: BaseException, inner: BaseException) -> BaseException:
    outer.__cause__ = inner
    return outer


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (
            urllib3.exceptions.MaxRetryError(
                None,
                "/api",
                _chained(
                    urllib3.exceptions.NewConnectionError(None, "x"), ConnectionRefusedError(111, "Connection refused")
                ),  # type: ignore[arg-type]
            ),
            "MaxRetryError < NewConnectionError < ConnectionRefusedError: Connection refused",
        ),
        (urllib3.exceptions.ReadTimeoutError(None, "/api", "Read timed out."), "ReadTimeoutError: timed out"),  # type: ignore[arg-type]
        (TimeoutError(), "TimeoutError: timed out"),
        (aiohttp.ServerDisconnectedError(), "ServerDisconnectedError: Server disconnected"),
        (
            urllib3.exceptions.ProtocolError(
                "Connection aborted.", ConnectionResetError(104, "Connection reset by peer")
            ),
            "ProtocolError < ConnectionResetError: Connection reset by peer",
        ),
        (OSError("Authorization: Bearer s3cr3t"), "OSError: Bearer <redacted>"),  # scrubbed (errors.scrub)
    ],
)
def test_describe_transport_error(error: BaseException, expected: str) -> None:
    assert describe_transport_error(error) == expected


# --- construction and options -----------------------------------------------------------------------------


def test_the_adapters_are_exported_lazily() -> None:
    assert dispatch.DispatchAdapter is DispatchAdapter
    assert dispatch.AsyncDispatchAdapter is AsyncDispatchAdapter
    assert {"DispatchAdapter", "AsyncDispatchAdapter"} <= set(dispatch.__all__)
    with pytest.raises(AttributeError):
        _ = dispatch.NoSuchAdapter  # type: ignore[attr-defined]


async def build_and_close(kind: str, path: Path, **options: Any) -> None:
    """Build an adapter of `kind` from a kubeconfig, and close it."""
    if kind == "sync":
        DispatchAdapter.from_kubeconfig(path, **options).close()
    else:
        await (await AsyncDispatchAdapter.from_kubeconfig(path, **options)).close()


@pytest.mark.parametrize(
    "options",
    [
        {"page_size": 0},
        {"page_size": True},
        {"pod_read": "cached"},
        {"request_timeout": (0, 5)},
        {"request_timeout": (5,)},
    ],
)
async def test_bad_options_are_refused_at_construction(
    kind: str, dispatch_lab: DispatchLab, options: dict[str, Any]
) -> None:
    path = dispatch_lab.kubeconfig(WRITER)
    with pytest.raises(ValueError, match=r"^(pod_read|page_size|request_timeout) must be"):
        await build_and_close(kind, path, **options)


async def test_from_config_dict(kind: str, dispatch_lab: DispatchLab, cluster: Cluster) -> None:
    config = yaml.safe_load(dispatch_lab.kubeconfig(WRITER).read_text())
    if kind == "sync":
        with DispatchAdapter.from_config_dict(config) as sync_adapter, pytest.raises(NotFoundError):
            sync_adapter.inspect(f"{cluster.namespace}/ghost")
    else:
        async with await AsyncDispatchAdapter.from_config_dict(config) as async_adapter:
            with pytest.raises(NotFoundError):
                await async_adapter.inspect(f"{cluster.namespace}/ghost")


@pytest.mark.parametrize("damage", ["yaml", "context"])
async def test_a_bad_kubeconfig_is_refused_without_quoting_it(
    kind: str, dispatch_lab: DispatchLab, tmp_path: Path, damage: str
) -> None:
    text = dispatch_lab.kubeconfig(WRITER).read_text()
    assert "writer-token" in text
    path = tmp_path / "kubeconfig"
    path.write_text(text.replace("token: writer-token", "token: [writer-token") if damage == "yaml" else text)
    options = {"context": "no-such-context"} if damage == "context" else {}
    with pytest.raises(RefusedError, match="could not be loaded") as refused:
        await build_and_close(kind, path, **options)
    assert "writer-token" not in str(refused.value)
    assert refused.value.__cause__ is None
    assert refused.value.__suppress_context__


async def test_one_client_and_one_connection_serve_every_call(
    make_adapter: MakeAdapter, kind: str, cluster: Cluster, dispatch_lab: DispatchLab
) -> None:
    adapter = await make_adapter(kind)
    runtime = cluster.runtime()
    node = cluster.node("n1")
    cluster.held_after_execution("ft-7", runtime=runtime, admission=1, pods_on=[node])
    client = adapter.adapter.api_client
    mark = dispatch_lab.recorder.mark()
    ref = f"{cluster.namespace}/ft-7"
    for _ in range(3):
        await adapter.inspect(ref)
        await adapter.ceased(ref)
    calls = dispatch_lab.recorder.since(mark)
    assert len(calls) > 20
    assert len({c.peer for c in calls}) == 1  # keep-alive: the same TCP connection throughout
    assert adapter.adapter.api_client is client


async def respond(either: Either, request: ReplaceObject) -> object:
    """The adapter's own `respond`, awaited when it is the async one's."""
    if isinstance(either.adapter, DispatchAdapter):
        return either.adapter.respond(request)
    return await either.adapter.respond(request)


async def test_a_write_request_never_leaves_a_read_only_adapter(
    make_adapter: MakeAdapter, kind: str, dispatch_lab: DispatchLab
) -> None:
    """Defence in depth below the operations: `respond` itself refuses a write on a read-only adapter."""
    adapter = await make_adapter(kind, user=READER, read_only=True)
    mark = dispatch_lab.recorder.mark()
    with pytest.raises(ForbiddenError, match="read-only"):
        await respond(adapter, ReplaceObject(v.TRAINJOB, BODY))
    assert dispatch_lab.recorder.since(mark) == []


@pytest.fixture
def opened_files() -> Iterator[list[tuple[str, threading.Thread]]]:
    """Files opened while the fixture is active, with the thread that opened them (audit event `open`)."""
    seen: list[tuple[str, threading.Thread]] = []
    _WATCHERS.append(seen)
    yield seen
    _WATCHERS.remove(seen)


_WATCHERS: list[list[tuple[str, threading.Thread]]] = []


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event == "open" and _WATCHERS and isinstance(args[0], str):
        for watcher in _WATCHERS:
            watcher.append((args[0], threading.current_thread()))


sys.addaudithook(_audit)


async def test_the_async_kubeconfig_is_read_off_the_event_loop(
    dispatch_lab: DispatchLab, opened_files: list[tuple[str, threading.Thread]]
) -> None:
    path = str(dispatch_lab.kubeconfig(WRITER))
    start = len(opened_files)  # writing the kubeconfig (on this thread) is not part of the test
    adapter = await AsyncDispatchAdapter.from_kubeconfig(path)
    await adapter.close()
    readers = [thread for name, thread in opened_files[start:] if name == path]
    assert readers
    assert threading.current_thread() not in readers

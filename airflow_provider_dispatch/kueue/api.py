"""The few REST calls the controller makes itself, as plain JSON over the adapter's `kubernetes_asyncio` client.

The drain check and the write that raises A go through `AsyncDispatchAdapter` (the shared rule). What the
controller adds is what an admission check controller needs around it (k8s-apis.md §4.4): lists and watches
for its informers, a GET of the Workload it reconciles, and server-side apply of its own entries on the
`workloads/status` and `admissionchecks/status` subresources. Each is one `ApiClient.call_api` with
`_preload_content=False`, the same way the adapter calls (dispatch/async_adapter.py): the answer's bytes are
decoded once with `json.loads`, no client model is built, and all calls share the adapter's one aiohttp
session.

A failed call raises `ApiCallError` with the HTTP status (None when no HTTP answer came: refused, reset, timed
out) and the decoded Status body; the caller decides what it means. `asyncio.CancelledError` is never caught.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, Final

import aiohttp

from airflow_provider_dispatch.dispatch.errors import UnreachableError, scrub
from airflow_provider_dispatch.dispatch.transport import AUTH_SETTINGS, decode_status_body, describe_transport_error
from airflow_provider_dispatch.dispatch.vocabulary import ApiCoordinates

Obj = dict[str, Any]
JSON: Final = "application/json"
#: server-side apply; the body is JSON, which is YAML (`kubectl apply --server-side` sends the same type)
APPLY_PATCH: Final = "application/apply-patch+yaml"
TRANSPORT_ERRORS: tuple[type[BaseException], ...] = (aiohttp.ClientError, asyncio.TimeoutError, OSError)


class ApiCallError(Exception):
    """A call that failed: `status` None means no HTTP answer at all."""

    def __init__(self, status: int | None, body: Any, what: str) -> None:
        self.status = status
        self.body = body
        self.what = what
        reason = body.get("reason", "") if isinstance(body, Mapping) else ""
        message = body.get("message", "") if isinstance(body, Mapping) else str(body or "")
        self.reason = reason if isinstance(reason, str) else ""
        detail = scrub(f"{self.reason}: {message}" if self.reason else str(message))
        super().__init__(f"{what}: {status if status is not None else 'no answer'} {detail}".strip())

    @property
    def gone(self) -> bool:
        """410: the resourceVersion asked for was compacted (a watch or a continue token): relist."""
        return self.status == 410

    @property
    def conflict(self) -> bool:
        return self.status == 409

    @property
    def not_found(self) -> bool:
        return self.status == 404


def _timeout(connect: float, read: float) -> aiohttp.ClientTimeout:
    return aiohttp.ClientTimeout(total=None, connect=connect, sock_connect=connect, sock_read=read)


class KubeApi:
    """Raw JSON calls through one `kubernetes_asyncio.client.ApiClient` (not closed here). `write_permit`, when
    given, is asked before every write and raises to stop it unsent (`leader.WritePermit.check`: only the leader
    writes)."""

    def __init__(
        self,
        api_client: Any,
        *,
        connect_timeout: float = 10.0,
        read_timeout: float = 60.0,
        write_permit: Callable[[str], None] | None = None,
    ) -> None:
        self.api_client = api_client
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self.write_permit = write_permit

    async def _open(
        self,
        method: str,
        path: str,
        what: str,
        *,
        query: Mapping[str, str] | None = None,
        body: Obj | None = None,
        content_type: str = JSON,
        read_timeout: float | None = None,
    ) -> Any:
        """The unread aiohttp response of a 2xx answer; ApiCallError otherwise."""
        if method != "GET" and self.write_permit is not None:
            try:
                self.write_permit(what)
            except UnreachableError as refusal:  # not sent: to the caller, a call that got no answer
                raise ApiCallError(None, refusal.message, what) from None
        try:
            response = await self.api_client.call_api(
                path,
                method,
                query_params=list((query or {}).items()),
                header_params={"Accept": JSON, "Content-Type": content_type},
                body=body,
                auth_settings=list(AUTH_SETTINGS),
                _preload_content=False,
                _request_timeout=_timeout(self.connect_timeout, read_timeout or self.read_timeout),
            )
        except TRANSPORT_ERRORS as error:
            raise ApiCallError(None, describe_transport_error(error), what) from None
        if not 200 <= response.status < 300:
            try:
                data = await response.read()
            except TRANSPORT_ERRORS:
                data = b""
            finally:
                response.release()
            raise ApiCallError(response.status, decode_status_body(data), what)
        return response

    async def _json(self, method: str, path: str, what: str, **options: Any) -> Obj:
        response = await self._open(method, path, what, **options)
        try:
            data = await response.read()
        except TRANSPORT_ERRORS as error:
            raise ApiCallError(None, describe_transport_error(error), what) from None
        finally:
            response.release()
        try:
            decoded = json.loads(data or b"")
        except ValueError:
            decoded = None
        if not isinstance(decoded, dict):
            raise ApiCallError(None, "the answer was not a JSON object", what)
        return decoded

    async def get(self, coords: ApiCoordinates, namespace: str | None, name: str) -> Obj:
        path = coords.path(namespace, name)
        return await self._json("GET", path, f"get {coords.resource} {_where(namespace, name)}")

    async def list(
        self,
        coords: ApiCoordinates,
        *,
        label_selector: str | None = None,
        limit: int | None = None,
        continue_: str | None = None,
    ) -> Obj:
        """One page of a cluster-wide list, resourceVersion unset (a quorum read)."""
        query = {"labelSelector": label_selector, "limit": None if limit is None else str(limit), "continue": continue_}
        return await self._json(
            "GET", coords.path(), f"list {coords.resource}", query={k: v for k, v in query.items() if v is not None}
        )

    async def create(self, coords: ApiCoordinates, namespace: str | None, body: Obj) -> Obj:
        name = str((body.get("metadata") or {}).get("name", ""))
        return await self._json(
            "POST", coords.path(namespace), f"create {coords.resource} {_where(namespace, name)}", body=body
        )

    async def replace(self, coords: ApiCoordinates, namespace: str | None, name: str, body: Obj) -> Obj:
        """PUT: conditional on the body's `metadata.resourceVersion` (409 when the object changed since)."""
        path = coords.path(namespace, name)
        return await self._json("PUT", path, f"replace {coords.resource} {_where(namespace, name)}", body=body)

    async def apply_status(self, coords: ApiCoordinates, body: Obj, field_manager: str) -> Obj:
        """Server-side apply of `body` to the object's status subresource, with ForceOwnership."""
        meta = body.get("metadata") or {}
        namespace, name = meta.get("namespace"), str(meta.get("name", ""))
        path = coords.path(namespace, name) + "/status"
        return await self._json(
            "PATCH",
            path,
            f"apply {coords.resource}/status {_where(namespace, name)}",
            query={"fieldManager": field_manager, "force": "true"},
            body=body,
            content_type=APPLY_PATCH,
        )

    async def watch(
        self,
        coords: ApiCoordinates,
        resource_version: str,
        *,
        label_selector: str | None = None,
        timeout_seconds: int = 300,
    ) -> AsyncIterator[Obj]:
        """The events of a watch from `resource_version`, with bookmarks, until the server ends it.

        The server ends a watch after `timeout_seconds`; the read timeout is longer, so only a server that went
        silent beyond that is cut off. Lines are split here rather than with `readline`, so an event of any
        size (a Workload carries pod templates) is read whole.
        """
        query = {
            "watch": "true",
            "resourceVersion": resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(timeout_seconds),
        }
        if label_selector:
            query["labelSelector"] = label_selector
        what = f"watch {coords.resource}"
        response = await self._open("GET", coords.path(), what, query=query, read_timeout=timeout_seconds + 30.0)
        buffer = b""
        try:
            async for chunk in response.content.iter_any():
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    if line.strip():
                        yield _event(line, what)
            if buffer.strip():
                yield _event(buffer, what)
        except TRANSPORT_ERRORS as error:
            raise ApiCallError(None, describe_transport_error(error), what) from None
        finally:
            response.release()


def _event(line: bytes, what: str) -> Obj:
    try:
        event = json.loads(line)
    except ValueError:
        raise ApiCallError(None, "a watch event was not JSON", what) from None
    if not isinstance(event, dict):
        raise ApiCallError(None, "a watch event was not a JSON object", what)
    return event


def _where(namespace: str | None, name: str) -> str:
    return f"{namespace}/{name}" if namespace else name


__all__ = ["APPLY_PATCH", "ApiCallError", "KubeApi"]

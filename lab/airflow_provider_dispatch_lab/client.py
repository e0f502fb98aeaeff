"""The client the lab's simulated controllers use: plain JSON over the lab's own HTTP API.

The controllers (Trainer, JobSet, Job, scheduler, kubelets, node lifecycle, PodGC, Kueue) must behave like real
controllers, so they reach the cluster state only as real controllers do: through the API, with list+watch
informers whose cache lags behind the store, conditional writes that can conflict, and watches that can expire.
This module is their client-go: `LabClient` for requests and `Informer` for a watched cache (`client-go/tools/
cache/reflector.go`: list, then watch from the list's resourceVersion, relist on 410 Gone or on a dropped
stream). It speaks JSON dicts, not generated models, because that is all the controllers need.
"""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import aiohttp

from airflow_provider_dispatch.dispatch.vocabulary import ApiCoordinates

Obj = dict[str, Any]
PatchType = Literal["merge", "json", "strategic", "apply"]
_CONTENT_TYPES: dict[PatchType, str] = {
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "apply": "application/apply-patch+yaml",
}


class ApiStatusError(Exception):
    """A non-2xx answer, with the Status body the server sent."""

    def __init__(self, code: int, status: Obj) -> None:
        super().__init__(f"{code} {status.get('reason', '')}: {status.get('message', '')}")
        self.code = code
        self.status = status

    @property
    def reason(self) -> str:
        return str(self.status.get("reason", ""))


def is_not_found(error: BaseException) -> bool:
    return isinstance(error, ApiStatusError) and error.code == 404


def is_conflict(error: BaseException) -> bool:
    return isinstance(error, ApiStatusError) and error.code == 409


class LabClient:
    """Requests to the lab's API as one identity (a bearer token), on one reused HTTP session.

    `ca_file` is the CA bundle that verifies an `https://` server (the real control plane, `lab/real/`); the lab
    itself speaks plain HTTP on loopback and needs none.
    """

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        user_agent: str = "dispatch-lab-controller",
        ca_file: str | None = None,
    ) -> None:
        self._base = base_url.rstrip("/")
        self._ssl: ssl.SSLContext | None = ssl.create_default_context(cafile=ca_file) if ca_file else None
        self._headers = {
            "Authorization": f"Bearer {token}",
            "User-Agent": user_agent,
            "Accept": "application/json",
        }
        self._session: aiohttp.ClientSession | None = None

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(ssl=self._ssl) if self._ssl is not None else None
            self._session = aiohttp.ClientSession(
                headers=self._headers, timeout=aiohttp.ClientTimeout(total=None), connector=connector
            )
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    @staticmethod
    def _path(coords: ApiCoordinates, namespace: str | None, name: str | None, subresource: str | None) -> str:
        path = coords.path(namespace if coords.namespaced else None, name)
        return f"{path}/{subresource}" if subresource else path

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
    ) -> Obj:
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": content_type} if data is not None else {}
        async with self._http().request(method, self._base + path, params=params, data=data, headers=headers) as answer:
            payload = await answer.read()
            decoded: Obj = json.loads(payload) if payload else {}
            if answer.status >= 400:
                raise ApiStatusError(answer.status, decoded)
            return decoded

    async def get(
        self, coords: ApiCoordinates, namespace: str | None, name: str, subresource: str | None = None
    ) -> Obj:
        return await self.request("GET", self._path(coords, namespace, name, subresource))

    async def list(
        self,
        coords: ApiCoordinates,
        namespace: str | None = None,
        *,
        label_selector: str = "",
        field_selector: str = "",
        resource_version: str | None = None,
    ) -> Obj:
        params = {"labelSelector": label_selector, "fieldSelector": field_selector}
        if resource_version is not None:
            params["resourceVersion"] = resource_version
        return await self.request("GET", self._path(coords, namespace, None, None), params=params)

    async def create(self, coords: ApiCoordinates, namespace: str | None, body: Obj) -> Obj:
        return await self.request("POST", self._path(coords, namespace, None, None), body=body)

    async def replace(
        self,
        coords: ApiCoordinates,
        namespace: str | None,
        name: str,
        body: Obj,
        subresource: str | None = None,
    ) -> Obj:
        return await self.request("PUT", self._path(coords, namespace, name, subresource), body=body)

    async def patch(
        self,
        coords: ApiCoordinates,
        namespace: str | None,
        name: str,
        patch: Any,
        *,
        patch_type: PatchType = "merge",
        subresource: str | None = None,
        field_manager: str | None = None,
        force: bool = False,
    ) -> Obj:
        params: dict[str, str] = {}
        if field_manager:
            params["fieldManager"] = field_manager
        if force:
            params["force"] = "true"
        return await self.request(
            "PATCH",
            self._path(coords, namespace, name, subresource),
            params=params,
            body=patch,
            content_type=_CONTENT_TYPES[patch_type],
        )

    async def delete(
        self,
        coords: ApiCoordinates,
        namespace: str | None,
        name: str,
        *,
        grace_period_seconds: int | None = None,
        propagation_policy: str | None = None,
        uid: str | None = None,
    ) -> Obj:
        options: Obj = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        if propagation_policy is not None:
            options["propagationPolicy"] = propagation_policy
        if uid is not None:
            options["preconditions"] = {"uid": uid}
        return await self.request("DELETE", self._path(coords, namespace, name, None), body=options)

    async def post_subresource(
        self, coords: ApiCoordinates, namespace: str | None, name: str, subresource: str, body: Obj
    ) -> Obj:
        return await self.request("POST", self._path(coords, namespace, name, subresource), body=body)

    async def watch(
        self,
        coords: ApiCoordinates,
        namespace: str | None,
        resource_version: str,
        *,
        label_selector: str = "",
        timeout_seconds: int = 300,
    ) -> AsyncIterator[Obj]:
        """Watch events as dicts; the stream ends when the server ends it. A 410 arrives as an ERROR event."""
        params = {
            "watch": "true",
            "resourceVersion": resource_version,
            "allowWatchBookmarks": "true",
            "labelSelector": label_selector,
            "timeoutSeconds": str(timeout_seconds),
        }
        url = self._base + self._path(coords, namespace, None, None)
        async with self._http().get(url, params=params) as answer:
            if answer.status >= 400:
                raise ApiStatusError(answer.status, json.loads(await answer.read() or b"{}"))
            async for line in answer.content:
                if line.strip():
                    yield json.loads(line)


EventHandler = Callable[[str, Obj, Obj | None], Awaitable[None] | None]


@dataclass
class _Entry:
    obj: Obj


class Informer:
    """A list+watch cache of one kind, calling handlers on every change it sees.

    Like a client-go reflector it lists, then watches from the list's resourceVersion, and starts over with a
    fresh list when the watch ends or reports 410 Gone, so its cache is eventually consistent and can be stale
    in between: controllers built on it see the cluster as real controllers see it.
    """

    def __init__(
        self,
        client: LabClient,
        coords: ApiCoordinates,
        namespace: str | None = None,
        *,
        label_selector: str = "",
        relist_backoff: float = 0.05,
    ) -> None:
        self.client = client
        self.coords = coords
        self.namespace = namespace
        self.label_selector = label_selector
        self.relist_backoff = relist_backoff
        self._cache: dict[tuple[str, str], _Entry] = {}
        self._handlers: list[EventHandler] = []
        self.synced = asyncio.Event()
        self.resource_version = ""

    def on_change(self, handler: EventHandler) -> None:
        """`handler(type, obj, old)` with type ADDED, MODIFIED or DELETED."""
        self._handlers.append(handler)

    def get(self, namespace: str | None, name: str) -> Obj | None:
        entry = self._cache.get((namespace or "", name))
        return entry.obj if entry else None

    def items(self) -> list[Obj]:
        return [entry.obj for entry in self._cache.values()]

    async def _notify(self, kind: str, obj: Obj, old: Obj | None) -> None:
        for handler in self._handlers:
            result = handler(kind, obj, old)
            if result is not None:
                await result

    @staticmethod
    def _key(obj: Obj) -> tuple[str, str]:
        meta = obj.get("metadata") or {}
        return (meta.get("namespace") or "", meta.get("name") or "")

    async def _relist(self) -> None:
        listed = await self.client.list(self.coords, self.namespace, label_selector=self.label_selector)
        fresh = {self._key(item): item for item in listed.get("items", [])}
        for key, entry in list(self._cache.items()):
            if key not in fresh:
                del self._cache[key]
                await self._notify("DELETED", entry.obj, entry.obj)
        for key, item in fresh.items():
            old = self._cache.get(key)
            self._cache[key] = _Entry(item)
            if old is None:
                await self._notify("ADDED", item, None)
            elif old.obj.get("metadata", {}).get("resourceVersion") != item["metadata"].get("resourceVersion"):
                await self._notify("MODIFIED", item, old.obj)
        self.resource_version = listed["metadata"]["resourceVersion"]
        self.synced.set()

    async def _apply(self, event: Obj) -> bool:
        """Apply one watch event; False when the watch must start over."""
        kind = event.get("type")
        obj = event.get("object") or {}
        if kind == "ERROR":
            return False
        self.resource_version = obj.get("metadata", {}).get("resourceVersion", self.resource_version)
        if kind == "BOOKMARK":
            return True
        key = self._key(obj)
        old = self._cache.get(key)
        if kind == "DELETED":
            self._cache.pop(key, None)
            await self._notify("DELETED", obj, old.obj if old else None)
        else:
            self._cache[key] = _Entry(obj)
            await self._notify("ADDED" if old is None else "MODIFIED", obj, old.obj if old else None)
        return True

    async def run(self) -> None:
        """List, then watch until cancelled: a watch that ends is resumed, one that fails starts a relist."""
        must_list = True
        while True:
            try:
                if must_list:
                    await self._relist()
                    must_list = False
                async for event in self.client.watch(
                    self.coords, self.namespace, self.resource_version, label_selector=self.label_selector
                ):
                    if not await self._apply(event):
                        must_list = True
                        break
            except (aiohttp.ClientError, ApiStatusError, TimeoutError, ValueError):
                must_list = True
                await asyncio.sleep(self.relist_backoff)

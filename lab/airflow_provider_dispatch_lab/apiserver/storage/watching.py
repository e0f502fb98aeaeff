"""WATCH: a stream of JSON lines `{"type": ..., "object": ...}` as the apiserver sends it.

Semantics (`https://kubernetes.io/docs/reference/using-api/api-concepts/#efficient-detection-of-changes`,
`apiserver/pkg/storage/cacher/cacher.go`, `cache_watcher.go`):

- `resourceVersion` unset or `0`: synthetic ADDED events for the current state, then every change;
- `resourceVersion=N`: every change after N; if N is compacted the stream carries one ERROR event with a 410
  Expired Status ("too old resource version") and ends, which is what makes an informer relist;
- `sendInitialEvents=true` (with `resourceVersionMatch=NotOlderThan` and bookmarks): the current state as ADDED
  events, then a BOOKMARK annotated `k8s.io/initial-events-end: "true"`, then the changes (KEP-3157);
- selectors turn a change into what the watcher sees: an object that starts matching is ADDED, one that stops
  matching is DELETED;
- `allowWatchBookmarks=true`: BOOKMARK events carrying only the current resourceVersion, about once a minute
  of lab time (the cacher's bookmark frequency);
- with bookmarks and `timeoutSeconds`, one more BOOKMARK 2 s of wall time before the timeout (the cacher's
  pre-timeout bookmark), unless the timeout is nearer than that when the watch starts;
- `timeoutSeconds` ends the stream after that many seconds of wall time (a transport timeout, not lab time).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Mapping
from typing import Any

from aiohttp import web

from airflow_provider_dispatch_lab.apiserver.errors import bad_request, expired
from airflow_provider_dispatch_lab.apiserver.registry.resources import ResourceType
from airflow_provider_dispatch_lab.apiserver.storage.listing import Filter
from airflow_provider_dispatch_lab.apiserver.storage.store import CompactedError, Store, Subscription, WatchEvent
from airflow_provider_dispatch_lab.clock import LabClock

Obj = dict[str, Any]
INITIAL_EVENTS_END = "k8s.io/initial-events-end"


def _flag(query: Mapping[str, str], name: str) -> bool:
    return query.get(name, "").lower() in ("true", "1")


PRETIMEOUT_BOOKMARK_SECONDS = 2.0
"""How long before a watch's timeout the cacher sends its last bookmark (`cache_watcher.go`)."""


class WatchStream:
    """One watch request, from its query parameters to the end of its stream."""

    def __init__(
        self,
        store: Store,
        clock: LabClock,
        resource: ResourceType,
        namespace: str | None,
        query: Mapping[str, str],
        bookmark_interval: float,
    ) -> None:
        self.store = store
        self.clock = clock
        self.resource = resource
        self.namespace = namespace
        self.filter = Filter.parse(query, resource)
        self.bookmarks = _flag(query, "allowWatchBookmarks")
        self.send_initial = _flag(query, "sendInitialEvents")
        self.bookmark_interval = bookmark_interval
        self.rv_text = query.get("resourceVersion", "")
        timeout_text = query.get("timeoutSeconds", "")
        try:
            self.timeout = float(timeout_text) if timeout_text else None
        except ValueError as error:
            raise bad_request(f"timeoutSeconds must be a number, not {timeout_text!r}") from error
        if self.send_initial and query.get("resourceVersionMatch") != "NotOlderThan":
            raise bad_request("sendInitialEvents is forbidden for watch unless resourceVersionMatch=NotOlderThan")
        if self.send_initial and not self.bookmarks:
            raise bad_request("sendInitialEvents requires setting allowWatchBookmarks to true")
        if self.rv_text not in ("", "0"):
            try:
                int(self.rv_text)
            except ValueError as error:
                raise bad_request(f"resourceVersion: Invalid value: {self.rv_text!r}") from error

    def _in_scope(self, obj: Obj) -> bool:
        return self.namespace is None or (obj.get("metadata") or {}).get("namespace") == self.namespace

    def _translate(self, event: WatchEvent) -> Obj | None:
        """What this watcher sees of a store event, after scope and selectors."""
        new_visible = self._in_scope(event.obj) and self.filter.matches(event.obj)
        old_visible = event.old is not None and self._in_scope(event.old) and self.filter.matches(event.old)
        if event.type == "DELETED":
            return {"type": "DELETED", "object": event.obj} if old_visible else None
        if new_visible and old_visible:
            return {"type": "MODIFIED", "object": event.obj}
        if new_visible:
            return {"type": "ADDED", "object": event.obj}
        if old_visible:
            return {"type": "DELETED", "object": event.obj}
        return None

    def _bookmark(self, revision: int, annotations: dict[str, str] | None = None) -> Obj:
        """A bookmark says every event up to `revision` has been sent."""
        metadata: Obj = {"resourceVersion": str(revision)}
        if annotations:
            metadata["annotations"] = annotations
        return {
            "type": "BOOKMARK",
            "object": {
                "kind": self.resource.kind,
                "apiVersion": self.resource.api_version,
                "metadata": metadata,
            },
        }

    def _initial_events(self) -> list[Obj]:
        return [
            {"type": "ADDED", "object": obj}
            for _, obj in self.store.scan(self.resource.qualified, self.namespace)
            if self.filter.matches(obj)
        ]

    async def serve(self, request: web.Request) -> web.StreamResponse:
        subscription = self.store.subscribe(self.resource.qualified)
        response = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        try:
            await response.prepare(request)
            sent_up_to = await self._start(response)
            if sent_up_to is None:
                return response
            await self._follow(response, subscription, sent_up_to)
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            self.store.unsubscribe(subscription)
        with contextlib.suppress(ConnectionResetError, RuntimeError):
            await response.write_eof()
        return response

    async def _write(self, response: web.StreamResponse, line: Obj) -> None:
        await response.write(json.dumps(line, separators=(",", ":")).encode() + b"\n")

    async def _start(self, response: web.StreamResponse) -> int | None:
        """Send the initial state or the backlog; return the revision sent up to, or None if the watch ended."""
        if self.rv_text in ("", "0") or self.send_initial:
            start = self.store.revision
            for initial in self._initial_events():
                await self._write(response, initial)
            if self.send_initial:
                await self._write(response, self._bookmark(start, {INITIAL_EVENTS_END: "true"}))
            if self.send_initial and self.rv_text not in ("", "0"):
                return max(start, int(self.rv_text))
            return start
        since = int(self.rv_text)
        try:
            backlog = self.store.events_since(since, self.resource.qualified)
        except CompactedError as error:
            message = f"too old resource version: {since} ({error.compacted})"
            await self._write(response, {"type": "ERROR", "object": expired(message).status()})
            return None
        for event in backlog:
            line = self._translate(event)
            if line is not None:
                await self._write(response, line)
        return backlog[-1].revision if backlog else since

    async def _follow(self, response: web.StreamResponse, subscription: Subscription, sent_up_to: int) -> None:
        deadline = None if self.timeout is None else time.monotonic() + self.timeout
        next_bookmark = self.clock.now() + self.bookmark_interval
        # The cacher also bookmarks once PRETIMEOUT_BOOKMARK_SECONDS before a watch's timeout, so that a client
        # can resume from there; none if the timeout is nearer than that when the watch starts
        # (`apiserver/pkg/storage/cacher/cache_watcher.go`, `nextBookmarkTime`).
        pretimeout = None if deadline is None else deadline - PRETIMEOUT_BOOKMARK_SECONDS
        if pretimeout is not None and (not self.bookmarks or pretimeout < time.monotonic()):
            pretimeout = None
        while True:
            waits = []
            if deadline is not None:
                waits.append(deadline - time.monotonic())
            if self.bookmarks:
                wall = self.clock.wall_seconds(next_bookmark - self.clock.now())
                if wall is not None:
                    waits.append(wall)
            if pretimeout is not None:
                waits.append(pretimeout - time.monotonic())
            wait = max(min(waits), 0.0) if waits else None
            try:
                async with asyncio.timeout(wait):
                    event = await subscription.queue.get()
            except TimeoutError:
                if deadline is not None and time.monotonic() >= deadline:
                    return
                if pretimeout is not None and time.monotonic() >= pretimeout:
                    pretimeout = None
                    await self._write(response, self._bookmark(max(sent_up_to, self.store.revision)))
                    next_bookmark = self.clock.now() + self.bookmark_interval
                elif self.bookmarks and self.clock.now() >= next_bookmark:
                    await self._write(response, self._bookmark(max(sent_up_to, self.store.revision)))
                    next_bookmark = self.clock.now() + self.bookmark_interval
                continue
            if event is None:
                return
            if event.revision <= sent_up_to:
                continue
            line = self._translate(event)
            if line is not None:
                await self._write(response, line)

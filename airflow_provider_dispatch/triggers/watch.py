"""One WATCH stream of a kind (pods of a namespace, all nodes, TrainJobs of a namespace), shared by subscribers.

A watch here only says "something that may matter changed": subscribers re-check with a consistent read (a
quorum list through the dispatch programs) and decide from that, never from the watch's objects. So the stream
needs no cache of objects, only the informer discipline that makes it complete
(https://kubernetes.io/docs/reference/using-api/api-concepts/#efficient-detection-of-changes):

* start with a list (`limit=1`: only its resourceVersion is needed; resourceVersion unset, so a quorum read),
  then watch from that resourceVersion with `allowWatchBookmarks`, and resume from the last resourceVersion
  seen (an event's or a bookmark's) whenever the stream ends (`timeoutSeconds`, a server or proxy closing it);
* on `410 Gone` (an ERROR event with code 410, or a 410 answer: the resourceVersion was compacted) pause, then
  list again; events may have been missed, so every subscriber is told (`relist`) and re-checks;
* on any other failure (connection refused or reset, 5xx, 429, 403) pause and resume; subscribers keep their
  periodic re-check as the safety net meanwhile;
* a stream that ends without a single line (not even a bookmark: a proxy, or a server, that closes every watch
  at once) is paced the same way before it is resumed, or the watch would be asked for again at once, about a
  thousand times a second.

Every pause is the next delay of one exponential backoff with jitter per watch (`airflow_provider_dispatch.backoff`,
0.25 s to 30 s); the count of consecutive attempts that got nothing resets once a stream delivers a line (an
event or a bookmark) or a list succeeds. The pauses go through `sleep` (`asyncio.sleep` unless the hub is given
another clock), so a test can count them against the schedule without waiting.

The first list also tells every subscriber (`relist`), which closes the one gap a subscriber could otherwise
fall into: a subscriber that checked before the watch had its resourceVersion re-checks after it has one.
(Subscribers normally wait for the first list first, `settled`, so they need not check twice.)

Each line of the stream is decoded with `json.loads` as it arrives; objects are plain dicts (no client models).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import aiohttp

from airflow_provider_dispatch.backoff import Backoff, BackoffSchedule
from airflow_provider_dispatch.dispatch.transport import AUTH_SETTINGS, HEADERS, decode_answer
from airflow_provider_dispatch.dispatch.vocabulary import ApiCoordinates

logger = logging.getLogger(__name__)

#: how long one watch request lasts before the client resumes it (the apiserver caps it at its own limit)
WATCH_TIMEOUT_SECONDS: Final = 290
#: seconds to wait for the next line of a watch before the connection is taken as dead (bookmarks arrive
#: about once a minute, so a silent minute and a half means the stream is gone)
READ_TIMEOUT_SECONDS: Final = 90.0
CONNECT_TIMEOUT_SECONDS: Final = 10.0
#: the pauses between attempts that got nothing: a failure, an empty stream, a 410
RECONNECT_BACKOFF: Final = BackoffSchedule(initial=0.5, maximum=30.0)

#: how a watch waits out a pause (`asyncio.sleep`, or a test's clock)
Sleep = Callable[[float], Awaitable[None]]

#: what a subscriber's predicate is asked: the event type (ADDED, MODIFIED, DELETED) and the object
Predicate = Callable[[str, Mapping[str, Any]], bool]


class WatchFailure(Exception):
    """The watch request failed (an HTTP error answer, or an ERROR event other than 410)."""

    def __init__(self, status: int | None, text: str) -> None:
        super().__init__(f"{status}: {text}" if status is not None else text)
        self.status = status


class Expired(Exception):
    """410 Gone: the resourceVersion is compacted; list again."""


@dataclass
class Changes:
    """A trigger's wake-up: any of its subscriptions notifies it; `wait(since)` returns once it was notified."""

    version: int = 0
    reason: str = ""
    _event: asyncio.Event = field(default_factory=asyncio.Event)

    def notify(self, reason: str) -> None:
        self.version += 1
        self.reason = reason
        self._event.set()

    async def wait(self, since: int, within: float) -> str | None:
        """The reason of the latest notification after `since`, or None when `within` seconds passed first."""
        loop = asyncio.get_running_loop()
        until = loop.time() + max(0.0, within)
        while self.version == since:
            self._event.clear()
            remaining = until - loop.time()
            if remaining <= 0:
                return None
            try:
                async with asyncio.timeout(remaining):
                    await self._event.wait()
            except TimeoutError:
                return None
        return self.reason


@dataclass(eq=False)
class Subscription:
    """One subscriber of one watch: its predicate (replaceable as the subscriber learns more) and its wake-up."""

    predicate: Predicate
    changes: Changes
    label: str

    def offer(self, kind: str, obj: Mapping[str, Any]) -> None:
        try:
            matters = self.predicate(kind, obj)
        except Exception:  # a predicate that cannot decide must wake its subscriber, never silence it
            matters = True
        if matters:
            self.changes.notify(f"{self.label}: {kind.lower()} {_name(obj)}")


def _name(obj: Mapping[str, Any]) -> str:
    metadata = obj.get("metadata")
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    return name if isinstance(name, str) else "?"


def _resource_version(obj: Mapping[str, Any]) -> str | None:
    metadata = obj.get("metadata")
    rv = metadata.get("resourceVersion") if isinstance(metadata, Mapping) else None
    return rv if isinstance(rv, str) and rv else None


class ResourceWatch:
    """List-then-watch of one kind in one namespace (None: cluster-wide), fanned out to subscriptions.

    `api_client` is a `kubernetes_asyncio` ApiClient (the shared adapter's); the stream uses its session, its
    authentication and its TLS settings. Counters (`lists`, `streams`, `events`, `failures`, `empty_streams`)
    are for tests and for measuring API load.
    """

    def __init__(
        self,
        api_client: Any,
        coords: ApiCoordinates,
        namespace: str | None,
        *,
        timeout_seconds: int = WATCH_TIMEOUT_SECONDS,
        read_timeout: float = READ_TIMEOUT_SECONDS,
        backoff: BackoffSchedule = RECONNECT_BACKOFF,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self.api_client = api_client
        self.coords = coords
        self.namespace = namespace
        self.timeout_seconds = timeout_seconds
        self.read_timeout = read_timeout
        #: consecutive attempts that got nothing: what the next pause is drawn from
        self.retries = Backoff(backoff)
        self.sleep = sleep
        self.subscriptions: set[Subscription] = set()
        self.resource_version: str | None = None
        self.lists = self.streams = self.events = self.failures = self.empty_streams = 0
        #: set once the first list answered: from then on no change is missed
        self.synced = asyncio.Event()
        #: set once the first list answered or failed: subscribers wait for this, not for `synced`, so a watch
        #: that cannot list (forbidden, unreachable) does not delay their first check
        self.settled = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        where = f"in namespace {namespace}" if namespace else "cluster-wide"
        self.description = f"watch of {coords.resource} {where}"

    # --- subscribers ---------------------------------------------------------------------------------------

    def subscribe(self, predicate: Predicate, changes: Changes, label: str) -> Subscription:
        subscription = Subscription(predicate, changes, label)
        self.subscriptions.add(subscription)
        return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        self.subscriptions.discard(subscription)

    def _tell_all(self, reason: str) -> None:
        for subscription in list(self.subscriptions):
            subscription.changes.notify(f"{subscription.label}: {reason}")

    # --- lifetime ------------------------------------------------------------------------------------------

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name=self.description)

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    # --- the stream ----------------------------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            try:
                if self.resource_version is None:
                    self.resource_version = await self._list_resource_version()
                    self.lists += 1
                    self.synced.set()
                    self.settled.set()
                    self._tell_all("relist")
                if not await self._stream(self.resource_version):
                    self.empty_streams += 1
                    delay = self.retries.next_delay()
                    logger.debug("dispatch: %s ended without an event; resuming in %.1fs", self.description, delay)
                    await self.sleep(delay)
            except Expired:
                if self.resource_version is None:  # even the list was refused with 410
                    self.failures += 1
                    self.settled.set()
                self.resource_version = None
                delay = self.retries.next_delay()
                logger.info("dispatch: %s expired (410 Gone); listing again in %.1fs", self.description, delay)
                await self.sleep(delay)
            except asyncio.CancelledError:
                raise
            except Exception as error:
                self.failures += 1
                self.settled.set()
                delay = self.retries.next_delay()
                logger.warning(
                    "dispatch: %s failed (%s: %s); resuming in %.1fs",
                    self.description,
                    type(error).__name__,
                    error,
                    delay,
                )
                await self.sleep(delay)

    async def _request(self, query: list[tuple[str, str]], client_timeout: aiohttp.ClientTimeout) -> Any:
        return await self.api_client.call_api(
            self.coords.path(self.namespace),
            "GET",
            query_params=query,
            header_params=dict(HEADERS),
            auth_settings=list(AUTH_SETTINGS),
            _preload_content=False,
            _request_timeout=client_timeout,
        )

    async def _list_resource_version(self) -> str:
        timeout = aiohttp.ClientTimeout(total=None, connect=CONNECT_TIMEOUT_SECONDS, sock_read=60.0)
        response = await self._request([("limit", "1")], timeout)
        async with response:
            status, data = response.status, await response.read()
        answer = decode_answer(status, data)
        if not isinstance(answer, Mapping):
            if answer.status == 410:
                raise Expired()
            raise WatchFailure(answer.status, f"list {self.coords.resource}: {answer.reason or answer.body}")
        rv = _resource_version(answer)
        if rv is None:
            raise WatchFailure(None, f"list {self.coords.resource} answered without a resourceVersion")
        self.retries.reset()
        return rv

    async def _stream(self, resource_version: str) -> bool:
        """Follow one watch request until the server ends it; whether it delivered a line (event or bookmark)."""
        query = [
            ("watch", "true"),
            ("resourceVersion", resource_version),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", str(self.timeout_seconds)),
        ]
        timeout = aiohttp.ClientTimeout(total=None, connect=CONNECT_TIMEOUT_SECONDS, sock_read=self.read_timeout)
        response = await self._request(query, timeout)
        async with response:
            if response.status != 200:
                answer = decode_answer(response.status, await response.read())
                if not isinstance(answer, Mapping) and answer.status == 410:
                    raise Expired()
                status = answer.status if not isinstance(answer, Mapping) else response.status
                raise WatchFailure(status, f"watch {self.coords.resource}")
            self.streams += 1
            delivered = False
            async for event in _lines(response.content):
                delivered = True
                self._handle(event)
            return delivered

    def _handle(self, event: Mapping[str, Any]) -> None:
        kind = event.get("type")
        obj = event.get("object")
        if not isinstance(kind, str) or not isinstance(obj, Mapping):
            return
        if kind == "ERROR":
            code = obj.get("code")
            if code == 410:
                raise Expired()
            raise WatchFailure(code if isinstance(code, int) else None, str(obj.get("message", "watch error")))
        self.retries.reset()
        rv = _resource_version(obj)
        if rv is not None:
            self.resource_version = rv
        if kind == "BOOKMARK":
            return
        self.events += 1
        for subscription in list(self.subscriptions):
            subscription.offer(kind, obj)


async def _lines(content: aiohttp.StreamReader) -> AsyncIterator[Mapping[str, Any]]:
    """The JSON objects of a watch stream, one per line, however the bytes were chunked."""
    buffer = b""
    async for chunk in content.iter_any():
        buffer += chunk
        *complete, buffer = buffer.split(b"\n")
        for line in complete:
            if line.strip():
                decoded = json.loads(line)
                if isinstance(decoded, Mapping):
                    yield decoded
    if buffer.strip():
        decoded = json.loads(buffer)
        if isinstance(decoded, Mapping):
            yield decoded


__all__ = [
    "RECONNECT_BACKOFF",
    "Changes",
    "Expired",
    "Predicate",
    "ResourceWatch",
    "Sleep",
    "Subscription",
    "WatchFailure",
]

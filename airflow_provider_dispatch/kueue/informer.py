"""List, then watch, and list again when the watch cannot continue: a client-go reflector in a few lines.

`Informer.run()` lists the kind cluster-wide (paged; resourceVersion unset, a quorum read) and then watches
from the list's resourceVersion with bookmarks. A watch the server ends (its timeout) is resumed from the last
resourceVersion seen; a 410 Gone, as an ERROR event or as the answer, means that resourceVersion was compacted
and the informer lists again, reporting what changed meanwhile as events.

Every attempt that gets nothing is paced by one jittered exponential backoff (`airflow_provider_dispatch.backoff`)
on the controller's clock, so a flapping API server is neither hammered nor waited on for ever
(`client-go/tools/cache/reflector.go`: `ListAndWatch` under `wait.BackoffUntil`, and its "very short watch"
check): a failure (5xx, 429, 403, a dropped connection), a watch that ended without a single event (not even a
bookmark: a proxy or a server that closes every watch at once would otherwise be asked again at once, for ever),
and a 410 Gone, after which the informer pauses before it lists again. The count of consecutive attempts resets
once a watch delivers an event (a bookmark counts) or a list succeeds, so a server that recovers is followed at
once again; a server that answers the watch after every fresh list with 410 is therefore relisted after the
first delay each time (0.4 to 0.8 s), never in a loop.

With `keep_cache` the informer holds the objects (Workloads, AdmissionChecks, Nodes: what the controller reads
again); without it (Pods, which can be 50,000 in one cluster) it only reports events, lists with `limit=1` to
learn a resourceVersion to watch from, and says `relisted` so that the controller re-checks what it waits for.
Handlers run synchronously on the informer's task; they only update indexes and queue keys.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, Literal

from airflow_provider_dispatch.backoff import Backoff, BackoffSchedule
from airflow_provider_dispatch.dispatch.vocabulary import ApiCoordinates
from airflow_provider_dispatch.kueue.api import ApiCallError, KubeApi
from airflow_provider_dispatch.kueue.clock import Clock

Obj = dict[str, Any]
Key = tuple[str, str]
EventType = Literal["ADDED", "MODIFIED", "DELETED"]
logger = logging.getLogger(__name__)

PAGE_SIZE: Final = 500
#: client-go picks a watch timeout between 5 and 10 minutes so that watches do not all end at once
WATCH_TIMEOUT_RANGE: Final = (300, 600)
#: client-go's reflector backoff (`NewExponentialBackoffManager(800ms, 30s, ...)` in `reflector.go`)
RETRY_BACKOFF: Final = BackoffSchedule(initial=0.8, maximum=30.0)


@dataclass(frozen=True)
class Event:
    type: EventType
    obj: Obj
    old: Obj | None


Handler = Callable[[Event], None]


def object_key(obj: Obj) -> Key:
    meta = obj.get("metadata") or {}
    return (str(meta.get("namespace") or ""), str(meta.get("name") or ""))


def resource_version_of(obj: Obj) -> str:
    value = (obj.get("metadata") or {}).get("resourceVersion")
    return value if isinstance(value, str) else ""


class _Relist(Exception):
    """The watch cannot continue from its resourceVersion: list again."""


class Informer:
    def __init__(
        self,
        api: KubeApi,
        coords: ApiCoordinates,
        clock: Clock,
        *,
        keep_cache: bool = True,
        label_selector: str | None = None,
        rng: random.Random | None = None,
        backoff: BackoffSchedule = RETRY_BACKOFF,
    ) -> None:
        self.api = api
        self.coords = coords
        self.clock = clock
        self.keep_cache = keep_cache
        self.label_selector = label_selector
        self.rng = rng or random.Random()
        #: consecutive attempts that got nothing (failed, ended empty, or 410): what paces the next one
        self.retries = Backoff(backoff, self.rng)
        self.cache: dict[Key, Obj] = {}
        self.synced = asyncio.Event()
        self.resource_version = ""
        self.relists = 0
        self._handlers: list[Handler] = []
        self._relisted: list[Callable[[], None]] = []

    def on_event(self, handler: Handler) -> None:
        self._handlers.append(handler)

    def on_relist(self, handler: Callable[[], None]) -> None:
        """Called after every list: events may have been missed before it (without a cache they are)."""
        self._relisted.append(handler)

    def get(self, key: Key) -> Obj | None:
        return self.cache.get(key)

    def items(self) -> list[Obj]:
        return list(self.cache.values())

    def _emit(self, event: Event) -> None:
        for handler in self._handlers:
            try:
                handler(event)
            except Exception:  # a handler's bug must not stop the informer
                logger.exception("a handler of %s events failed", self.coords.resource)

    async def run(self) -> None:
        """List and watch until cancelled."""
        while True:
            try:
                await self._list()
                while True:
                    await self._watch_once()
            except _Relist:
                await self._pause(logging.INFO, "watch expired (410 Gone); listing again")
            except ApiCallError as error:
                if error.gone:
                    await self._pause(logging.INFO, f"410 Gone ({error}); listing again")
                else:
                    await self._pause(logging.WARNING, f"list/watch failed: {error}")
            except asyncio.CancelledError:
                raise
            except Exception as error:  # anything else is retried the same way, never fatal
                logger.exception("%s informer failed", self.coords.resource)
                await self._pause(logging.WARNING, f"list/watch failed: {error!r}")

    async def _pause(self, level: int, why: str) -> None:
        """Wait the next delay of the backoff before the next attempt."""
        delay = self.retries.next_delay()
        logger.log(
            level,
            "%s: %s; next attempt in %.1fs",
            self.coords.resource,
            why,
            delay,
            extra={"resource": self.coords.resource, "retry_in": round(delay, 3)},
        )
        await self.clock.sleep(delay)

    async def _list(self) -> None:
        fresh: dict[Key, Obj] = {}
        token: str | None = None
        version = ""
        while True:
            limit = PAGE_SIZE if self.keep_cache else 1
            page = await self.api.list(self.coords, label_selector=self.label_selector, limit=limit, continue_=token)
            if not version:
                version = str((page.get("metadata") or {}).get("resourceVersion") or "")
            if not self.keep_cache:
                break
            for item in page.get("items") or ():
                if isinstance(item, dict):
                    fresh[object_key(item)] = item
            next_token = (page.get("metadata") or {}).get("continue")
            if not next_token:
                break
            token = str(next_token)
        self.relists += 1
        self.retries.reset()
        if self.keep_cache:
            self._replace(fresh)
        self.resource_version = version
        self.synced.set()
        for handler in self._relisted:
            handler()

    def _replace(self, fresh: dict[Key, Obj]) -> None:
        old_cache, self.cache = self.cache, fresh
        for key, old in old_cache.items():
            if key not in fresh:
                self._emit(Event("DELETED", old, old))
        for key, obj in fresh.items():
            previous = old_cache.get(key)
            if previous is None:
                self._emit(Event("ADDED", obj, None))
            elif resource_version_of(previous) != resource_version_of(obj):
                self._emit(Event("MODIFIED", obj, previous))

    async def _watch_once(self) -> None:
        timeout = self.rng.randint(*WATCH_TIMEOUT_RANGE)
        events = self.api.watch(
            self.coords, self.resource_version, label_selector=self.label_selector, timeout_seconds=timeout
        )
        seen = 0
        async for raw in events:
            seen += 1
            self._apply(raw)
        if not seen:
            # it ended without a single event (not even a bookmark), and may end so again at once: pace it
            await self._pause(logging.DEBUG, "watch ended without an event")

    def _apply(self, raw: Obj) -> None:
        kind = raw.get("type")
        obj = raw.get("object")
        if not isinstance(obj, dict):
            return
        if kind == "ERROR":
            if obj.get("code") == 410 or obj.get("reason") in ("Expired", "Gone"):
                raise _Relist()
            raise ApiCallError(int(obj.get("code") or 500), obj, f"watch {self.coords.resource}")
        self.retries.reset()
        version = resource_version_of(obj)
        if version:
            self.resource_version = version
        if kind not in ("ADDED", "MODIFIED", "DELETED"):
            return  # BOOKMARK: only the resourceVersion moves
        key = object_key(obj)
        old = self.cache.get(key)
        if not self.keep_cache:
            self._emit(Event(kind, obj, None))
        elif kind == "DELETED":
            self.cache.pop(key, None)
            self._emit(Event("DELETED", obj, old))
        else:
            self.cache[key] = obj
            self._emit(Event("MODIFIED" if old is not None else "ADDED", obj, old))


__all__ = ["Event", "Handler", "Informer", "object_key", "resource_version_of"]

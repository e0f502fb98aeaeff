"""The per-event-loop hub: one client per connection and one watch per (connection, kind, namespace).

A triggerer runs up to a thousand triggers on one event loop. If each built its own Kubernetes client, each
would open its own TLS session (PR apache/airflow#71349: a client and TLS context per poll blocked the loop for
seconds), and if each watched for itself the API server would serve a thousand watches. So every dispatch
trigger in a loop goes through the loop's `Hub`:

* `async with hub.connection(kwargs) as shared`: the `SharedConnection` for those connection kwargs (the same
  kwargs, the same cluster and credentials), built once (`AsyncDispatchHook.get_adapter`, read-only) and closed
  when its last user leaves. Consistent reads go through `shared.run(program)`, bounded by a semaphore so a
  thousand triggers starting at once do not send a thousand lists at once.
* `async with shared.watching(coords, namespace, predicate, changes, label)`: a subscription to the one
  `ResourceWatch` of that kind in that namespace, started for its first subscriber and stopped after its last.

So the watches, and the steady API load, grow with the namespaces watched, not with the triggers; each trigger
adds only its own re-checks (on a change that matters to it, and its periodic safety-net re-check).

Nothing is shared across event loops: `dag.test()` runs each inline trigger with `asyncio.run`, a loop of its
own, and a client must not outlive its loop. Two copies of one trigger in one loop share the client and the
watch, and being read-only they cannot interfere.
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import AsyncIterator, Mapping
from typing import Any, Final, TypeVar

from airflow_provider_dispatch.dispatch.async_adapter import AsyncDispatchAdapter
from airflow_provider_dispatch.dispatch.programs import Program
from airflow_provider_dispatch.dispatch.vocabulary import ApiCoordinates
from airflow_provider_dispatch.hooks.dispatch import AsyncDispatchHook, connection_key
from airflow_provider_dispatch.triggers.watch import Changes, Predicate, ResourceWatch, Sleep, Subscription

_T = TypeVar("_T")

#: consistent reads in flight at once per connection (the rest wait their turn)
MAX_CONCURRENT_CHECKS: Final = 16
#: the longest a subscriber waits for a new watch's first list (answered or failed) before it checks anyway
#: (its first check then races the list, and the relist notification makes it check once more)
SYNC_WAIT_SECONDS: Final = 10.0


class SharedConnection:
    """One read-only adapter (one client, one aiohttp session) and its watches, for one connection."""

    def __init__(
        self, key: str, kwargs: Mapping[str, Any], *, max_concurrent_checks: int, sleep: Sleep = asyncio.sleep
    ) -> None:
        self.key = key
        self.kwargs = dict(kwargs)
        self.sleep = sleep
        self.users = 0
        self.watches: dict[tuple[str, str | None], ResourceWatch] = {}
        self._checks = asyncio.Semaphore(max_concurrent_checks)
        self._adapter: AsyncDispatchAdapter | None = None
        self._building: asyncio.Task[AsyncDispatchAdapter] | None = None

    @property
    def adapter(self) -> AsyncDispatchAdapter:
        if self._adapter is None:
            raise RuntimeError("the shared connection is not ready: use `async with hub.connection(...)`")
        return self._adapter

    async def ready(self) -> AsyncDispatchAdapter:
        """Build the adapter once, however many triggers wait for it; a failure reaches all of them."""
        if self._adapter is not None:
            return self._adapter
        if self._building is None:
            hook = AsyncDispatchHook.from_connection_kwargs(self.kwargs)
            # No pool bound on the client: the semaphore bounds the checks, and each watch holds one connection.
            self._building = asyncio.get_running_loop().create_task(hook.get_adapter(connection_pool_maxsize=0))
        try:
            adapter = await asyncio.shield(self._building)
        except asyncio.CancelledError:
            raise
        except BaseException:
            self._building = None  # the next trigger tries again (the connection may have been fixed)
            raise
        self._adapter = adapter
        return adapter

    async def run(self, program: Program[_T]) -> _T:
        """Run a read-only program on the shared adapter, within the connection's concurrency bound."""
        async with self._checks:
            return await self.adapter.run(program)

    @contextlib.asynccontextmanager
    async def watching(
        self, coords: ApiCoordinates, namespace: str | None, predicate: Predicate, changes: Changes, label: str
    ) -> AsyncIterator[Subscription]:
        """Subscribe to the shared watch of `coords` in `namespace`; `changes` is notified when `predicate`
        says an event matters, and on every relist."""
        key = (coords.resource, namespace)
        watch = self.watches.get(key)
        if watch is None:
            watch = ResourceWatch(self.adapter.api_client, coords, namespace, sleep=self.sleep)
            self.watches[key] = watch
        subscription = watch.subscribe(predicate, changes, label)
        watch.start()
        try:
            if not watch.settled.is_set():
                # `asyncio.timeout`, not `wait_for`: no task of its own per subscriber (a thousand triggers
                # subscribe to a new watch together and wake together when its first list is in)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(SYNC_WAIT_SECONDS):
                        await watch.settled.wait()
            yield subscription
        finally:
            watch.unsubscribe(subscription)
            if not watch.subscriptions and self.watches.get(key) is watch:
                del self.watches[key]
                await watch.stop()

    async def close(self) -> None:
        watches, self.watches = list(self.watches.values()), {}
        for watch in watches:
            await watch.stop()
        building, self._building = self._building, None
        if self._adapter is not None:
            adapter, self._adapter = self._adapter, None
            await adapter.close()
        elif building is not None and not building.done():
            building.cancel()  # nobody waits for it any more; a client built after this would never be closed
            await asyncio.wait([building])
        elif building is not None and not building.cancelled() and building.exception() is None:
            await building.result().close()


class Hub:
    """The shared connections of one event loop.

    `sleep` is how its watches wait out the pauses between reconnects (`asyncio.sleep`; a test passes a clock of
    its own to count them against the backoff schedule instead of waiting).
    """

    def __init__(self, *, max_concurrent_checks: int = MAX_CONCURRENT_CHECKS, sleep: Sleep = asyncio.sleep) -> None:
        self.connections: dict[str, SharedConnection] = {}
        self.max_concurrent_checks = max_concurrent_checks
        self.sleep = sleep

    @contextlib.asynccontextmanager
    async def connection(self, kwargs: Mapping[str, Any]) -> AsyncIterator[SharedConnection]:
        key = connection_key(kwargs)
        shared = self.connections.get(key)
        if shared is None:
            shared = SharedConnection(key, kwargs, max_concurrent_checks=self.max_concurrent_checks, sleep=self.sleep)
            self.connections[key] = shared
        shared.users += 1
        try:
            await shared.ready()
            yield shared
        finally:
            shared.users -= 1
            if shared.users == 0 and self.connections.get(key) is shared:
                del self.connections[key]
                await shared.close()

    def stats(self) -> dict[str, Any]:
        """How much is shared right now: connections, their users, and the watches with their subscribers."""
        return {
            "connections": len(self.connections),
            "users": sum(c.users for c in self.connections.values()),
            "watches": {
                watch.description: len(watch.subscriptions)
                for c in self.connections.values()
                for watch in c.watches.values()
            },
        }


_HUBS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Hub] = weakref.WeakKeyDictionary()


def current_hub() -> Hub:
    """The running event loop's hub (created on first use, gone with the loop)."""
    loop = asyncio.get_running_loop()
    hub = _HUBS.get(loop)
    if hub is None:
        hub = Hub()
        _HUBS[loop] = hub
    return hub


__all__ = ["MAX_CONCURRENT_CHECKS", "SYNC_WAIT_SECONDS", "Hub", "SharedConnection", "current_hub"]

"""A work queue keyed by Workload: each key queued once, never processed twice at once, retried later on demand.

The semantics are client-go's `workqueue` (`util/workqueue/queue.go`, `delaying_queue.go`), which every
controller-runtime controller uses:

* a key added while it is already queued is queued once (events about one Workload coalesce);
* a key added while a worker processes it is marked dirty and queued again when that worker is done, so two
  workers never reconcile the same Workload at once, and the change that arrived meanwhile is not lost;
* `add_after` queues a key after a delay on the controller's clock (a backoff, a periodic re-check); an
  earlier timer for the same key wins;
* `shut_down` makes `get` return None once the queue is empty of ready keys, so workers finish what they hold
  and stop (graceful SIGTERM); pending timers are dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Hashable
from typing import Generic, TypeVar

from airflow_provider_dispatch.kueue.clock import Clock

K = TypeVar("K", bound=Hashable)


class WorkQueue(Generic[K]):
    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._ready: deque[K] = deque()
        self._dirty: set[K] = set()
        self._processing: set[K] = set()
        self._timers: dict[K, tuple[float, asyncio.Task[None]]] = {}
        self._wakeup = asyncio.Event()
        self._shutting_down = False

    def __len__(self) -> int:
        return len(self._ready)

    @property
    def shutting_down(self) -> bool:
        return self._shutting_down

    def add(self, key: K) -> None:
        if self._shutting_down or key in self._dirty:
            return
        self._dirty.add(key)
        if key not in self._processing:
            self._ready.append(key)
            self._notify()

    def add_after(self, key: K, delay: float) -> None:
        if self._shutting_down:
            return
        if delay <= 0:
            self.add(key)
            return
        due = self._clock.now() + delay
        current = self._timers.get(key)
        if current is not None and not current[1].done() and current[0] <= due:
            return
        if current is not None:
            current[1].cancel()
        self._timers[key] = (due, asyncio.get_running_loop().create_task(self._later(key, delay)))

    async def _later(self, key: K, delay: float) -> None:
        await self._clock.sleep(delay)
        self._timers.pop(key, None)
        self.add(key)

    def _notify(self) -> None:
        self._wakeup.set()

    async def get(self) -> K | None:
        """The next key to process (mark it `done` afterwards); None once the queue shuts down."""
        while not self._ready:
            if self._shutting_down:
                return None
            self._wakeup.clear()
            await self._wakeup.wait()
        key = self._ready.popleft()
        self._processing.add(key)
        self._dirty.discard(key)
        return key

    def done(self, key: K) -> None:
        self._processing.discard(key)
        if key in self._dirty and not self._shutting_down:
            self._ready.append(key)
            self._notify()

    def pending_timer(self, key: K) -> float | None:
        """When the key's timer fires, if it has one (for logs and tests)."""
        current = self._timers.get(key)
        return current[0] if current is not None and not current[1].done() else None

    async def shut_down(self) -> None:
        self._shutting_down = True
        self._ready.clear()
        self._dirty.clear()
        timers = [task for _, task in self._timers.values()]
        self._timers.clear()
        for task in timers:
            task.cancel()
        for task in timers:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._wakeup.set()


__all__ = ["WorkQueue"]

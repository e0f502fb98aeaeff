"""A work queue of keys, as client-go's `util/workqueue` has it, on the lab clock.

Real controllers never act on an event directly: they queue the object's key and a worker reconciles the
latest cached state for it. The queue's guarantees are what make that safe (`workqueue/queue.go`): a key is
queued at most once however many events arrive (`dirty`), and a key being processed is never handed to a
second worker; added meanwhile, it is queued again when the first worker calls `done` (`processing`).
`add_after` is the delaying queue (`delaying_queue.go`) and `add_rate_limited` the per-item exponential
failure backoff (`default_rate_limiters.go` `ItemExponentialFailureRateLimiter`, 5 ms doubling up to 1000 s),
both in lab seconds so that a faster lab clock makes retries faster too.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Hashable
from typing import Generic, TypeVar

from airflow_provider_dispatch_lab.clock import LabClock

K = TypeVar("K", bound=Hashable)

BASE_RETRY_DELAY = 0.005
MAX_RETRY_DELAY = 1000.0


class KeyedQueue(Generic[K]):
    def __init__(
        self, clock: LabClock, *, base_delay: float = BASE_RETRY_DELAY, max_delay: float = MAX_RETRY_DELAY
    ) -> None:
        self._clock = clock
        self._queue: deque[K] = deque()
        self._dirty: set[K] = set()
        self._processing: set[K] = set()
        self._failures: dict[K, int] = {}
        self._timers: set[asyncio.Task[None]] = set()
        self._nonempty = asyncio.Event()
        self._base_delay = base_delay
        self._max_delay = max_delay

    def __len__(self) -> int:
        return len(self._queue)

    def add(self, key: K) -> None:
        if key in self._dirty:
            return
        self._dirty.add(key)
        if key not in self._processing:
            self._queue.append(key)
            self._notify()

    def add_after(self, key: K, lab_seconds: float) -> None:
        if lab_seconds <= 0:
            self.add(key)
            return
        task = asyncio.get_running_loop().create_task(self._later(key, lab_seconds))
        self._timers.add(task)
        task.add_done_callback(self._timers.discard)

    def add_rate_limited(self, key: K) -> None:
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        self.add_after(key, min(self._base_delay * (2**failures), self._max_delay))

    def forget(self, key: K) -> None:
        self._failures.pop(key, None)

    async def get(self) -> K:
        while not self._queue:
            self._nonempty.clear()
            await self._nonempty.wait()
        key = self._queue.popleft()
        self._processing.add(key)
        self._dirty.discard(key)
        return key

    def done(self, key: K) -> None:
        self._processing.discard(key)
        if key in self._dirty:
            self._queue.append(key)
            self._notify()

    def shutdown(self) -> None:
        for task in list(self._timers):
            task.cancel()

    async def _later(self, key: K, lab_seconds: float) -> None:
        await self._clock.sleep(lab_seconds)
        self.add(key)

    def _notify(self) -> None:
        self._nonempty.set()

"""A controller-runtime style work queue on the lab clock: keys deduplicated, retried with backoff after errors.

`client-go/util/workqueue`: a key added while already queued is queued once; a reconcile that fails is retried
after a per-key exponential backoff (`DefaultTypedControllerRateLimiter`), and a reconcile may ask to run again
after a delay (`ctrl.Result{RequeueAfter}`). One worker per controller, as controller-runtime's default
`MaxConcurrentReconciles: 1`, so a key is never reconciled twice at once. Delays are lab seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

from airflow_provider_dispatch_lab.clock import LabClock

K = TypeVar("K", bound=Hashable)
logger = logging.getLogger(__name__)


class WorkQueue(Generic[K]):
    def __init__(self, clock: LabClock, *, backoff_base: float, backoff_max: float) -> None:
        self._clock = clock
        self._queue: asyncio.Queue[K] = asyncio.Queue()
        self._queued: set[K] = set()
        self._failures: dict[K, int] = {}
        self._timers: dict[K, tuple[float, asyncio.Task[None]]] = {}
        self._base, self._max = backoff_base, backoff_max

    def add(self, key: K) -> None:
        if key not in self._queued:
            self._queued.add(key)
            self._queue.put_nowait(key)

    def add_after(self, key: K, delay: float) -> None:
        """Queue `key` after `delay` lab seconds; an earlier pending timer for it wins."""
        if delay <= 0:
            self.add(key)
            return
        due = self._clock.now() + delay
        current = self._timers.get(key)
        if current is not None and current[0] <= due and not current[1].done():
            return
        if current is not None:
            current[1].cancel()
        self._timers[key] = (due, asyncio.get_running_loop().create_task(self._later(key, due)))

    async def _later(self, key: K, due: float) -> None:
        await self._clock.sleep_until(due)
        self._timers.pop(key, None)
        self.add(key)

    def _backoff(self, key: K) -> float:
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        return float(min(self._base * (2**failures), self._max))

    async def run(self, reconcile: Callable[[K], Awaitable[float | None]], name: str) -> None:
        """Process keys until cancelled: `reconcile(key)` returns a requeue delay or None."""
        try:
            while True:
                key = await self._queue.get()
                self._queued.discard(key)
                try:
                    requeue = await reconcile(key)
                except asyncio.CancelledError:
                    raise
                except Exception as error:  # a reconcile error is retried, as controller-runtime does
                    logger.debug("%s: reconcile of %s failed: %s", name, key, error)
                    self.add_after(key, self._backoff(key))
                    continue
                self._failures.pop(key, None)
                if requeue is not None:
                    self.add_after(key, requeue)
        finally:
            for _, task in self._timers.values():
                task.cancel()
            for _, task in list(self._timers.values()):
                with contextlib.suppress(asyncio.CancelledError):
                    await task

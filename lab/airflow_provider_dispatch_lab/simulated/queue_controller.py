"""The skeleton every workload controller shares: informers, a work queue, workers, retries.

It is the shape of a client-go controller (`k8s.io/sample-controller`, `pkg/controller/job` `Run`): start
the informers, wait for their caches to sync (`cache.WaitForNamedCacheSync`), then run workers that take a
key from the queue and reconcile it against the cache. A sync that fails on the API (a 409 conflict, a
fault the lab injected, a dropped connection) is retried with the queue's per-key backoff, as
`processNextWorkItem` does with `AddRateLimited`; any other exception is a lab bug and ends the controller,
which the lab records in `AsyncLab.crashes`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

import aiohttp

from airflow_provider_dispatch.dispatch.vocabulary import ApiCoordinates
from airflow_provider_dispatch_lab.apiserver.registry.admission import AdmissionPlugin
from airflow_provider_dispatch_lab.client import ApiStatusError, Informer, LabClient
from airflow_provider_dispatch_lab.simulated.cluster import ClusterContext
from airflow_provider_dispatch_lab.simulated.work_queue import KeyedQueue

K = TypeVar("K", bound=Hashable)
Q = TypeVar("Q", bound=Hashable)
logger = logging.getLogger(__name__)


class RetryLater(Exception):
    """A sync that cannot finish yet (a referenced object is missing): retry with backoff."""


RETRYABLE = (ApiStatusError, aiohttp.ClientError, TimeoutError, RetryLater)


class QueueController(Generic[K]):
    """Subclasses add informers in `__init__` and implement `sync(key)`."""

    name = "controller"
    workers = 2

    def __init__(self, ctx: ClusterContext) -> None:
        self.ctx = ctx
        self.clock = ctx.clock
        self.client: LabClient = ctx.client(f"dispatch-lab/{self.name}")
        self.queue: KeyedQueue[K] = KeyedQueue(ctx.clock)
        self._informers: list[Informer] = []
        self._webhooks: list[AdmissionPlugin] = []
        self.started = asyncio.Event()
        """Set once the caches have synced and the workers run."""

    def informer(self, coords: ApiCoordinates) -> Informer:
        informer = Informer(self.client, coords)
        self._informers.append(informer)
        return informer

    def serve_webhooks(self, *plugins: AdmissionPlugin) -> None:
        """Register the controller's admission webhooks now, and unregister them when `run` ends (after the queue
        and the client have shut down): JobSet's and Trainer's webhook servers run in their controller manager
        process, so they answer exactly as long as the controller lives."""
        for plugin in plugins:
            self.ctx.admission.register(plugin)
        self._webhooks.extend(plugins)

    async def sync(self, key: K) -> None:
        raise NotImplementedError

    async def run(self) -> None:
        try:
            async with asyncio.TaskGroup() as group:
                for informer in self._informers:
                    group.create_task(informer.run(), name=f"{self.name}-{informer.coords.plural}")
                await asyncio.gather(*(informer.synced.wait() for informer in self._informers))
                for number in range(self.workers):
                    group.create_task(work(self.name, self.queue, self.sync), name=f"{self.name}-worker-{number}")
                self.extra_workers(group)
                self.started.set()
        finally:
            try:
                self.queue.shutdown()
                await self.client.close()
            finally:
                for plugin in self._webhooks:
                    self.ctx.admission.unregister(plugin)

    def extra_workers(self, group: asyncio.TaskGroup) -> None:
        """Hook for controllers with a second queue (the Job controller's orphan-pod queue)."""


async def work(name: str, queue: KeyedQueue[Q], sync: Callable[[Q], Awaitable[None]]) -> None:
    """One worker: `processNextWorkItem` in a loop."""
    while True:
        key = await queue.get()
        try:
            await sync(key)
        except RETRYABLE as error:
            logger.debug("%s: retrying %s after %s", name, key, error)
            queue.add_rate_limited(key)
        else:
            queue.forget(key)
        finally:
            queue.done(key)

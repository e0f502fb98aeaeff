"""What every lab Kueue controller shares: its informers running beside its work, and a clean stop.

A controller lists and watches its kinds (`lab.client.Informer`, the reflector), waits until every cache has
synced (controller-runtime's `WaitForCacheSync`), then does its work; cancelling it stops the informers too.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence

from airflow_provider_dispatch_lab.client import Informer, LabClient


async def run_with_informers(
    client: LabClient, informers: Sequence[Informer], work: Callable[[], Awaitable[None]]
) -> None:
    tasks = [asyncio.get_running_loop().create_task(informer.run()) for informer in informers]
    try:
        await asyncio.gather(*(informer.synced.wait() for informer in informers))
        await work()
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await client.close()

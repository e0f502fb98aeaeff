"""One awaitable interface over the sync and the async adapter, so a test runs once through each.

The sync adapter's operations run in a worker thread (`asyncio.to_thread`), the async adapter's are awaited; a
test written against `Either` says once what both must do. Used by the adapter tests (conftest's `adapter`
fixture) and by tests/reliability/test_security.py.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_provider_dispatch.dispatch import AsyncDispatchAdapter, DispatchAdapter
from airflow_provider_dispatch.dispatch.assessment import DrainReport, Execution, Status


@dataclass
class Either:
    """The sync or the async adapter behind one awaitable interface (the sync one runs in a worker thread)."""

    kind: str
    adapter: DispatchAdapter | AsyncDispatchAdapter

    @classmethod
    async def from_kubeconfig(cls, kind: str, path: str | os.PathLike[str], **options: Any) -> Either:
        """The `kind` ("sync" or "async") adapter with its own client from the kubeconfig at `path`."""
        if kind == "sync":
            return cls(kind, DispatchAdapter.from_kubeconfig(path, **options))
        return cls(kind, await AsyncDispatchAdapter.from_kubeconfig(path, **options))

    async def call(self, operation: str, *args: Any, **kwargs: Any) -> Any:
        method = getattr(self.adapter, operation)
        if isinstance(self.adapter, DispatchAdapter):
            return await asyncio.to_thread(method, *args, **kwargs)
        return await method(*args, **kwargs)

    async def hold(self, ref: str) -> Execution:
        result: Execution = await self.call("hold", ref)
        return result

    async def release(self, ref: str) -> Execution:
        result: Execution = await self.call("release", ref)
        return result

    async def open(self, manifest: Mapping[str, Any], **kwargs: Any) -> Execution:
        result: Execution = await self.call("open", manifest, **kwargs)
        return result

    async def inspect(self, ref: str) -> Status:
        result: Status = await self.call("inspect", ref)
        return result

    async def find(self, namespace: str, job_id: str) -> Status:
        result: Status = await self.call("find", namespace, job_id)
        return result

    async def remaining_pods(self, ref: str, **kwargs: Any) -> DrainReport:
        result: DrainReport = await self.call("remaining_pods", ref, **kwargs)
        return result

    async def ceased(self, ref: str, **kwargs: Any) -> bool:
        result: bool = await self.call("ceased", ref, **kwargs)
        return result

    async def close(self) -> None:
        await self.call("close")

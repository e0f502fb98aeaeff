"""Small pieces the node-side controllers share: a deduplicating work queue, tolerant API calls, conditions.

Real controllers survive a failing API server: a request that fails is logged and retried on the next event or
resync, it never kills the controller (`client-go/util/workqueue` rate-limited requeues). `tolerant` does that
for one call, so that a lab with fault injection still has running controllers.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Hashable, Mapping
from typing import Any, Generic, TypeVar

import aiohttp

from airflow_provider_dispatch_lab.client import ApiStatusError

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)
Obj = dict[str, Any]
logger = logging.getLogger("airflow_provider_dispatch_lab.simulated.controllers")

TRANSIENT: tuple[type[BaseException], ...] = (ApiStatusError, aiohttp.ClientError, TimeoutError, ValueError)
"""What a failed request raises: an error Status, a transport error, a timeout, an undecodable answer."""


async def tolerant(what: str, call: Callable[[], Awaitable[T]]) -> T | None:
    """`await call()`, or None (logged) when the API answered with an error or not at all."""
    try:
        return await call()
    except TRANSIENT as error:
        logger.info("%s failed: %s", what, error)
        return None


class WorkQueue(Generic[K]):
    """Keys waiting to be processed, each at most once however often it was added (`workqueue.Type`)."""

    def __init__(self) -> None:
        self._keys: dict[K, None] = {}
        self._ready = asyncio.Event()

    def add(self, key: K) -> None:
        self._keys[key] = None
        self._ready.set()

    def __len__(self) -> int:
        return len(self._keys)

    async def take(self) -> list[K]:
        """Wait for keys, then take all of them in the order they were first added."""
        await self._ready.wait()
        self._ready.clear()
        keys, self._keys = list(self._keys), {}
        return keys


def meta(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    value = (obj or {}).get("metadata")
    return value if isinstance(value, Mapping) else {}


def spec(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    value = (obj or {}).get("spec")
    return value if isinstance(value, Mapping) else {}


def status(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    value = (obj or {}).get("status")
    return value if isinstance(value, Mapping) else {}


def find_condition(obj: Mapping[str, Any] | None, condition_type: str) -> Mapping[str, Any] | None:
    for entry in status(obj).get("conditions") or ():
        if isinstance(entry, Mapping) and entry.get("type") == condition_type:
            return entry
    return None


def ready_status(node: Mapping[str, Any] | None) -> str | None:
    """The node's Ready condition status (True, False, Unknown), None when it has no Ready condition."""
    found = find_condition(node, "Ready")
    return None if found is None else str(found.get("status"))


def is_terminal(pod: Mapping[str, Any] | None) -> bool:
    return status(pod).get("phase") in ("Succeeded", "Failed")


def pod_key(pod: Mapping[str, Any]) -> tuple[str, str]:
    return (str(meta(pod).get("namespace") or ""), str(meta(pod).get("name") or ""))

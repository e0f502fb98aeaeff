"""Fault injection: seeded, reproducible API failures by verb, resource or path.

A real API server fails in a handful of ways a client must survive, each with its own answer:

- `500` InternalError (an etcd hiccup);
- `429` TooManyRequests with a `Retry-After` header (API Priority and Fairness rejecting a request,
  `apiserver/pkg/server/filters/maxinflight.go`, `priority-and-fairness.go`);
- `504` Timeout (`apiserver/pkg/endpoints/filters/timeout.go`: "the server was unable to return a response in
  the time allotted");
- a request that hangs past the client's timeout;
- a dropped connection (the server or a load balancer resets it mid-request);
- `409` Conflict on a write (someone else wrote first);
- `410` Gone on a continue token or a watch (the revision was compacted: see `store.compact`);
- a stale watch: the stream ends without an error, and the client must resume or relist.

A `FaultRule` matches requests (verb, resource, subresource, namespace, name, path prefix) and fires with a
probability drawn from one seeded `random.Random`, or for an exact count of matching requests; the injector is
an aiohttp middleware that runs after authentication and authorization, where API Priority and Fairness sits
in the apiserver's handler chain.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Literal

from aiohttp import web

from airflow_provider_dispatch_lab.apiserver import errors
from airflow_provider_dispatch_lab.apiserver.requests import RequestInfo, parse_request

FaultKind = Literal["500", "429", "504", "409", "410", "hang", "drop", "end-watch"]
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass
class FaultRule:
    """Which requests fail, how, and how often. Empty match fields match everything."""

    kind: FaultKind
    verbs: frozenset[str] = frozenset()
    resources: frozenset[str] = frozenset()
    subresource: str | None = None
    namespace: str | None = None
    name: str | None = None
    path_prefix: str = ""
    rate: float = 1.0
    count: int | None = None
    """Fire at most this many times (then the rule is spent); None for no limit."""
    retry_after_seconds: int = 1
    hang_seconds: float = 3600.0
    fired: int = 0

    def matches(self, info: RequestInfo) -> bool:
        if self.count is not None and self.fired >= self.count:
            return False
        if self.verbs and info.verb not in self.verbs:
            return False
        if self.resources and info.resource not in self.resources and info.qualified_resource not in self.resources:
            return False
        if self.subresource is not None and info.subresource != self.subresource:
            return False
        if self.namespace is not None and info.namespace != self.namespace:
            return False
        if self.name is not None and info.name != self.name:
            return False
        return info.path.startswith(self.path_prefix)


@dataclass
class FaultInjector:
    """The lab's faults: add rules, and the middleware fires them with a seeded generator."""

    seed: int = 0
    rules: list[FaultRule] = field(default_factory=list)
    log: list[tuple[str, str, FaultKind]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._random = random.Random(self.seed)

    def add(self, rule: FaultRule) -> FaultRule:
        self.rules.append(rule)
        return rule

    def clear(self) -> None:
        self.rules.clear()

    def reseed(self, seed: int) -> None:
        self.seed = seed
        self._random = random.Random(seed)

    def _pick(self, info: RequestInfo) -> FaultRule | None:
        for rule in self.rules:
            if rule.matches(info) and (rule.rate >= 1.0 or self._random.random() < rule.rate):
                rule.fired += 1
                return rule
        return None

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        info = parse_request(request.method, request.path, request.query.get("watch", "").lower() in ("true", "1"))
        rule = self._pick(info)
        if rule is None:
            return await handler(request)
        self.log.append((info.verb, request.path, rule.kind))
        return await self._fire(rule, info, request, handler)

    async def _fire(
        self, rule: FaultRule, info: RequestInfo, request: web.Request, handler: Handler
    ) -> web.StreamResponse:
        if rule.kind == "500":
            raise errors.internal_error("etcdserver: request timed out (injected by the lab)")
        if rule.kind == "429":
            raise errors.too_many_requests(rule.retry_after_seconds)
        if rule.kind == "504":
            raise errors.timeout(
                "the server was unable to return a response in the time allotted, but may still be processing the "
                "request"
            )
        if rule.kind == "409":
            raise errors.conflict(info.resource, info.group, info.name or "", errors.MODIFIED)
        if rule.kind == "410":
            raise errors.expired("too old resource version (injected by the lab)")
        if rule.kind == "hang":
            await asyncio.sleep(rule.hang_seconds)
            raise errors.timeout("the request hung (injected by the lab)")
        if rule.kind == "drop":
            transport = request.transport
            if transport is not None:
                transport.abort()
            raise ConnectionResetError("connection dropped (injected by the lab)")
        # end-watch: let the watch start, then end it cleanly after its first write, as a stale watch does.
        response = await handler(request) if info.verb != "watch" else await _short_watch(request, handler)
        return response


async def _short_watch(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Serve the watch but with `timeoutSeconds=0`: the stream sends its initial state and ends."""
    query = dict(request.query)
    query["timeoutSeconds"] = "0"
    cloned = request.clone(rel_url=request.rel_url.with_query(query))
    return await handler(cloned)

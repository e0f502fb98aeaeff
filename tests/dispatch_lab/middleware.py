"""What the lab-based tests put in front of the lab's API server (aiohttp middlewares), shared by the adapter
tests (tests/dispatch_lab), the Airflow tests (tests/airflow) and the reliability harness (tests/reliability):

* `Hooks`: per-test middlewares and seeded fault injectors (`lab.apiserver.faults`) that apply to the requests of
  the identities under test only. Each suite says whose requests pass untouched (`bypass`: the admin that builds
  the cluster state, or everyone but the reliability callers), so the state a test builds is never faulted;
* `failure_status`: how a request recorder names the answer to a request that raised, so that every recorder
  logs a refused, failed or dropped request alike;
* `user_name`: the authenticated user of a request, as the recorders and `bypass` see it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from aiohttp import web

from airflow_provider_dispatch_lab.apiserver.auth.auth import UserInfo
from airflow_provider_dispatch_lab.apiserver.errors import ApiError
from airflow_provider_dispatch_lab.apiserver.faults import FaultInjector, FaultRule
from airflow_provider_dispatch_lab.apiserver.server import USER_KEY

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Hook = Callable[[web.Request, Handler], Awaitable[web.StreamResponse]]
When = Callable[[web.Request], bool]


def user_name(request: web.Request) -> str:
    """The request's authenticated user; `?` before or without authentication."""
    user = request.get(USER_KEY)
    return user.name if isinstance(user, UserInfo) else "?"


def failure_status(error: BaseException) -> int | str:
    """What a recorder logs for a request whose handler raised: the lab's API error code, the HTTP exception's
    status, else `dropped` (no answer was sent: the connection was cut, or the handler failed)."""
    if isinstance(error, ApiError):
        return error.code
    if isinstance(error, web.HTTPException):
        return error.status
    return "dropped"


def _always(request: web.Request) -> bool:
    return True


@dataclass
class Hooks:
    """Middlewares and fault injectors for the requests of users `bypass` does not name; cleared per test.

    `seed` seeds the fault injectors `faults` makes, so a test's faults fall the same way on every run."""

    bypass: Callable[[str], bool]
    seed: int = 0
    active: list[tuple[When, Hook]] = field(default_factory=list)

    def add(self, hook: Hook, when: When = _always) -> None:
        self.active.append((when, hook))

    def remove(self, hook: Hook) -> None:
        self.active = [(when, h) for when, h in self.active if h is not hook]

    def faults(self, *rules: FaultRule, when: When = _always) -> FaultInjector:
        """A seeded fault injector (`lab.apiserver.faults`) for the requests for which `when` holds."""
        injector = FaultInjector(seed=self.seed)
        for rule in rules:
            injector.add(rule)
        self.add(injector.middleware, when)
        return injector

    def clear(self) -> None:
        self.active.clear()

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if self.bypass(user_name(request)):
            return await handler(request)
        hooks = [hook for when, hook in list(self.active) if when(request)]

        async def call(index: int, current: web.Request) -> web.StreamResponse:
            if index == len(hooks):
                return await handler(current)
            return await hooks[index](current, lambda forwarded: call(index + 1, forwarded))

        return await call(0, request)

"""Fixtures for the adapter tests: one lab with identities, a request log and switchable faults.

The lab here differs from the session lab of tests/conftest.py in three ways the adapter tests need:

* identities by bearer token (a test-local stand-in for the lab's RBAC, which is written separately): the
  admin who builds the cluster state, a writer, a reader (get/list/watch only) and a reader that may not read
  Nodes;
* a request log (`Recorder`) of every request after authentication, with its user and the answer's status,
  so that a test can say exactly what an adapter sent;
* `Hooks` (middleware.py): per-test fault injection (`lab.apiserver.faults`) and middlewares that apply to the
  adapters' requests only, never to the admin's, so the state a test builds is never faulted.

The `adapter` fixture is parametrized over the two adapters: `Either` (either.py) awaits every operation, running the
sync adapter's in a worker thread, so each test runs once through `kubernetes` and once through
`kubernetes_asyncio`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kubernetes
import pytest
from aiohttp import web

from airflow_provider_dispatch.dispatch.evidence import DEFAULT_SETTLE_SECONDS
from airflow_provider_dispatch.dispatch.nodes import DEFAULT_CLOCK_SKEW_SECONDS
from airflow_provider_dispatch_lab.apiserver.auth.auth import Decision, UserInfo
from airflow_provider_dispatch_lab.apiserver.requests import RequestInfo
from airflow_provider_dispatch_lab.runtime import DEFAULT_TOKEN, Lab

from .cluster import Cluster
from .either import Either
from .middleware import Handler, Hooks, failure_status, user_name

ADMIN, WRITER, READER, NO_NODES = "lab-admin", "writer", "reader", "no-nodes"
TOKENS = {
    DEFAULT_TOKEN: ADMIN,
    "writer-token": WRITER,
    "reader-token": READER,
    "no-nodes-token": NO_NODES,
}


class TokenAuthorizer:
    """Bearer tokens to users; the admin and the writer may do everything, the readers only read."""

    def authenticate(self, authorization: str | None) -> UserInfo | None:
        if not authorization or not authorization.startswith("Bearer "):
            return None
        user = TOKENS.get(authorization.removeprefix("Bearer "))
        return UserInfo(user, ("system:authenticated",)) if user else None

    def authorize(self, user: UserInfo, request: RequestInfo) -> Decision:
        if user.name in (ADMIN, WRITER):
            return Decision(True)
        reads = not request.is_resource or request.verb in ("get", "list", "watch")
        if user.name == NO_NODES and request.resource == "nodes":
            return Decision(False, "no nodes")
        return Decision(reads, "" if reads else "reads only")


@dataclass(frozen=True)
class Call:
    user: str
    method: str
    path: str
    query: Mapping[str, str]
    status: int | str
    peer: object = None

    @property
    def writes(self) -> bool:
        return self.method in ("PUT", "POST", "PATCH", "DELETE")


@dataclass
class Recorder:
    """Every request after authentication: who, what, and the answer (a status, or `dropped`)."""

    calls: list[Call] = field(default_factory=list)

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        name = user_name(request)
        peer = request.transport.get_extra_info("peername") if request.transport is not None else None

        def log(status: int | str) -> None:
            self.calls.append(Call(name, request.method, request.path, dict(request.query), status, peer))

        try:
            response = await handler(request)
        except BaseException as error:
            log(failure_status(error))
            raise
        log(response.status)
        return response

    def mark(self) -> int:
        return len(self.calls)

    def since(self, mark: int, *, admin: bool = False) -> list[Call]:
        return [c for c in self.calls[mark:] if admin or c.user != ADMIN]


@dataclass
class DispatchLab:
    lab: Lab
    recorder: Recorder
    hooks: Hooks

    def kubeconfig(self, user: str) -> Path:
        token = next(t for t, u in TOKENS.items() if u == user)
        return self.lab.kubeconfig(user, token=token, user=user)

    def settle(self) -> None:
        """Let lab time pass until a hold recorded now has settled (evidence.py: 90 s and the 5 s clock skew bound,
        by default)."""
        self.lab.call(lambda: self.lab.clock.advance(DEFAULT_SETTLE_SECONDS + DEFAULT_CLOCK_SKEW_SECONDS + 1))

    def revision(self) -> int:
        """The store's global resourceVersion: unchanged means nothing at all was written anywhere."""
        return self.lab.call(lambda: self.lab.inner.store.revision)


@pytest.fixture(scope="session")
def dispatch_lab() -> Iterator[DispatchLab]:
    auth = TokenAuthorizer()
    recorder, hooks = Recorder(), Hooks(bypass=lambda user: user == ADMIN, seed=11)
    with Lab(
        speed=100.0,
        authenticator=auth,
        authorizer=auth,
        middlewares=(recorder.middleware, hooks.middleware),
    ) as lab:
        yield DispatchLab(lab, recorder, hooks)


@pytest.fixture(autouse=True)
def _clear_hooks(dispatch_lab: DispatchLab) -> Iterator[None]:
    yield
    dispatch_lab.hooks.clear()


@pytest.fixture(scope="session")
def admin_api(dispatch_lab: DispatchLab) -> Iterator[kubernetes.client.ApiClient]:
    client = kubernetes.config.new_client_from_config(config_file=str(dispatch_lab.kubeconfig(ADMIN)))
    yield client
    client.close()


@pytest.fixture
def cluster(admin_api: kubernetes.client.ApiClient) -> Cluster:
    built = Cluster(admin_api, "")
    built.namespace = f"d-{built.suffix}"
    built.core.create_namespace({"metadata": {"name": built.namespace}})
    return built


# --- one interface over both adapters ---------------------------------------------------------------------


MakeAdapter = Callable[..., Awaitable[Either]]


@pytest.fixture
async def make_adapter(dispatch_lab: DispatchLab) -> AsyncIterator[MakeAdapter]:
    """`await make_adapter("sync" | "async", user=WRITER, kubeconfig=None, **options)`; closed after the test."""
    made: list[Either] = []
    clock = dispatch_lab.lab.clock.now_datetime

    async def make(kind: str, *, user: str = WRITER, kubeconfig: Path | None = None, **options: Any) -> Either:
        path = kubeconfig or dispatch_lab.kubeconfig(user)
        options.setdefault("clock", clock)
        either = await Either.from_kubeconfig(kind, path, **options)
        made.append(either)
        return either

    yield make
    for either in made:
        await either.close()


@pytest.fixture(params=["sync", "async"])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def adapter(make_adapter: MakeAdapter, kind: str) -> Either:
    """A writer adapter of each kind."""
    return await make_adapter(kind)

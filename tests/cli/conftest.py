"""Fixtures for the `dispatch` command's tests: a lab with a request log, and the command run through click.

The lab runs at speed 0 (lab time moves only when a test advances it), so the TrainJobs' creation times lie
behind this machine's clock and AGE reads as it would against a real cluster. It runs no controllers: each test
builds the cluster state step by step with `dispatch_lab.cluster.Cluster`, as the real controllers would leave
it. The request log records every request the lab answers, so a test can say what the command sent: nothing at
all for an invalid name, and only reads otherwise.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import kubernetes
import pytest
from aiohttp import web
from click.testing import CliRunner, Result
from dispatch_lab.cluster import Cluster

from airflow_provider_dispatch.cli.commands import main
from airflow_provider_dispatch_lab.runtime import Lab

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass
class RequestLog:
    """(method, path) of every request the lab served, in order."""

    calls: list[tuple[str, str]] = field(default_factory=list)

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        self.calls.append((request.method, request.path))
        return await handler(request)

    def mark(self) -> int:
        return len(self.calls)

    def since(self, mark: int) -> list[tuple[str, str]]:
        return self.calls[mark:]


@dataclass
class Gate:
    """Holds the lab's answer to each request `matches` accepts until `opened` is set (on the lab's loop)."""

    matches: Callable[[web.Request], bool] | None = None
    arrived: threading.Event = field(default_factory=threading.Event)
    opened: asyncio.Event = field(default_factory=asyncio.Event)

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if self.matches is not None and self.matches(request):
            self.arrived.set()
            await self.opened.wait()
        return await handler(request)


@dataclass
class CliLab:
    lab: Lab
    log: RequestLog
    kubeconfig: Path
    gate: Gate = field(default_factory=Gate)

    def run(self, *args: str, kubeconfig: Path | None = None) -> Result:
        """`dispatch ARGS --kubeconfig <the lab's>`, in-process, stdout and stderr kept apart."""
        path = kubeconfig or self.kubeconfig
        return CliRunner().invoke(main, [*args, "--kubeconfig", str(path)], prog_name="dispatch")

    def advance(self, seconds: float) -> None:
        self.lab.call(lambda: self.lab.clock.advance(seconds))

    @contextmanager
    def holding(self, matches: Callable[[web.Request], bool]) -> Iterator[threading.Event]:
        """While inside, the requests `matches` accepts wait unanswered; the event is set when one arrives."""
        self.gate.arrived, self.gate.opened = threading.Event(), asyncio.Event()
        self.gate.matches = matches
        try:
            yield self.gate.arrived
        finally:
            self.gate.matches = None
            self.lab.call(self.gate.opened.set)


@pytest.fixture(scope="module")
def cli_lab() -> Iterator[CliLab]:
    log, gate = RequestLog(), Gate()
    with Lab(speed=0.0, middlewares=(log.middleware, gate.middleware)) as lab:
        yield CliLab(lab, log, lab.kubeconfig("cli"), gate)


@pytest.fixture(scope="module")
def cli_api(cli_lab: CliLab) -> Iterator[kubernetes.client.ApiClient]:
    client = kubernetes.config.new_client_from_config(config_file=str(cli_lab.kubeconfig))
    yield client
    client.close()


@pytest.fixture
def cluster(cli_api: kubernetes.client.ApiClient) -> Cluster:
    built = Cluster(cli_api, f"c-{uuid.uuid4().hex[:10]}")
    built.core.create_namespace({"metadata": {"name": built.namespace}})
    return built

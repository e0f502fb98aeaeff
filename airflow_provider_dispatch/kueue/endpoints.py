"""The controller's HTTP endpoints on the Pod's port: `/healthz` (liveness), `/readyz` (readiness), `/metrics`.

* `/healthz` answers 200 while the process works: its event loop answers (else nothing answers and the kubelet's
  probe times out), its run is alive, and, when it leads, it renewed its Lease recently enough (client-go's
  `HealthzAdaptor`: a leader past its lease duration plus 20 s should have stepped down; a stuck one is
  restarted). 500 with the reason otherwise.
* `/readyz` answers 200 once the replica reached the API server (it read or wrote its Lease, or without leader
  election its caches are filled) and, while it leads, once its caches are filled; 503 with the reason otherwise.
  A standby is ready: it is what a rolling update and the PodDisruptionBudget count on to take over.
* `/metrics`: `metrics.py`'s counters in Prometheus' text format, rendered by `prometheus_client` (the
  `controller` extra, `CONTROLLER_EXTRA_INSTALL`) from a registry of this server's own.

The server is aiohttp's (a dependency of the package already); it binds where `--http-bind-address` says.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Final

from aiohttp import web

from airflow_provider_dispatch.kueue.metrics import CHECK_RESULTS, ERROR_KINDS, ControllerMetrics

#: the package is on no index yet (docs/quickstart.md, "Install"), as the `lab` extra's message says too
CONTROLLER_EXTRA_INSTALL: Final = (
    "pip install './[controller]' in a clone of airflow-provider-dispatch (it is on no package index)"
)
PROMETHEUS_MODULE: Final = "prometheus_client"
Probe = Callable[[], str | None]
"""None when fine, else why not."""


def metrics_available() -> bool:
    return importlib.util.find_spec(PROMETHEUS_MODULE) is not None


def parse_bind_address(text: str) -> tuple[str, int]:
    """`HOST:PORT` or `:PORT` (every interface, as controller-runtime's `--health-probe-bind-address`)."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"{text!r} is not HOST:PORT or :PORT")
    return host.strip("[]") or "0.0.0.0", int(port)  # every interface: a Pod's probes reach it on its IP


@dataclass
class Probes:
    alive: Probe
    ready: Probe


def _collector(metrics: ControllerMetrics) -> Any:
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
    from prometheus_client.registry import Collector

    class MetricsCollector(Collector):
        def collect(self) -> Iterator[Any]:
            checks = CounterMetricFamily(
                "dispatch_admission_checks", "Drain checks that reached a verdict, by result.", labels=["result"]
            )
            for result in CHECK_RESULTS:
                checks.add_metric([result], metrics.checks[result])
            yield checks
            yield CounterMetricFamily(
                "dispatch_admission_waits", "Checks that left a Workload Pending: pods remain.", value=metrics.waits
            )
            yield CounterMetricFamily(
                "dispatch_admission_admissions",
                "Workloads of dispatch TrainJobs whose check this controller set Ready.",
                value=metrics.admissions,
            )
            errors = CounterMetricFamily("dispatch_admission_errors", "Errors, by kind.", labels=["kind"])
            for kind in ERROR_KINDS:
                errors.add_metric([kind], metrics.errors[kind])
            yield errors
            yield GaugeMetricFamily(
                "dispatch_admission_waiting_workloads",
                "Workloads waiting for pods of their previous execution to go.",
                value=metrics.waiting_workloads,
            )
            yield GaugeMetricFamily(
                "dispatch_admission_leader", "1 while this replica leads, else 0.", value=int(metrics.leader)
            )
            yield CounterMetricFamily(
                "dispatch_admission_leader_changes",
                "Leaders this replica observed take the Lease.",
                value=metrics.leader_changes,
            )

    return MetricsCollector()


def render_metrics(metrics: ControllerMetrics) -> tuple[bytes, str]:
    """The exposition and its content type (ImportError without the `controller` extra)."""
    from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

    registry = CollectorRegistry(auto_describe=False)
    registry.register(_collector(metrics))
    return generate_latest(registry), CONTENT_TYPE_LATEST


class Endpoints:
    """The HTTP server; `start` binds (port 0: any free one, see `port`), `stop` closes."""

    def __init__(self, probes: Probes, metrics: ControllerMetrics) -> None:
        self.probes = probes
        self.metrics = metrics
        self._runner: web.AppRunner | None = None
        self.port = 0

    def application(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/livez", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        app.router.add_get("/metrics", self._metrics)
        return app

    async def start(self, host: str, port: int) -> int:
        self._runner = web.AppRunner(self.application(), access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port)
        await site.start()
        server = site._server  # the bound socket tells the port when 0 was asked for
        sockets = getattr(server, "sockets", None) or []
        self.port = int(sockets[0].getsockname()[1]) if sockets else port
        return self.port

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _healthz(self, request: web.Request) -> web.Response:
        return _answer(self.probes.alive(), 500)

    async def _readyz(self, request: web.Request) -> web.Response:
        return _answer(self.probes.ready(), 503)

    async def _metrics(self, request: web.Request) -> web.Response:
        body, content_type = render_metrics(self.metrics)
        return web.Response(body=body, headers={"Content-Type": content_type})


def _answer(problem: str | None, status: int) -> web.Response:
    if problem is None:
        return web.Response(text="ok\n")
    return web.Response(status=status, text=problem + "\n")


__all__ = [
    "CONTROLLER_EXTRA_INSTALL",
    "Endpoints",
    "Probes",
    "metrics_available",
    "parse_bind_address",
    "render_metrics",
]

"""`dispatch admission-controller`: connect, elect (optionally), serve the probes, run until SIGTERM or SIGINT.

On SIGTERM (what the kubelet sends when the Pod is deleted or rolled) the controller stops taking new work,
lets the reconciles in hand finish for at most `grace_seconds` (keep it below the Pod's
`terminationGracePeriodSeconds`), and, when it led, writes its Lease free so the standby takes over at once;
then it closes its client and exits 0. Stopping at any point is safe: every write is conditional and the raise
of A is idempotent per Workload admission (reconciler.py), so a reconcile cut short is simply done again by the
next run, here or on the other replica.

With leader election (`election`, leader.py) the process is a candidate: it waits for the Lease, then runs one
controller (a term) while it renews. A term ends when the replica stops leading (a renewal failed for the renew
deadline): its controller is cancelled at once, whatever it had in hand, and the replica becomes a candidate
again, with fresh caches next time. Its writes ask the elector first (`WritePermit`): a replica that is not
surely the leader sends none.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import signal
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from airflow_provider_dispatch.dispatch.async_adapter import AsyncDispatchAdapter
from airflow_provider_dispatch.kueue.api import KubeApi
from airflow_provider_dispatch.kueue.clock import Clock, WallClock
from airflow_provider_dispatch.kueue.connection import connect
from airflow_provider_dispatch.kueue.controller import AdmissionController, ControllerOptions
from airflow_provider_dispatch.kueue.endpoints import Endpoints, Probes
from airflow_provider_dispatch.kueue.leader import ElectionConfig, LeaderElector, WritePermit, stop_leading
from airflow_provider_dispatch.kueue.metrics import ControllerMetrics

logger = logging.getLogger("airflow_provider_dispatch.kueue")

#: where a Pod's namespace is written (the service account volume), and the Downward API variables the
#: Deployment sets
SERVICE_ACCOUNT_NAMESPACE: Final = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
POD_NAMESPACE_ENV: Final = "POD_NAMESPACE"
POD_NAME_ENV: Final = "POD_NAME"
DEFAULT_NAMESPACE: Final = "dispatch-system"


def election_namespace(given: str | None, environ: dict[str, str] | None = None) -> str:
    """The Lease's namespace: as given; else the Pod's (Downward API, then the service account's file); else
    `dispatch-system`."""
    env = environ if environ is not None else dict(os.environ)
    if given:
        return given
    if env.get(POD_NAMESPACE_ENV):
        return env[POD_NAMESPACE_ENV]
    with contextlib.suppress(OSError):
        written = SERVICE_ACCOUNT_NAMESPACE.read_text().strip()
        if written:
            return written
    return DEFAULT_NAMESPACE


@dataclass
class Running:
    """What the probes and the metrics read of the running process."""

    metrics: ControllerMetrics
    elector: LeaderElector | None = None
    controller: AdmissionController | None = None
    stopped: str | None = None
    monotonic: Callable[[], float] = time.monotonic
    #: set while a term's controller exists (this replica leads)
    term: asyncio.Event = field(default_factory=asyncio.Event)

    def alive(self) -> str | None:
        if self.stopped is not None:
            return self.stopped
        if self.elector is not None and not self.elector.healthy():
            return "leading, but the Lease was not renewed for longer than its duration plus 20 s"
        return None

    def ready(self) -> str | None:
        self.refresh()
        if self.elector is not None:
            since = self.monotonic() - self.elector.reached_at
            if since > self.elector.config.lease_duration:
                return "the API server was not reached (its Lease could not be read or written)"
            if not self.elector.leading:
                return None  # a standby, ready to take over
        if self.controller is None or not self.controller.ready.is_set():
            return "the caches of Workloads and AdmissionChecks are being filled"
        return None

    def refresh(self) -> None:
        if self.elector is not None:
            self.metrics.leader = self.elector.leading
            self.metrics.leader_changes = self.elector.transitions_seen


async def run_terms(
    adapter: AsyncDispatchAdapter,
    clock: Clock,
    election: ElectionConfig,
    options: ControllerOptions | None,
    stop: asyncio.Event,
    grace_seconds: float,
    running: Running,
    *,
    monotonic: Callable[[], float] | None = None,
) -> None:
    """Candidate, then leader for a term, again and again until `stop`; the Lease is released on a graceful stop."""
    elector = LeaderElector(KubeApi(adapter.api_client), election, clock, monotonic=monotonic)
    running.elector = elector
    permit = WritePermit(elector).check
    while not stop.is_set():
        if not await _first_of(elector.acquire(), stop):
            return
        running.refresh()
        controller = AdmissionController(adapter, clock, options, write_permit=permit, metrics=running.metrics)
        running.controller = controller
        running.term.set()
        term_over = asyncio.Event()
        renewing = asyncio.ensure_future(elector.renew())
        stopping = asyncio.ensure_future(stop.wait())
        for ending in (renewing, stopping):
            ending.add_done_callback(functools.partial(_set, term_over))
        working = asyncio.ensure_future(controller.run_until(term_over, grace_seconds))
        try:
            await term_over.wait()
            if stop.is_set() and not renewing.done():
                await working  # the reconciles in hand finish (at most the grace) while the Lease is still held
                await stop_leading(elector, renewing)
                return
            logger.warning(
                "stopped leading: this replica's work stopped at once; it is a candidate again",
                extra={"identity": election.identity},
            )
        finally:
            for task in (working, renewing, stopping):
                task.cancel()
            for task in (working, renewing, stopping):
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            running.controller = None
            running.term.clear()
            running.refresh()


def _set(event: asyncio.Event, _: object) -> None:
    event.set()


async def _first_of(work: Coroutine[Any, Any, None], stop: asyncio.Event) -> bool:
    """Run `work` until it returns (True) or `stop` is set first (False, `work` cancelled)."""
    task = asyncio.ensure_future(work)
    stopped = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait([task, stopped], return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in (task, stopped):
            if not waiter.done():
                waiter.cancel()
        for waiter in (task, stopped):
            with contextlib.suppress(asyncio.CancelledError):
                await waiter
    return task.done() and not task.cancelled() and task.exception() is None


async def run_admission_controller(
    kubeconfig: Path | None,
    *,
    context: str | None = None,
    options: ControllerOptions | None = None,
    grace_seconds: float = 10.0,
    stop: asyncio.Event | None = None,
    election: ElectionConfig | None = None,
    http_address: tuple[str, int] | None = None,
    on_listening: Callable[[int], None] | None = None,
    **adapter_options: Any,
) -> None:
    """Run until `stop` is set; without one, until SIGTERM or SIGINT. `election`: be one candidate of several
    (leader.py); `http_address`: serve the probes and metrics there (endpoints.py; `on_listening` is told the
    port). `adapter_options` go to the dispatch adapter (`settle_seconds`, `accepted_risks`)."""
    stop = stop or _stop_on_signals()
    adapter = await connect(kubeconfig, context=context, **adapter_options)
    running = Running(ControllerMetrics(leader=election is None))
    endpoints: Endpoints | None = None
    try:
        if http_address is not None:
            endpoints = Endpoints(Probes(running.alive, running.ready), running.metrics)
            port = await endpoints.start(*http_address)
            logger.info("serving /healthz, /readyz and /metrics on port %d", port, extra={"port": port})
            if on_listening is not None:
                on_listening(port)
        clock = WallClock()
        if election is None:
            running.controller = AdmissionController(adapter, clock, options, metrics=running.metrics)
            await running.controller.run_until(stop, grace_seconds)
        else:
            await run_terms(adapter, clock, election, options, stop, grace_seconds, running, monotonic=time.monotonic)
    finally:
        running.stopped = "the controller is stopping"
        if endpoints is not None:
            await endpoints.stop()
        await adapter.close()


def _stop_on_signals() -> asyncio.Event:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    def stopping(signum: signal.Signals) -> None:
        logger.info("received %s", signum.name, extra={"signal": signum.name})
        stop.set()

    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stopping, signum)
    return stop


__all__ = ["Running", "election_namespace", "run_admission_controller", "run_terms"]

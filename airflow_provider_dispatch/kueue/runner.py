"""`dispatch admission-controller`: connect, run until SIGTERM or SIGINT, stop gracefully.

On SIGTERM (what the kubelet sends when the Pod is deleted or rolled) the controller stops taking new work,
lets the reconciles in hand finish for at most `grace_seconds` (keep it below the Pod's
`terminationGracePeriodSeconds`), closes its client and exits 0. Stopping at any point is safe: every write is
conditional and the raise of A is idempotent per Workload admission (reconciler.py), so a reconcile cut short
is simply done again by the next run.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from pathlib import Path
from typing import Any

from airflow_provider_dispatch.kueue.clock import WallClock
from airflow_provider_dispatch.kueue.connection import connect
from airflow_provider_dispatch.kueue.controller import AdmissionController, ControllerOptions

logger = logging.getLogger("airflow_provider_dispatch.kueue")


async def run_admission_controller(
    kubeconfig: Path | None,
    *,
    context: str | None = None,
    options: ControllerOptions | None = None,
    grace_seconds: float = 10.0,
    stop: asyncio.Event | None = None,
    **adapter_options: Any,
) -> None:
    """Run until `stop` is set; without one, until SIGTERM or SIGINT. `adapter_options` go to the dispatch
    adapter (`settle_seconds`, `accepted_risks`)."""
    stop = stop or _stop_on_signals()
    adapter = await connect(kubeconfig, context=context, **adapter_options)
    try:
        await AdmissionController(adapter, WallClock(), options).run_until(stop, grace_seconds)
    finally:
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


__all__ = ["run_admission_controller"]

"""The benchmark lab, in a process of its own: `python -m benchmarks.harness.lab_launcher [options]`.

A benchmark measures a client's CPU time and memory, so the lab must not share the client's process (its event
loop, its JSON encoding of 50,000 pods and its heap would be counted as the client's). This launcher runs the
lab as `dispatch lab serve` does, plus the two lab-only paths benchmarks use: the meter (`lab/apiserver/metering.py`,
`GET /lab/metrics`, first among the middlewares so it sees every answer) and bulk seeding (`lab/apiserver/seeding.py`,
`POST /lab/seed`).

Once the lab serves, one JSON line goes to stdout: `{"url", "kubeconfig", "token", "pid"}`. The lab stops when
its stdin closes (the parent exited or called `LabProcess.stop`), or on SIGTERM / SIGINT.

Options: `--kubeconfig PATH` (required), `--speed` (lab time per wall second, default 100), `--rbac` (the lab's
RBAC identities instead of an allow-all lab), and `--controller module:factory`, repeatable, for benchmarks
that need the simulated cluster (each a `ControllerFactory` of `lab/simulated/cluster.py`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import json
import os
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import cast

from airflow_provider_dispatch_lab.apiserver.metering import Meter
from airflow_provider_dispatch_lab.apiserver.seeding import BulkSeeder
from airflow_provider_dispatch_lab.runtime import DEFAULT_TOKEN, AsyncLab
from airflow_provider_dispatch_lab.simulated.cluster import ControllerFactory


def controller_factory(spec: str) -> ControllerFactory:
    """`package.module:Name` as the factory it names; a clear error for anything else."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise SystemExit(f"--controller wants module:factory, not {spec!r}")
    try:
        factory = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as error:
        raise SystemExit(f"--controller {spec}: {error}") from None
    if not callable(factory):
        raise SystemExit(f"--controller {spec} is not callable")
    return cast(ControllerFactory, factory)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="lab_launcher", description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", type=Path, required=True)
    parser.add_argument("--speed", type=float, default=100.0)
    parser.add_argument("--rbac", action="store_true")
    parser.add_argument("--controller", action="append", default=[], dest="controllers")
    return parser.parse_args(argv)


async def serve(options: argparse.Namespace) -> None:
    meter, seeder = Meter(), BulkSeeder()
    factories = [controller_factory(spec) for spec in options.controllers]
    lab = AsyncLab(
        speed=options.speed,
        middlewares=(meter.middleware, seeder.middleware),
        controllers=factories,
        rbac=options.rbac,
    )
    seeder.bind(lab.server)
    async with lab:
        kubeconfig = lab.kubeconfig(options.kubeconfig.resolve())
        ready = {"url": lab.url, "kubeconfig": str(kubeconfig), "token": DEFAULT_TOKEN, "pid": os.getpid()}
        sys.stdout.write(json.dumps(ready) + "\n")
        sys.stdout.flush()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        threading.Thread(target=_stop_at_eof, args=(loop, stop), name="stdin-eof", daemon=True).start()
        await stop.wait()


def _stop_at_eof(loop: asyncio.AbstractEventLoop, stop: asyncio.Event) -> None:
    """Wait for stdin to close (the parent exited, or stopped the lab), then stop the lab.

    A daemon thread, not the loop's executor: `asyncio.run` would wait for an executor thread still reading."""
    sys.stdin.read()
    with contextlib.suppress(RuntimeError):  # the loop is already closed: the lab stopped on a signal
        loop.call_soon_threadsafe(stop.set)


def main(argv: Sequence[str] | None = None) -> None:
    asyncio.run(serve(parse_args(argv)))


if __name__ == "__main__":
    main()

"""The lab's clock, read and waited on from other processes: for benchmarks that report lab time.

A benchmark that measures a delay in lab time (a detection latency, a one-hour wait) must read the clock the
simulated cluster runs on, which lives in the lab process. `ClockProbe` is a "controller" in the lab's sense
(`lab/simulated/cluster.py` `ControllerFactory`, started with `LabProcess.start(controllers=[CLOCK_PROBE])`) that does
nothing to the cluster: it serves the lab's `LabClock` on a loopback socket of its own, so that the API server's
request path and meter never see these reads:

* `GET /now`: `{"lab": <lab epoch seconds>, "speed": ..., "monotonic": <time.monotonic() in the lab>}`;
* `GET /until?lab=T`: answers once lab time has reached `T` (`LabClock.sleep_until`), so a benchmark waits for
  an hour of lab time on the lab's own clock, never by a wall-time sleep of its own.

`time.monotonic()` is the system-wide CLOCK_MONOTONIC on Linux, the same in every process, so a reading's
`monotonic` lets a client place its own monotonic instants on the lab's time line (`Reading.lab_at`).

The probe binds its socket when the lab builds it (before the lab reports ready) and writes its URL to the file
named by the environment variable `DISPATCH_LAB_CLOCK_FILE`, which `clock_file` sets for the lab it starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from aiohttp import web

from airflow_provider_dispatch_lab.simulated.cluster import ClusterContext

from .environment import scoped_env

CLOCK_PROBE: Final = "benchmarks.harness.lab_clock:ClockProbe"
CLOCK_FILE_ENV: Final = "DISPATCH_LAB_CLOCK_FILE"


class ClockProbe:
    """Serves the lab's clock on its own loopback socket (see the module docstring)."""

    name = "clock-probe"

    def __init__(self, context: ClusterContext) -> None:
        self.clock = context.clock
        self.socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.socket.bind(("127.0.0.1", 0))
        self.socket.listen(64)
        self.socket.setblocking(False)
        url = f"http://127.0.0.1:{self.socket.getsockname()[1]}"
        target = os.environ.get(CLOCK_FILE_ENV)
        if target:
            Path(target).write_text(json.dumps({"url": url}))

    def reading(self) -> dict[str, float]:
        return {"lab": self.clock.now(), "speed": self.clock.speed, "monotonic": time.monotonic()}

    async def now(self, request: web.Request) -> web.Response:
        return web.json_response(self.reading())

    async def until(self, request: web.Request) -> web.Response:
        await self.clock.sleep_until(float(request.query["lab"]))
        return web.json_response(self.reading())

    async def run(self) -> None:
        app = web.Application()
        app.router.add_get("/now", self.now)
        app.router.add_get("/until", self.until)
        runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=0.1)
        await runner.setup()
        await web.SockSite(runner, self.socket).start()
        try:
            await asyncio.Event().wait()
        finally:
            await runner.cleanup()


@dataclass(frozen=True)
class Reading:
    """One reading of the lab clock, with the monotonic instant it was taken at."""

    lab: float
    speed: float
    monotonic: float

    def lab_at(self, monotonic: float) -> float:
        """Lab time at another monotonic instant near this reading (exact unless the lab's loop stalled between
        them, when lab time lags: `lab/clock.py` `max_stall`)."""
        return self.lab + (monotonic - self.monotonic) * self.speed


@dataclass(frozen=True)
class RemoteClock:
    """The lab clock as a client sees it, through the probe's URL (standard library HTTP: cheap, no client)."""

    url: str

    @classmethod
    def from_file(cls, path: Path) -> RemoteClock:
        return cls(str(json.loads(path.read_text())["url"]))

    def _get(self, path: str, timeout: float) -> Reading:
        with urllib.request.urlopen(self.url + path, timeout=timeout) as response:
            body = json.loads(response.read())
        return Reading(float(body["lab"]), float(body["speed"]), float(body["monotonic"]))

    def now(self) -> Reading:
        return self._get("/now", 10.0)

    def wait_until(self, lab_time: float, timeout: float = 600.0) -> Reading:
        """Block until lab time reaches `lab_time`; the reading taken then."""
        return self._get(f"/until?lab={lab_time!r}", timeout)


def clock_file(path: Path) -> contextlib.AbstractContextManager[None]:
    """Set `DISPATCH_LAB_CLOCK_FILE` for a lab started inside (the lab process inherits the environment)."""
    return scoped_env(**{CLOCK_FILE_ENV: str(path)})

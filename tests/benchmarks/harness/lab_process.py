"""The benchmark lab as a child process (`lab_launcher.py`), and the lab-only calls a benchmark makes to it.

`LabProcess.start(workdir)` starts the launcher and waits for its ready line; `stop()` closes its stdin (the
launcher stops the lab and exits) and only if that fails terminates it, by its own pid. Besides the API every
client uses through the kubeconfig, a benchmark calls, through `LabEndpoint` (any process that has the lab's URL
and token can build one, e.g. a worker):

* `meter()`: the lab's request/byte counters (`GET /lab/metrics`), as a `MeterReading`; `traffic()` their total;
* `seed(path, template, count, ...)`: bulk creation through the API server's own write path (`POST /lab/seed`),
  the setup of large namespaces;

and `process_cpu_seconds(pid)` / `LabProcess.rss_bytes()`: what the lab process itself has used, so that a
benchmark can show the server's share of a run without mixing it into the client's figures.

These use the standard library's HTTP client, not the `kubernetes` client whose cost is being measured.
"""

from __future__ import annotations

import json
import selectors
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import psutil

from airflow_provider_dispatch_lab.apiserver.metering import METRICS_PATH
from airflow_provider_dispatch_lab.apiserver.seeding import SEED_PATH, seed_body

from .meter import MeterReading, Traffic
from .workers import python_env

LAUNCHER = "benchmarks.harness.lab_launcher"


class LabProcessError(RuntimeError):
    """The lab process did not start, or a lab-only call failed."""


def _ready_line(process: subprocess.Popen[str], timeout: float) -> str:
    """The launcher's first stdout line, or an error if it exits or stays silent for `timeout` seconds."""
    assert process.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        if not selector.select(timeout):
            raise LabProcessError(f"the lab did not report ready within {timeout} s")
    line = process.stdout.readline()
    if not line:
        raise LabProcessError(f"the lab exited before it was ready (exit code {process.wait(10)})")
    return line


def process_cpu_seconds(pid: int) -> float:
    """CPU seconds (user + system) process `pid` has used so far (its children not included)."""
    times = psutil.Process(pid).cpu_times()
    return float(times.user + times.system)


@dataclass(frozen=True)
class LabEndpoint:
    """The lab's lab-only paths, as its admin; usable from any process that knows the URL and token."""

    url: str
    token: str

    def call(self, method: str, path: str, body: Mapping[str, Any] | None = None, timeout: float = 600.0) -> Any:
        """One request; the decoded JSON answer. An HTTP error raises LabProcessError."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.url + path,
            data=data,
            method=method,
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as error:
            raise LabProcessError(f"{method} {path}: {error.code} {error.read()[:500]!r}") from None

    def meter(self) -> MeterReading:
        return MeterReading.parse(self.call("GET", METRICS_PATH))

    def traffic(self) -> Traffic:
        return self.meter().total()

    def seed(
        self,
        path: str,
        template: Mapping[str, Any],
        count: int,
        *,
        start: int = 0,
        group_size: int = 1,
        chunk: int = 5000,
    ) -> int:
        """Create `count` objects from `template` (`lab/apiserver/seeding.py`), in requests of at most `chunk` objects;
        returns the store's resourceVersion after the last."""
        revision = 0
        for offset in range(0, count, chunk):
            body = seed_body(path, template, min(chunk, count - offset), start=start + offset, group_size=group_size)
            revision = int(self.call("POST", SEED_PATH, body)["resourceVersion"])
        return revision


@dataclass
class LabProcess:
    url: str
    token: str
    kubeconfig: Path
    process: subprocess.Popen[str]
    log_path: Path

    @classmethod
    def start(
        cls,
        workdir: Path,
        *,
        speed: float = 100.0,
        rbac: bool = False,
        controllers: Sequence[str] = (),
        timeout: float = 60.0,
    ) -> LabProcess:
        workdir.mkdir(parents=True, exist_ok=True)
        command = [sys.executable, "-m", LAUNCHER, "--kubeconfig", str(workdir / "kubeconfig.yaml")]
        command += ["--speed", str(speed), *(["--rbac"] if rbac else [])]
        for spec in controllers:
            command += ["--controller", spec]
        log_path = workdir / "lab.log"
        log: IO[str] = log_path.open("w")
        process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True, env=python_env()
        )
        log.close()  # the child holds its own descriptor
        try:
            ready = json.loads(_ready_line(process, timeout))
        except (LabProcessError, ValueError) as error:
            process.kill()
            process.wait(10)
            raise LabProcessError(f"{error}; see {log_path}:\n{log_path.read_text()[-2000:]}") from None
        return cls(ready["url"], ready["token"], Path(ready["kubeconfig"]), process, log_path)

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def endpoint(self) -> LabEndpoint:
        return LabEndpoint(self.url, self.token)

    def cpu_seconds(self) -> float:
        """CPU seconds (user + system) the lab process has used so far."""
        return process_cpu_seconds(self.pid)

    def rss_bytes(self) -> int:
        return int(psutil.Process(self.pid).memory_info().rss)

    def stop(self, timeout: float = 15.0) -> None:
        """Close the launcher's stdin (it stops the lab and exits); terminate it only if it does not."""
        if self.process.poll() is not None:
            return
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout)
        if self.process.stdout is not None:
            self.process.stdout.close()

    def __enter__(self) -> LabProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

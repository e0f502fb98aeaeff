"""Server processes a test starts and stops: each in its own process group, its output in a log file.

An Airflow component forks children (the api-server its uvicorn workers, the scheduler its LocalExecutor
workers, the triggerer its trigger runner), so a process is started as the leader of a new session and stopped
by signalling that group: SIGTERM, a bounded wait for a clean exit, then SIGKILL. Only the groups this module
started are ever signalled, by their own id.

`wait_until` is how a test waits for another process's state it cannot be told about (an HTTP answer, a row the
REST API reports): a predicate polled until it holds, with a bound that only fails the test, and a check on
every poll that the servers it depends on are still alive (a crashed server fails the wait at once, with its log).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

#: seconds a stopping process gets between SIGTERM and SIGKILL
STOP_GRACE = 30.0
#: seconds between two polls of `wait_until`
POLL_INTERVAL = 0.5


def free_port() -> int:
    """A TCP port on loopback that nothing listens on now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class ProcessDied(AssertionError):
    """A server the test needs exited while the test waited on it."""


class Service:
    """One long-running command: `start()`, `alive`, `stop()`, and its log (`log_path`, `tail()`)."""

    def __init__(self, name: str, argv: Sequence[str], env: Mapping[str, str], log_path: Path, cwd: Path) -> None:
        self.name = name
        self.argv = list(argv)
        self.env = dict(env)
        self.log_path = log_path
        self.cwd = cwd
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> Service:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            self._process = subprocess.Popen(
                self.argv,
                env=self.env,
                cwd=self.cwd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        return self

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def check_alive(self) -> None:
        if self._process is not None and self._process.poll() is not None:
            raise ProcessDied(
                f"{self.name} exited with code {self._process.returncode}; its log ({self.log_path}) ends:\n"
                f"{self.tail()}"
            )

    def stop(self, grace: float = STOP_GRACE) -> int | None:
        """SIGTERM the process group, wait up to `grace` seconds, then SIGKILL what is left of the group."""
        process = self._process
        if process is None:
            return None
        group = process.pid  # the leader of the session it was started in: its pid is the group id
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(group, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(grace)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, signal.SIGKILL)  # children that outlived a clean leader exit, or a hung leader
        process.wait(10)
        return process.returncode

    def tail(self, lines: int = 60) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return "(no log written)"
        return "\n".join(text.splitlines()[-lines:])


def wait_until(
    what: str,
    predicate: Callable[[], T | None],
    *,
    bound: float,
    services: Iterable[Service] = (),
    describe: Callable[[], str] = lambda: "",
) -> T:
    """Poll `predicate` until it returns a truthy value (returned); fail after `bound` seconds or if one of
    `services` dies. `describe()` says what was last seen, for the failure message.

    A predicate that times out (a server too slow to answer one poll on a loaded machine, `TimeoutError`) has not
    seen the state yet: the poll is repeated, within the same bound, and the failure message names the timeout."""
    watched = list(services)
    deadline = time.monotonic() + bound
    slow: TimeoutError | None = None
    while True:
        for service in watched:
            service.check_alive()
        try:
            value = predicate()
        except TimeoutError as error:
            value, slow = None, error
        if value:
            return value
        if time.monotonic() > deadline:
            seen = describe()
            raise AssertionError(
                f"gave up after {bound:.0f} s waiting for {what}"
                + (f"; last seen: {seen}" if seen else "")
                + (f"; a poll last timed out: {slow!r}" if slow is not None else "")
            )
        time.sleep(POLL_INTERVAL)


__all__ = ["POLL_INTERVAL", "STOP_GRACE", "ProcessDied", "Service", "free_port", "wait_until"]

"""The control plane's programs as child processes, each in its own process group, each with a log file.

A program is started with `start_new_session=True`, so it leads a process group of its own and a terminal's
Ctrl-C (sent to the foreground group) does not reach it before the cluster stops it in order. `stop()` sends
SIGTERM to the whole group, waits, then SIGKILLs the group: nothing a program forked survives it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, TypeVar

T = TypeVar("T")
logger = logging.getLogger(__name__)

STOP_GRACE_SECONDS = 10.0


class ControlPlaneError(RuntimeError):
    """A program of the real control plane did not start, or stopped by itself."""


def free_port() -> int:
    """A loopback TCP port nobody listens on now (the OS picks; a program binds it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Program:
    """One running program of the control plane."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        log_path: Path,
        *,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.log_path = log_path
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log: IO[bytes] = log_path.open("ab")
        self.process = subprocess.Popen(
            self.argv,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
            cwd=cwd,
            start_new_session=True,
        )

    @property
    def pid(self) -> int:
        return self.process.pid

    def running(self) -> bool:
        return self.process.poll() is None

    def tail(self, lines: int = 30) -> str:
        """The end of the program's log, for error messages."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def check(self) -> None:
        """Raise if the program has exited."""
        code = self.process.poll()
        if code is not None:
            raise ControlPlaneError(f"{self.name} exited with {code}; the end of {self.log_path}:\n{self.tail()}")

    def stop(self, grace: float = STOP_GRACE_SECONDS) -> None:
        """SIGTERM the process group, then SIGKILL it after `grace` seconds; idempotent."""
        try:
            self._signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(grace)
            self._signal(signal.SIGKILL)  # whatever the leader forked and left behind goes too
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(grace)
        finally:
            self._log.close()

    def kill(self) -> None:
        """SIGKILL the process group at once (a machine losing power), and reap it; idempotent."""
        try:
            self._signal(signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(STOP_GRACE_SECONDS)
        finally:
            self._log.close()

    def send_signal(self, signum: signal.Signals) -> None:
        """Send `signum` to the program's process group (SIGSTOP, SIGCONT: a frozen machine)."""
        self._signal(signum)

    def _signal(self, signum: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signum)


def wait_for(
    what: str,
    probe: Callable[[], T | None],
    *,
    timeout: float,
    programs: Sequence[Program] = (),
    interval: float = 0.2,
) -> T:
    """Poll `probe()` until it returns something other than None, with a deadline.

    A program in `programs` that exits meanwhile fails the wait at once, with the end of its log. This is how
    the cluster waits for a port to answer or an object to appear: it polls the real state, never sleeps for a
    guessed time.
    """
    deadline = time.monotonic() + timeout
    last_error: BaseException | None = None
    while True:
        for program in programs:
            program.check()
        try:
            result = probe()
        except Exception as error:  # a probe that fails is retried until the deadline
            last_error = error
            result = None
        if result is not None:
            logger.debug("%s after %.1f s", what, timeout - (deadline - time.monotonic()))
            return result
        if time.monotonic() >= deadline:
            detail = f" (last error: {last_error})" if last_error is not None else ""
            logs = "".join(f"\n--- {p.name} ({p.log_path}):\n{p.tail(15)}" for p in programs)
            raise ControlPlaneError(f"timed out after {timeout:.0f} s waiting for {what}{detail}{logs}")
        time.sleep(interval)

"""One simulated container process on a simulated machine, in lab time.

The process is the machine's truth, apart from what the kubelet tells the API: it starts, runs for its
`run-seconds` (or forever), stops on SIGTERM after its `termination-seconds`, is killed at the grace deadline,
exits at once on `exit-now`, and dies with its machine on power-off. Its interval goes to the overlap recorder
the moment it starts and stops, whatever the kubelet can or cannot report.

A paused machine (a frozen node) pauses its processes: the pending exit moves out by however long the pause
lasted. They still count as running (they hold their memory, devices and any lease they took), which is what
the overlap recorder must see.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from airflow_provider_dispatch_lab.clock import LabClock
from airflow_provider_dispatch_lab.simulated.nodes.workload import EXIT_SIGKILL, WorkloadSpec
from airflow_provider_dispatch_lab.truth.overlap import OverlapRecorder, ProcessRecord

Spawn = Callable[[Coroutine[Any, Any, None]], "asyncio.Task[None]"]


class Process:
    """A running process; `exit_code` is set when it ends (None if it died with its machine)."""

    def __init__(
        self,
        clock: LabClock,
        recorder: OverlapRecorder,
        record: ProcessRecord,
        spec: WorkloadSpec,
        spawn: Spawn,
        on_exit: Callable[[Process], None],
    ) -> None:
        self.clock = clock
        self.recorder = recorder
        self.record = record
        self.spec = spec
        self._spawn = spawn
        self._on_exit = on_exit
        self.exit_code: int | None = None
        self.finished_at: float | None = None
        self.terminating = False
        self.killed = False
        self.lost_with_machine = False
        self._deadline: float | None = None
        self._code = 0
        self._timer: asyncio.Task[None] | None = None
        self._paused_remaining: float | None = None
        if spec.run_seconds is not None:
            self._arm(record.start + spec.run_seconds, spec.exit_code)

    @property
    def running(self) -> bool:
        return self.finished_at is None

    @property
    def started_at(self) -> float:
        return self.record.start

    def _arm(self, at: float, code: int) -> None:
        if self._deadline is not None and self._deadline <= at:
            return  # something ends it earlier already
        self._cancel_timer()
        self._deadline, self._code = at, code
        if self._paused_remaining is not None:
            self._paused_remaining = at - self.clock.now()
            return
        self._timer = self._spawn(self._wait(at))

    async def _wait(self, at: float) -> None:
        await self.clock.sleep_until(at)
        self._finish(at, self._code)

    def _cancel_timer(self) -> None:
        timer, self._timer = self._timer, None
        if timer is not None and timer is not asyncio.current_task():
            timer.cancel()

    def terminate(self, grace_seconds: float) -> None:
        """SIGTERM now; SIGKILL at now + grace if it has not stopped by then."""
        if not self.running or self.terminating:
            return
        self.terminating = True
        now = self.clock.now()
        if self.spec.termination_seconds <= grace_seconds:
            self._arm(now + self.spec.termination_seconds, self.spec.sigterm_exit_code)
        else:
            self.killed = True
            self._arm(now + grace_seconds, EXIT_SIGKILL)

    def exit_now(self, code: int) -> None:
        if self.running:
            self._finish(self.clock.now(), code)

    def power_off(self) -> None:
        """The machine stops: the process is gone at this instant, with no exit code anyone will read."""
        if self.running:
            self.lost_with_machine = True
            self._finish(self.clock.now(), None)

    def pause(self) -> None:
        if not self.running or self._paused_remaining is not None:
            return
        self._cancel_timer()
        remaining = None if self._deadline is None else max(self._deadline - self.clock.now(), 0.0)
        self._paused_remaining = -1.0 if remaining is None else remaining

    def resume(self) -> None:
        if self._paused_remaining is None:
            return
        remaining, self._paused_remaining = self._paused_remaining, None
        if remaining >= 0 and self._deadline is not None and self.running:
            self._deadline = None
            self._arm(self.clock.now() + remaining, self._code)

    def _finish(self, at: float, code: int | None) -> None:
        if not self.running:
            return
        self._cancel_timer()
        self._deadline = None
        self.exit_code = code
        self.finished_at = max(at, self.record.start)
        self.recorder.stopped(self.record, self.finished_at)
        self._on_exit(self)

"""Lab time held still while a test reads what lab time would change: one helper for every tier that uses a lab.

A lab runs faster than wall time (a module's `LAB_SPEED`, 100 in the session lab), so whatever a test reads after
a wait can have moved on by the time the test thread gets the CPU: at speed 20, one second of a loaded machine is
20 lab seconds, enough for a 10 s quarantine to end, a 5 s termination to finish or a toleration to run out. A
test that reads such state holds lab time still across the window it checks (`lab_time_stopped`), or from the
moment the state it waits for appears (`lab_time_stopped_when`: the clock stops in the same turn of the lab's loop,
so not one more lab second passes between the state and the reads), and moves it on by `Scenario.advance` only.
Leaving the block gives the clock back its speed; nothing sleeps.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from airflow_provider_dispatch_lab.runtime import Lab

T = TypeVar("T")


@contextmanager
def lab_speed(lab: Lab, speed: float) -> Iterator[float]:
    """Lab time at `speed` for the block (0: it stands still but for explicit advances), then at the speed it had;
    yields lab time at the start of the block."""
    before = lab.call(lambda: lab.clock.speed)

    def set_speed() -> float:
        lab.clock.set_speed(speed)
        return lab.clock.now()

    started = lab.call(set_speed)
    try:
        yield started
    finally:
        lab.call(lambda: lab.clock.set_speed(before))


@contextmanager
def lab_time_stopped(lab: Lab) -> Iterator[float]:
    """Lab time stands still in the block but for `Scenario.advance`; yields lab time at its start."""
    with lab_speed(lab, 0.0) as started:
        yield started


@contextmanager
def lab_time_stopped_when(lab: Lab, reached: Callable[[], Awaitable[T]], *, timeout: float = 30.0) -> Iterator[T]:
    """Wait on the lab's loop until `reached()` returns (a wait on state: an object through a watch, a controller's
    pass), stop lab time in that same turn of the loop, and yield what it returned; lab time stands still in the
    block but for `Scenario.advance`, and runs at its speed again after it. `timeout` (wall seconds) bounds the
    wait only, as a failure: it never decides an outcome."""
    before = lab.call(lambda: lab.clock.speed)

    async def stop_on_arrival() -> T:
        async with asyncio.timeout(timeout):
            value = await reached()
        lab.clock.set_speed(0.0)
        return value

    try:
        value = lab.run(stop_on_arrival, timeout + 10)
    except TimeoutError as error:
        raise TimeoutError(f"waited {timeout} s on the lab for {reached!r}") from error
    try:
        yield value
    finally:
        lab.call(lambda: lab.clock.set_speed(before))

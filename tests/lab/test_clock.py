"""The lab clock: faster than real time, jumps, stops, and does not count a starved event loop as lab time."""

from __future__ import annotations

import asyncio
import time

import pytest

from airflow_provider_dispatch_lab.clock import LabClock, format_timestamp, parse_timestamp
from airflow_provider_dispatch_lab.runtime import Lab


async def test_sleep_wakes_on_a_jump() -> None:
    clock = LabClock(speed=0.0)  # stopped: only advance() moves time
    ticker = asyncio.create_task(clock.run())
    start = clock.now()
    sleeper = asyncio.create_task(clock.sleep(3600))
    await asyncio.sleep(0)
    assert not sleeper.done()
    clock.advance(3599)
    await asyncio.sleep(0.01)
    assert not sleeper.done()
    clock.advance(1)
    await asyncio.wait_for(sleeper, 30.0)  # a hang bound: the sleeper wakes on the loop's next turn
    assert clock.now() - start == pytest.approx(3600)
    ticker.cancel()


async def test_time_runs_at_speed_while_the_loop_runs() -> None:
    """A 30 s sleep at speed 100 ends once 30 lab seconds passed; lab time never ran faster than 100 times the wall
    time around it, and it ran faster than wall time (a clock that ignored its speed would not). No bound on the
    wall time itself: that is the machine's (the stall guard gives a starved loop less lab time, never more), so
    only a loop starved for more than 5 s between its 5 ms ticks, again and again, could fail the last one."""
    clock = LabClock(speed=100.0)
    ticker = asyncio.create_task(clock.run())
    start_wall, start_lab = time.monotonic(), clock.now()
    await clock.sleep(30)  # a 30 s grace period
    lab, wall = clock.now() - start_lab, time.monotonic() - start_wall
    ticker.cancel()
    assert lab >= 30
    assert lab <= 100.0 * wall + 1e-6
    assert lab > wall


def test_a_starved_loop_does_not_age_the_lab() -> None:
    def starve() -> float:
        """Block the lab's loop for half a second of wall time; the lab time that passed meanwhile. One call on
        the loop, so that no other wall time (this thread's own, however loaded the machine) is counted."""
        before = lab.clock.now()
        time.sleep(0.5)
        return lab.clock.now() - before

    with Lab(speed=100.0) as lab:
        aged = lab.call(starve)
    # 0.5 s at 100x would be 50 lab seconds, a node monitor grace period; the stall guard counts at most 0.05 s.
    assert aged <= 0.05 * 100.0 + 1e-6


def test_timestamps_round_trip() -> None:
    assert format_timestamp(parse_timestamp("2026-12-02T10:00:07Z")) == "2026-12-02T10:00:07Z"
    with pytest.raises(ValueError, match="forward"):
        LabClock().advance(-1)


async def test_a_sleeper_cancelled_in_the_turn_the_clock_wakes_it_is_cancelled() -> None:
    """A controller killed just as a jump of lab time wakes its sleep stops there. The jump and the cancel happen
    in one turn of the loop; `asyncio.wait_for` on Python 3.11 returned the finished wait instead of the
    cancellation (python/cpython#86296), so the sleeper went on as if nothing had happened."""
    clock = LabClock(speed=1.0)  # running: the sleep has a wall-time bound, the path `wait_for` took on 3.11
    sleeper = asyncio.create_task(clock.sleep(3600))
    await asyncio.sleep(0)  # it waits for the clock to change
    clock.advance(3600)  # its deadline passes: its wait ends on the next turn
    sleeper.cancel()  # and it is killed in the same turn
    with pytest.raises(asyncio.CancelledError):
        await sleeper

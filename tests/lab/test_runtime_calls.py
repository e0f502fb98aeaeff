"""A call into the lab's loop that does not finish says what the loop was doing, instead of a bare TimeoutError
(a CI teardown once failed with nothing more than `TimeoutError`)."""

from __future__ import annotations

import asyncio

import pytest

from airflow_provider_dispatch_lab.runtime import Lab


def test_a_call_that_never_finishes_names_itself_and_the_tasks_it_waits_with() -> None:
    with Lab() as lab:
        never = asyncio.Event()

        async def wait_for_what_never_comes() -> None:
            await never.wait()

        with pytest.raises(TimeoutError) as raised:
            lab.run(wait_for_what_never_comes, timeout=0.2)
        message = str(raised.value)
        assert "did not finish 'test_a_call_that_never_finishes" in message
        assert "wait_for_what_never_comes" in message  # the task's own stack: where it awaits
        assert "loop thread:" in message
        assert lab.call(lambda: 41 + 1) == 42  # the timed-out call was cancelled; the loop goes on

"""The hollow machines' container runtime (lab/real/containers.py) on a stopped lab clock: what a CRI call does to
the lab's simulated processes, and what the overlap recorder sees, apart from any kubelet.

The real tier runs the same runtime under the real kubelet (tests/real); here each call is made by hand, so a
rule of the runtime can fail by itself: StopContainer's timeout against the pod's termination seconds, a frozen
machine postponing an exit, a power-off ending every process at that instant, a bad workload annotation refused
when the container is created.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from airflow_provider_dispatch_lab.clock import LabClock
from airflow_provider_dispatch_lab.real.containers import ContainerRuntime, CriError
from airflow_provider_dispatch_lab.simulated.nodes.workload import (
    RUN_SECONDS,
    SIGTERM_EXIT_CODE,
    TERMINATION_SECONDS,
)
from airflow_provider_dispatch_lab.truth.overlap import OverlapRecorder

START = datetime(2026, 12, 7, tzinfo=UTC)


def _runtime() -> tuple[ContainerRuntime, LabClock, OverlapRecorder]:
    clock = LabClock(0.0, START)
    recorder = OverlapRecorder()
    return ContainerRuntime("n1", clock, recorder, 0), clock, recorder


async def _started(runtime: ContainerRuntime, annotations: dict[str, str]) -> str:
    sandbox = runtime.run_sandbox(
        name="p",
        namespace="ns",
        uid="uid-1",
        attempt=0,
        labels={"io.kubernetes.pod.name": "p", "app": "a"},
        annotations=annotations,
        host_network=False,
        runtime_handler="",
        config=None,
    )
    container = runtime.create_container(
        sandbox.id, name="main", attempt=0, image="busybox:1.36", labels={}, annotations={}, log_path="main/0.log"
    )
    await runtime.start_container(container.id)
    return container.id


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


@pytest.mark.parametrize(
    ("termination", "grace", "code", "stopped_after"),
    [("3", 5, 143, 3.0), ("10", 5, 137, 5.0), ("0", 0, 137, 0.0)],
    ids=["stops-within-the-timeout", "killed-at-the-timeout", "timeout-0-kills-at-once"],
)
async def test_stop_container_takes_the_termination_seconds_within_the_kubelets_timeout(
    termination: str, grace: int, code: int, stopped_after: float
) -> None:
    runtime, clock, recorder = _runtime()
    container_id = await _started(runtime, {TERMINATION_SECONDS: termination})
    (record,) = recorder.records
    assert record.labels == {"app": "a"}  # the pod's own labels, not the kubelet's
    stopping = asyncio.ensure_future(runtime.stop_container(container_id, grace))
    await _settle()
    if stopped_after:
        assert not stopping.done()
        assert record.running
        clock.advance(stopped_after)
    await asyncio.wait_for(stopping, 5)
    assert record.stop == START.timestamp() + stopped_after
    container = runtime.container(container_id)
    assert (container.state, container.exit_code, container.reason) == ("EXITED", code, "Error")


async def test_a_frozen_machine_postpones_an_exit_and_a_power_off_ends_every_process_at_once() -> None:
    runtime, clock, recorder = _runtime()
    container_id = await _started(runtime, {RUN_SECONDS: "10", SIGTERM_EXIT_CODE: "0"})
    (record,) = recorder.records
    clock.advance(4)
    await _settle()
    runtime.freeze()
    clock.advance(20)  # paused: the 6 s it had left wait for the thaw
    await _settle()
    assert record.running
    runtime.thaw()
    clock.advance(5)
    await _settle()
    assert record.running
    runtime.power_off()
    assert record.stop == START.timestamp() + 29
    assert runtime.containers == {}
    with pytest.raises(CriError) as gone:
        runtime.container(container_id)
    assert gone.value.code == "NOT_FOUND"


async def test_a_bad_workload_annotation_is_refused_when_the_container_is_created() -> None:
    runtime, _, recorder = _runtime()
    with pytest.raises(CriError) as refused:
        await _started(runtime, {RUN_SECONDS: "soon"})
    assert refused.value.code == "INVALID_ARGUMENT"
    assert RUN_SECONDS in str(refused.value)
    assert recorder.records == []

"""Detection latency cases, each run in a worker process of its own (`python -m benchmarks.latency_cases`).

What one sample is: a TrainJob held after its execution, its one pod Terminating on a Ready node (built as the
real controllers leave it, `dispatch_lab.cluster.Cluster.held_after_execution`); the waiter under test starts
and makes its first drain check (pods remain: it waits); at a random phase after that check the pod is removed
as its kubelet removes it once the containers stopped (a DELETE with grace 0, as the lab's admin, from another
thread); the sample is the time from sending that DELETE to the waiter's `drained` event, in wall time and in
lab time (the lab's clock, `harness.lab_clock`).

Cases:

* `watch`: the real `PodsDrainedTrigger.run()` (shared watches of pods and nodes through `triggers.hub`, a
  consistent re-check on a change that matters), its safety-net re-check an hour away, so that only the watch
  can wake it;
* `poll`: the baseline, a fixed-interval poll as the cncf-kubernetes `KubernetesPodTrigger` waits
  (`poll_interval: float = 2`, `await asyncio.sleep(self.poll_interval)` between reads): the same consistent
  drain check (`hooks.checks.drain_check` on the same async adapter) every `pollInterval` seconds.

The removal phase is drawn uniformly in [0, pollInterval) after the first check, from a seeded generator, the
same draws for both cases: a poll's latency depends on where in its interval the removal falls, and a removal
always right after a check would be its worst case. That wait is the experiment's design (when the pod goes),
not a synchronisation: the waiter's readiness is known from its own first check, never from a sleep.

The waiters run on one event loop per worker, as a triggerer runs its triggers; the removal runs in a thread so
the loop is the waiter's alone.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import kubernetes

from airflow_provider_dispatch.hooks.checks import drain_check
from airflow_provider_dispatch.hooks.dispatch import AsyncDispatchHook
from airflow_provider_dispatch.triggers.pods_drained import PodsDrainedTrigger

from .detection_latency import CASES
from .harness.held import TRAINJOB, held_trainjob
from .harness.lab_clock import RemoteClock
from .harness.workers import serve

#: the trigger's safety-net re-check: an hour, so an event that arrives came through the watch
NO_RECHECK: Final = 3600.0
#: the longest one sample may take before the worker gives up (a bound, not a synchronisation)
SAMPLE_BOUND: Final = 60.0


class ObservedTrigger(PodsDrainedTrigger):
    """The real trigger, which also tells the benchmark when a check left it waiting, and counts its checks.

    `next_wait` is what `PodsDrainedTrigger.wait` calls after an undecided check, just before it waits for a
    change: the one point where "the first check is done, pods remain" is known without reading logs."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.waiting = asyncio.Event()
        self.undecided_checks = 0

    def next_wait(self) -> float:
        self.undecided_checks += 1
        self.waiting.set()
        return super().next_wait()


@dataclass
class Sample:
    """One removal and its detection."""

    phase_seconds: float
    wall_seconds: float
    lab_seconds: float
    delete_round_trip_seconds: float
    checks: int
    status: str

    def as_json(self) -> dict[str, Any]:
        return {
            "phaseSeconds": self.phase_seconds,
            "wallSeconds": self.wall_seconds,
            "labSeconds": self.lab_seconds,
            "deleteRoundTripSeconds": self.delete_round_trip_seconds,
            "checks": self.checks,
            "status": self.status,
        }


def remove(admin: kubernetes.client.ApiClient, namespace: str, pod: str) -> tuple[float, float]:
    """The kubelet's confirmation: DELETE with grace 0. Returns (monotonic when sent, round trip seconds)."""
    core = kubernetes.client.CoreV1Api(admin)
    sent = time.monotonic()
    core.delete_namespaced_pod(pod, namespace, grace_period_seconds=0)
    return sent, time.monotonic() - sent


async def watch_waiter(namespace: str, connection: Mapping[str, Any], ready: asyncio.Event) -> tuple[str, int]:
    trigger = ObservedTrigger(namespace, TRAINJOB, recheck_interval=NO_RECHECK, **connection)
    trigger.waiting = ready
    event = await anext(trigger.run())
    return str(event.payload["status"]), trigger.undecided_checks + 1


async def poll_waiter(
    namespace: str, connection: Mapping[str, Any], ready: asyncio.Event, interval: float
) -> tuple[str, int]:
    """The baseline: check, and if pods remain sleep `interval` and check again (cncf's pod trigger loop)."""
    adapter = await AsyncDispatchHook.from_connection_kwargs(connection).get_adapter()
    checks = 0
    try:
        while True:
            check = await adapter.run(drain_check(f"{namespace}/{TRAINJOB}", adapter.operations))
            checks += 1
            if check.report.drained:
                return "drained", checks
            ready.set()
            await asyncio.sleep(interval)
    finally:
        await adapter.close()


async def one_sample(
    case: str, admin: kubernetes.client.ApiClient, clock: RemoteClock, payload: Mapping[str, Any], phase: float
) -> Sample:
    namespace, pod = await asyncio.to_thread(held_trainjob, admin, "lat")
    connection = {"connection_extras": {"kube_config_path": payload["kubeconfig"]}}
    ready = asyncio.Event()
    if case == "watch":
        waiter = asyncio.create_task(watch_waiter(namespace, connection, ready))
    else:
        waiter = asyncio.create_task(poll_waiter(namespace, connection, ready, float(payload["pollInterval"])))
    await asyncio.wait_for(ready.wait(), SAMPLE_BOUND)
    await asyncio.sleep(phase)  # when the pod goes, relative to the waiter's checks (see the module docstring)
    before = await asyncio.to_thread(clock.now)
    sent, round_trip = await asyncio.to_thread(remove, admin, namespace, pod)
    status, checks = await asyncio.wait_for(waiter, SAMPLE_BOUND)
    detected = time.monotonic()
    after = await asyncio.to_thread(clock.now)
    return Sample(
        phase_seconds=phase,
        wall_seconds=detected - sent,
        lab_seconds=after.lab_at(detected) - before.lab_at(sent),
        delete_round_trip_seconds=round_trip,
        checks=checks,
        status=status,
    )


async def run_case(payload: Mapping[str, Any]) -> list[Sample]:
    case = str(payload["case"])
    if case not in CASES:
        raise SystemExit(f"unknown case {case!r}; known: {', '.join(CASES)}")
    clock = RemoteClock(str(payload["clockUrl"]))
    rng = random.Random(int(payload.get("seed", 8)))
    phases = [rng.uniform(0.0, float(payload["pollInterval"])) for _ in range(int(payload["repeat"]))]
    admin = kubernetes.config.new_client_from_config(config_file=str(payload["kubeconfig"]))
    try:
        await one_sample(case, admin, clock, payload, 0.0)  # warm-up: client, watches, code paths; not reported
        return [await one_sample(case, admin, clock, payload, phase) for phase in phases]
    finally:
        admin.close()


def handle(payload: dict[str, Any]) -> dict[str, Any]:
    samples = asyncio.run(run_case(payload))
    return {"case": payload["case"], "samples": [s.as_json() for s in samples]}


if __name__ == "__main__":
    serve(handle)

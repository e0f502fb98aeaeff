"""N waiting PodsDrainedTriggers in one event loop, as a triggerer runs them (`python -m` this module: one case).

Every target is a held TrainJob whose one pod stays (the lab runs no kubelet, so nothing ever removes it): no
trigger can finish, so what is measured is the cost of waiting. Cases:

* `shared`: the real `PodsDrainedTrigger.run()`, N of them as tasks on one loop with one connection: they share
  one client and one watch per (kind, namespace) through `triggers.hub` (a pod watch per namespace, one node
  watch). What dispatch does.
* `unshared`: the same trigger with the hub's sharing defeated: each trigger gets a connection of its own (its
  `connection_extras` differ by a key nothing reads, so `hooks.dispatch.connection_key` differs), so each builds
  its own client and opens its own pod and node watches. What the trigger would cost without the hub.
* `poll`: no watch at all, the cncf way (`KubernetesPodTrigger`: a hook per trigger, its own check every
  `poll_interval`, 2 s by default there): N coroutines, each with its own client, running the same read-only
  drain check (`hooks.checks.drain_check`) then `asyncio.sleep(poll_interval)`, until drained.

The worker builds nothing shared before the clock starts except one warm-up check against a warm-up TrainJob (so
imports and first-call caches are not counted), then:

1. start-up burst: from starting the N tasks until every one has answered its first drain check (so every
   trigger waits on its watches, or sleeps till its next poll): wall time, CPU, requests by verb and resource,
   event-loop lag;
2. steady window of `windowSeconds`: requests by verb and resource (so per second), drain checks run,
   event-loop lag (`harness.loop_lag`: oversleep of `asyncio.sleep(0.01)`), CPU, RSS;
3. open watches (the client's own counters: streams open at the end of the window) and the hub's sharing;
4. garbage collection (`harness.gc_pauses`): one full collection timed before the triggers start (the warm
   process's floor) and again with every trigger waiting, and each phase's lag split into the samples a full
   collection overlapped and the rest (what the triggers' own code held the loop for).

Requests are the lab meter's; a watch is counted by the meter only when its stream ends, so watches opened are
taken from the client (`ResourceWatch.streams`), not from the meter.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import psutil

from airflow_provider_dispatch.dispatch.async_adapter import AsyncDispatchAdapter
from airflow_provider_dispatch.dispatch.programs import Program
from airflow_provider_dispatch.hooks.checks import drain_check
from airflow_provider_dispatch.hooks.dispatch import AsyncDispatchHook
from airflow_provider_dispatch.triggers.hub import SharedConnection, current_hub
from airflow_provider_dispatch.triggers.pods_drained import PodsDrainedTrigger

from .harness.gc_pauses import timed_full_collection
from .harness.lab_process import LabEndpoint
from .harness.loop_lag import LoopLag
from .harness.series import by_verb_resource
from .harness.workers import serve

CASES: Final = {
    "shared": "PodsDrainedTrigger.run(), one connection: one client, one watch per (kind, namespace)",
    "unshared": "PodsDrainedTrigger.run(), a connection per trigger: a client and two watches each",
    "poll": "cncf-style poll: a client per trigger, a drain check every poll interval, no watch",
}

#: the key added to each `unshared` trigger's connection extras; the hook never reads it
COPY_EXTRA: Final = "benchmark_connection_copy"


@dataclass
class Progress:
    """Drain checks answered, per target: the start-up burst ends when every target has answered one."""

    targets: int
    checks: int = 0
    first: set[int] = field(default_factory=set)
    events: list[dict[str, Any]] = field(default_factory=list)
    all_started: asyncio.Event = field(default_factory=asyncio.Event)

    def checked(self, index: int) -> None:
        self.checks += 1
        self.first.add(index)
        if len(self.first) == self.targets:
            self.all_started.set()


class CountedTrigger(PodsDrainedTrigger):
    """`PodsDrainedTrigger`, unchanged, that also reports each answered drain check to the benchmark."""

    def __init__(self, *args: Any, progress: Progress, index: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.progress = progress
        self.index = index

    async def checked(self, shared: SharedConnection, make_program: Callable[[], Program[Any]]) -> Any:
        result = await super().checked(shared, make_program)
        self.progress.checked(self.index)
        return result


def connection(kubeconfig: str, copy: int | None) -> dict[str, Any]:
    extras: dict[str, Any] = {"kube_config_path": kubeconfig}
    if copy is not None:
        extras[COPY_EXTRA] = str(copy)
    return {"connection_extras": extras}


async def run_trigger(trigger: PodsDrainedTrigger, progress: Progress) -> None:
    async for event in trigger.run():
        progress.events.append(dict(event.payload))


async def poll(index: int, ref: str, kubeconfig: str, interval: float, progress: Progress) -> None:
    """One cncf-style waiter: its own client, a drain check, a fixed sleep, again, until drained."""
    adapter: AsyncDispatchAdapter = await AsyncDispatchHook.from_connection_kwargs(
        connection(kubeconfig, None)
    ).get_adapter()
    try:
        while True:
            check = await adapter.run(drain_check(ref, adapter.operations))
            progress.checked(index)
            if check.report.drained or check.report.ceased:
                progress.events.append({"status": "drained", "ref": ref})
                return
            await asyncio.sleep(interval)
    finally:
        await adapter.close()


def start_case(payload: Mapping[str, Any], progress: Progress) -> list[asyncio.Task[None]]:
    case, kubeconfig = payload["case"], payload["kubeconfig"]
    loop = asyncio.get_running_loop()
    coroutines: list[Awaitable[None]] = []
    for index, (namespace, name) in enumerate(payload["targets"]):
        if case == "poll":
            coroutines.append(poll(index, f"{namespace}/{name}", kubeconfig, payload["pollInterval"], progress))
            continue
        trigger = CountedTrigger(
            namespace,
            name,
            progress=progress,
            index=index,
            recheck_interval=payload["recheckInterval"],
            **connection(kubeconfig, index if case == "unshared" else None),
        )
        coroutines.append(run_trigger(trigger, progress))
    return [loop.create_task(c, name=f"{case} {i}") for i, c in enumerate(coroutines)]  # type: ignore[arg-type]


def watch_stats() -> dict[str, int]:
    """Connections, watch objects and open streams in this loop's hub (0 for the poll case)."""
    hub = current_hub()
    watches = [w for c in hub.connections.values() for w in c.watches.values()]
    return {
        "connections": len(hub.connections),
        "watches": len(watches),
        "streams": sum(w.streams for w in watches),
        "lists": sum(w.lists for w in watches),
        "failures": sum(w.failures for w in watches),
    }


async def warm_up(payload: Mapping[str, Any]) -> None:
    """One drain check on the warm-up TrainJob with a client of its own, closed again: imports and caches."""
    namespace, name = payload["warmup"]
    hook = AsyncDispatchHook.from_connection_kwargs(connection(payload["kubeconfig"], None))
    adapter = await hook.get_adapter()
    try:
        await adapter.run(drain_check(f"{namespace}/{name}", adapter.operations))
    finally:
        await adapter.close()


async def measure_case(payload: Mapping[str, Any]) -> dict[str, Any]:
    lab = LabEndpoint(payload["labUrl"], payload["token"])
    process = psutil.Process()
    await warm_up(payload)
    gc.collect()
    heap_before = timed_full_collection()  # the floor: one full collection of the warm process, no trigger yet
    lag = LoopLag()
    lag.start()
    progress = Progress(len(payload["targets"]))
    rss_before = process.memory_info().rss
    before = await asyncio.to_thread(lab.meter)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    tasks = start_case(payload, progress)
    try:
        await asyncio.wait_for(progress.all_started.wait(), payload["startupTimeout"])
    except TimeoutError:
        raise SystemExit(
            f"{payload['case']}: only {len(progress.first)} of {progress.targets} targets were checked within "
            f"{payload['startupTimeout']} s"
        ) from None
    cpu1, wall1 = time.process_time(), time.perf_counter()
    startup_lag = lag.take()
    started = await asyncio.to_thread(lab.meter)
    rss_started = process.memory_info().rss
    checks_started = progress.checks
    await asyncio.sleep(payload["windowSeconds"])  # the steady window: what waiting costs, measured as it passes
    cpu2, wall2 = time.process_time(), time.perf_counter()
    steady_lag = lag.take()
    checks_steady = progress.checks - checks_started
    ended = await asyncio.to_thread(lab.meter)
    rss_steady = process.memory_info().rss
    watches = watch_stats()
    await lag.stop()
    heap_waiting = timed_full_collection()  # the same, with every trigger waiting
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return {
        "case": payload["case"],
        "triggers": len(payload["targets"]),
        "namespaces": len({namespace for namespace, _ in payload["targets"]}),
        "events": progress.events,
        "startup": {
            "wallSeconds": wall1 - wall0,
            "cpuSeconds": cpu1 - cpu0,
            "checks": checks_started,
            "traffic": by_verb_resource(started - before),
            "lag": startup_lag.as_json(),
        },
        "steady": {
            "wallSeconds": wall2 - wall1,
            "cpuSeconds": cpu2 - cpu1,
            "checks": checks_steady,
            "traffic": by_verb_resource(ended - started),
            "lag": steady_lag.as_json(),
        },
        "watches": watches,
        "fullCollection": {"beforeTriggers": heap_before, "triggersWaiting": heap_waiting},
        "rssBeforeBytes": rss_before,
        "rssStartedBytes": rss_started,
        "rssSteadyBytes": rss_steady,
    }


def run_case(payload: dict[str, Any]) -> dict[str, Any]:
    if payload["case"] not in CASES:
        raise SystemExit(f"unknown case {payload['case']!r}; known: {', '.join(CASES)}")
    return asyncio.run(measure_case(payload))


if __name__ == "__main__":
    serve(run_case)

"""The watch-and-reconcile machinery on its own: the work queue's semantics on a lab clock, and an informer that
relists after 410 Gone and resumes after a watch the server ended, against a lab with injected faults, pacing
every attempt that got nothing on the backoff schedule (counted in lab time, never timed)."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import kubernetes_asyncio
import pytest
from aiohttp import web

from airflow_provider_dispatch.backoff import BackoffSchedule
from airflow_provider_dispatch.dispatch import vocabulary as v
from airflow_provider_dispatch.kueue.api import KubeApi
from airflow_provider_dispatch.kueue.informer import RETRY_BACKOFF, Event, Informer
from airflow_provider_dispatch.kueue.workqueue import WorkQueue
from airflow_provider_dispatch_lab.apiserver.faults import FaultInjector, FaultRule
from airflow_provider_dispatch_lab.clock import LabClock
from airflow_provider_dispatch_lab.runtime import DEFAULT_TOKEN, AsyncLab
from airflow_provider_dispatch_lab.simulated.kueue.admission_check import lab_kubeconfig

TIMEOUT = 10.0
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


async def test_the_work_queue_dedupes_never_runs_a_key_twice_at_once_and_delays() -> None:
    clock = LabClock(speed=0.0)
    ticker = asyncio.get_running_loop().create_task(clock.run())
    queue: WorkQueue[str] = WorkQueue(clock)
    queue.add("a")
    queue.add("a")
    queue.add("b")
    assert len(queue) == 2
    key = await queue.get()
    assert key == "a"
    queue.add("a")  # changed while processed: queued again once done, not handed to a second worker
    assert await queue.get() == "b"
    assert len(queue) == 0
    queue.done("a")
    assert await queue.get() == "a"
    queue.done("a")
    queue.done("b")

    queue.add_after("c", 30.0)
    queue.add_after("c", 60.0)  # the earlier timer wins
    assert queue.pending_timer("c") == clock.now() + 30.0
    waiter = asyncio.ensure_future(queue.get())
    await asyncio.sleep(0.05)
    assert not waiter.done()  # lab time stands still: nothing is due
    clock.advance(30.0)
    assert await asyncio.wait_for(waiter, TIMEOUT) == "c"
    queue.done("c")

    queue.add_after("d", 10.0)
    await queue.shut_down()
    assert await queue.get() is None
    queue.add("e")
    assert await queue.get() is None
    ticker.cancel()


@pytest.fixture
async def faulty_lab() -> AsyncIterator[tuple[AsyncLab, FaultInjector]]:
    injector = FaultInjector(seed=5)
    async with AsyncLab(speed=50.0, middlewares=(injector.middleware,)) as lab:
        yield lab, injector


async def test_an_informer_relists_after_410_and_resumes_after_an_ended_watch(
    faulty_lab: tuple[AsyncLab, FaultInjector],
) -> None:
    lab, injector = faulty_lab
    loader = kubernetes_asyncio.config.kube_config.KubeConfigLoader(config_dict=lab_kubeconfig(lab.url, DEFAULT_TOKEN))
    configuration = kubernetes_asyncio.client.Configuration()
    await loader.load_and_set(configuration)
    async with kubernetes_asyncio.client.ApiClient(configuration) as client:
        api = KubeApi(client)
        informer = Informer(api, v.NODE, lab.clock, backoff=BackoffSchedule(initial=0.1, maximum=1.0))
        seen: list[tuple[str, str]] = []
        changed = asyncio.Event()

        def record(event: Event) -> None:
            seen.append((event.type, v.name_of(event.obj)))
            changed.set()

        async def until(condition: object) -> None:
            async with asyncio.timeout(TIMEOUT):
                while not condition():  # type: ignore[operator]
                    changed.clear()
                    await changed.wait()

        informer.on_event(record)
        injector.add(FaultRule(kind="410", verbs=frozenset({"watch"}), resources=frozenset({"nodes"}), count=1))
        injector.add(FaultRule(kind="end-watch", verbs=frozenset({"watch"}), resources=frozenset({"nodes"}), count=2))
        injector.add(FaultRule(kind="500", verbs=frozenset({"list"}), resources=frozenset({"nodes"}), count=2))
        task = asyncio.get_running_loop().create_task(informer.run())
        try:
            async with asyncio.timeout(TIMEOUT):
                await informer.synced.wait()
            from airflow_provider_dispatch_lab.client import LabClient
            from airflow_provider_dispatch_lab.scenario import manifests

            admin = LabClient(lab.url, DEFAULT_TOKEN)
            try:
                for name in ("n1", "n2"):
                    await admin.create(v.NODE, None, manifests.node(name))
                await until(lambda: {("ADDED", "n1"), ("ADDED", "n2")} <= set(seen))
                await admin.delete(v.NODE, None, "n1")
                await until(lambda: ("DELETED", "n1") in seen)
            finally:
                await admin.close()
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
    assert set(informer.cache) == {("", "n2")}
    assert informer.relists >= 2  # the first list (after two failed ones), and the one after 410 Gone
    fired = {kind for _, _, kind in injector.log}
    assert {"500", "410", "end-watch"} <= fired


async def test_the_pod_informer_reports_events_of_trainjob_pods_only_and_keeps_no_cache(
    faulty_lab: tuple[AsyncLab, FaultInjector],
) -> None:
    lab, _ = faulty_lab
    from airflow_provider_dispatch_lab.client import LabClient
    from airflow_provider_dispatch_lab.scenario import manifests

    loader = kubernetes_asyncio.config.kube_config.KubeConfigLoader(config_dict=lab_kubeconfig(lab.url, DEFAULT_TOKEN))
    configuration = kubernetes_asyncio.client.Configuration()
    await loader.load_and_set(configuration)
    admin = LabClient(lab.url, DEFAULT_TOKEN)
    async with kubernetes_asyncio.client.ApiClient(configuration) as client:
        informer = Informer(KubeApi(client), v.POD, lab.clock, keep_cache=False, label_selector=v.LABEL_JOBSET_NAME)
        seen: list[tuple[str, str]] = []
        relisted: list[int] = []
        arrived = asyncio.Event()

        def record(event: Event) -> None:
            seen.append((event.type, v.name_of(event.obj)))
            arrived.set()

        informer.on_event(record)
        informer.on_relist(lambda: relisted.append(informer.relists))
        task = asyncio.get_running_loop().create_task(informer.run())
        try:
            async with asyncio.timeout(TIMEOUT):
                await informer.synced.wait()
            await admin.create(v.POD, "default", manifests.pod("other"))
            await admin.create(v.POD, "default", manifests.pod("tj-node-0-0-x", labels={v.LABEL_JOBSET_NAME: "tj"}))
            async with asyncio.timeout(TIMEOUT):
                await arrived.wait()
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await admin.close()
    assert seen == [("ADDED", "tj-node-0-0-x")]
    assert informer.cache == {}
    assert relisted == [1]


# --- pacing: attempts that get nothing wait on the backoff schedule ------------------------------------------

STRETCH = 120.0  # lab seconds the informer is left to run while every watch ends at once
CAP = 60  # requests after which a loop is taken as unpaced (the test then fails on the count)


@dataclass
class Requests:
    """What the lab received from the informer (counted by a middleware, in the order it arrived)."""

    watches: int = 0
    lists: int = 0
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.method == "GET" and request.path == "/api/v1/nodes":
            if request.query.get("watch") == "true":
                self.watches += 1
            else:
                self.lists += 1
            self.changed.set()
        return await handler(request)


@dataclass
class SteppingClock:
    """Lab time that passes only while the informer waits: each pause it asks for is recorded and jumps the
    (stopped) lab clock by exactly that much, so a stretch of lab time is crossed without any wall-clock wait
    and the count of requests in it is exact."""

    lab_clock: LabClock
    woken: asyncio.Event
    pauses: list[float] = field(default_factory=list)

    def now(self) -> float:
        return self.lab_clock.now()

    async def sleep(self, seconds: float) -> None:
        self.pauses.append(seconds)
        self.lab_clock.advance(seconds)
        self.woken.set()
        await asyncio.sleep(0)


async def run_informer_until(
    fault: FaultRule, stretch: float, counted: Callable[[Requests], int]
) -> tuple[Requests, SteppingClock]:
    """A node informer against a lab whose every node watch meets `fault`, run until `stretch` lab seconds
    passed or `counted` reached CAP; what the lab received, and the pauses."""
    requests = Requests()
    injector = FaultInjector(seed=5)
    injector.add(fault)
    async with AsyncLab(speed=0.0, middlewares=(requests.middleware, injector.middleware)) as lab:
        clock = SteppingClock(lab.clock, requests.changed)
        start = clock.now()
        loader = kubernetes_asyncio.config.kube_config.KubeConfigLoader(
            config_dict=lab_kubeconfig(lab.url, DEFAULT_TOKEN)
        )
        configuration = kubernetes_asyncio.client.Configuration()
        await loader.load_and_set(configuration)
        async with kubernetes_asyncio.client.ApiClient(configuration) as client:
            informer = Informer(KubeApi(client), v.NODE, clock, rng=random.Random(11))
            task = asyncio.get_running_loop().create_task(informer.run())
            try:
                async with asyncio.timeout(TIMEOUT):
                    while clock.now() - start < stretch and counted(requests) < CAP:
                        requests.changed.clear()
                        await requests.changed.wait()
            finally:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
    return requests, clock


async def test_an_informer_whose_watches_end_at_once_reconnects_on_the_backoff_schedule() -> None:
    """Every watch ends at once with 200 and no event: the informer resumes it after each pause, and the pauses
    grow, so over 120 lab seconds the lab sees about a dozen watches, not one every 0.4 to 0.8 s (150 to 300)."""
    fault = FaultRule(kind="end-watch", verbs=frozenset({"watch"}), resources=frozenset({"nodes"}))
    requests, clock = await run_informer_until(fault, STRETCH, lambda seen: seen.watches)
    assert requests.lists == 1  # an empty watch is resumed from its resourceVersion, not relisted
    assert fault.fired == requests.watches >= 5
    # the first watch, one more after each pause that fits in the stretch, and the one the last pause let through
    assert requests.watches <= 1 + RETRY_BACKOFF.most_retries_within(STRETCH) + 1
    for failures, pause in enumerate(clock.pauses):  # each pause is the schedule's, one step further each time
        ceiling = RETRY_BACKOFF.ceiling(failures)
        assert ceiling / 2 <= pause <= ceiling


async def test_an_informer_pauses_before_it_lists_again_after_410_gone() -> None:
    """Every watch is answered 410 Gone: the informer lists again each time, but only after a pause (a list
    that succeeds starts the count over, so each pause is the first step of the schedule)."""
    stretch = 10.0
    fault = FaultRule(kind="410", verbs=frozenset({"watch"}), resources=frozenset({"nodes"}))
    requests, clock = await run_informer_until(fault, stretch, lambda seen: seen.lists)
    assert requests.lists >= 5
    shortest = RETRY_BACKOFF.least_total(1)
    assert requests.lists <= stretch / shortest + 2
    assert len(clock.pauses) >= requests.lists - 1  # one pause before every relist
    assert all(RETRY_BACKOFF.ceiling(0) / 2 <= pause <= RETRY_BACKOFF.ceiling(0) for pause in clock.pauses)

"""The admission check controller: informers, a work queue keyed by Workload, workers, a resync, and `Active`.

::

    informers: Workloads, AdmissionChecks, Nodes (cached), Pods (events only)
        -> WorkQueue keyed by Workload -> workers -> Reconciler -> requeue with jittered backoff per key
    AdmissionChecks -> the Active keeper (admissionchecks/status)
    every resync_seconds: every Workload with our check Pending, and every waiting one, queued again

A Workload is queued when an event shows it with one of our checks Pending, when a pod or node that one of its
remaining pods depends on changes, after its backoff, and at every resync (the safety net for anything missed).
A key is never reconciled by two workers at once (workqueue.py). Every failure is logged and retried: an
unreachable API server, 403s, a reconcile that raised, a watch that ended; nothing kills the controller but a
cancel.

One controller is one term of leadership (runner.py): with leader election, the runner makes a new controller
each time its replica acquires the Lease and cancels it when the replica stops leading, and every write the
controller sends (through its `KubeApi` and the adapter) asks the write permit first (leader.py). Without leader
election the permit always allows. Two controllers at once would still never admit twice (the write that raises
A is conditional and keyed per admission, and our entry's apply is conditional on the version read); the election
keeps them from doing every check twice, and the standby from writing at all.

Each reconcile's outcome is counted in `metrics` (metrics.py), which `http.py` serves.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Final

from airflow_provider_dispatch.backoff import BackoffSchedule, KeyedBackoff
from airflow_provider_dispatch.dispatch import vocabulary as v
from airflow_provider_dispatch.dispatch.async_adapter import AsyncDispatchAdapter
from airflow_provider_dispatch.dispatch.explain import pod_on_node
from airflow_provider_dispatch.dispatch.payloads import KUEUE_MESSAGE_LIMIT, by_name, listed_pods
from airflow_provider_dispatch.kueue import checks as ac
from airflow_provider_dispatch.kueue.api import ApiCallError, KubeApi
from airflow_provider_dispatch.kueue.clock import Clock, timestamp
from airflow_provider_dispatch.kueue.connection import ControllerAdapter
from airflow_provider_dispatch.kueue.informer import Event, Informer, object_key
from airflow_provider_dispatch.kueue.metrics import ControllerMetrics
from airflow_provider_dispatch.kueue.reconciler import Outcome, Reconciler
from airflow_provider_dispatch.kueue.verdicts import Retry
from airflow_provider_dispatch.kueue.waiting import WaitingIndex, node_signature
from airflow_provider_dispatch.kueue.workloads import has_pending_check
from airflow_provider_dispatch.kueue.workqueue import WorkQueue

Key = tuple[str, str]
logger = logging.getLogger("airflow_provider_dispatch.kueue")

FIELD_MANAGER: Final = "dispatch-admission-controller"
#: pods remain: look again after this backoff (and at once on a relevant pod or node event)
WAITING_BACKOFF: Final = BackoffSchedule(initial=2.0, maximum=60.0)
#: the API failed: retry after this backoff
ERROR_BACKOFF: Final = BackoffSchedule(initial=0.5, maximum=60.0)
#: a refusal: a person has to act; look again after this backoff, and at the resync
REFUSED_BACKOFF: Final = BackoffSchedule(initial=10.0, maximum=300.0)


@dataclass(frozen=True)
class ControllerOptions:
    """How the controller runs. Times are seconds of the controller's clock."""

    controller_name: str = v.ADMISSION_CHECK_CONTROLLER
    #: only these AdmissionChecks (each must still have our controllerName); None: every one that has it
    check_names: frozenset[str] | None = None
    field_manager: str = FIELD_MANAGER
    workers: int = 4
    resync_seconds: float = 300.0
    waiting_backoff: BackoffSchedule = WAITING_BACKOFF
    error_backoff: BackoffSchedule = ERROR_BACKOFF
    refused_backoff: BackoffSchedule = REFUSED_BACKOFF
    #: seed of the jitter (tests); None: random
    seed: int | None = None

    def __post_init__(self) -> None:
        if self.workers < 1:
            raise ValueError(f"workers must be at least 1, not {self.workers}")
        if self.resync_seconds <= 0:
            raise ValueError(f"resync_seconds must be more than 0, not {self.resync_seconds}")


class AdmissionController:
    """Runs until cancelled (`run`) or until a stop event, finishing the reconciles in hand (`run_until`)."""

    name = "dispatch-admission-controller"

    def __init__(
        self,
        adapter: AsyncDispatchAdapter,
        clock: Clock,
        options: ControllerOptions | None = None,
        *,
        write_permit: Callable[[str], None] | None = None,
        metrics: ControllerMetrics | None = None,
    ) -> None:
        self.options = options or ControllerOptions()
        self.adapter = adapter
        self.clock = clock
        self.rng = random.Random(self.options.seed)
        self.metrics = metrics or ControllerMetrics(leader=True)
        if isinstance(adapter, ControllerAdapter):
            adapter.write_permit = write_permit
        self.api = KubeApi(adapter.api_client, write_permit=write_permit)
        self.waiting = WaitingIndex()
        self.ours: frozenset[str] = frozenset()
        self.workloads = Informer(self.api, v.WORKLOAD, clock, rng=self.rng)
        self.admission_checks = Informer(self.api, ac.ADMISSION_CHECK, clock, rng=self.rng)
        self.nodes = Informer(self.api, v.NODE, clock, rng=self.rng)
        # every pod of a TrainJob carries the JobSet name label; watching only those keeps the stream small
        self.pods = Informer(self.api, v.POD, clock, keep_cache=False, label_selector=v.LABEL_JOBSET_NAME, rng=self.rng)
        self.queue: WorkQueue[Key] = WorkQueue(clock)
        self.reconciler = Reconciler(
            self.api, adapter, clock, lambda: self.ours, self.waiting, self.options.field_manager
        )
        self._backoffs = {
            Retry.WAITING: KeyedBackoff[Key](self.options.waiting_backoff, self.rng),
            Retry.TRANSIENT: KeyedBackoff[Key](self.options.error_backoff, self.rng),
            Retry.REFUSED: KeyedBackoff[Key](self.options.refused_backoff, self.rng),
        }
        self._poke_keeper = asyncio.Event()
        #: set once the Workload and AdmissionCheck caches are filled and the workers run
        self.ready = asyncio.Event()
        self._warned: set[str] = set()
        self.reconciles = 0
        self.workloads.on_event(self._on_workload)
        self.admission_checks.on_event(self._on_admission_check)
        self.nodes.on_event(self._on_node)
        self.pods.on_event(self._on_pod)
        self.pods.on_relist(self._recheck_waiting)
        self.nodes.on_relist(self._recheck_waiting)

    # --- running ---------------------------------------------------------------------------------------------

    async def run(self) -> None:
        await self.run_until(None)

    async def run_until(self, stop: asyncio.Event | None, grace_seconds: float = 10.0) -> None:
        """Run until `stop` is set (or until cancelled); then let the workers finish, at most `grace_seconds`."""
        background: list[asyncio.Task[None]] = []
        workers: list[asyncio.Task[None]] = []

        def spawn(into: list[asyncio.Task[None]], coroutine: Coroutine[Any, Any, None], name: str) -> None:
            into.append(asyncio.get_running_loop().create_task(coroutine, name=name))

        try:
            for informer, label in (
                (self.workloads, "workloads"),
                (self.admission_checks, "admissionchecks"),
                (self.nodes, "nodes"),
                (self.pods, "pods"),
            ):
                spawn(background, informer.run(), f"{self.name}: {label} informer")
            if not await self._synced_or_stopped(stop):
                return
            logger.info(
                "admission check controller started: checks %s of controller %s",
                ", ".join(sorted(self.ours)) or "(none yet)",
                self.options.controller_name,
                extra={"checks": sorted(self.ours), "controller_name": self.options.controller_name},
            )
            self._queue_candidates()
            spawn(background, self._keep_active(), f"{self.name}: Active keeper")
            spawn(background, self._resync(), f"{self.name}: resync")
            for number in range(self.options.workers):
                spawn(workers, self._work(), f"{self.name}: worker {number}")
            self.ready.set()
            if stop is None:
                await asyncio.Event().wait()
            else:
                await stop.wait()
                logger.info("stopping: finishing the reconciles in hand", extra={"grace_seconds": grace_seconds})
            for task in background:
                task.cancel()
            await self.queue.shut_down()
            if workers:
                await asyncio.wait(workers, timeout=grace_seconds)
        finally:
            for task in (*background, *workers):
                task.cancel()
            for task in (*background, *workers):
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            await self.queue.shut_down()
            logger.info("admission check controller stopped")

    async def _synced_or_stopped(self, stop: asyncio.Event | None) -> bool:
        """Wait until the Workload and AdmissionCheck caches are filled; False when stopped first."""
        synced = asyncio.ensure_future(
            asyncio.gather(*(i.synced.wait() for i in (self.workloads, self.admission_checks)))
        )
        waiters: list[asyncio.Future[Any]] = [synced]
        if stop is not None:
            waiters.append(asyncio.ensure_future(stop.wait()))
        try:
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waiters:
                waiter.cancel()
            for waiter in waiters:
                with contextlib.suppress(asyncio.CancelledError):
                    await waiter
        return synced.done() and not synced.cancelled()

    # --- events ----------------------------------------------------------------------------------------------

    def _add(self, key: Key) -> None:
        self.queue.add(key)

    def _on_workload(self, event: Event) -> None:
        key = object_key(event.obj)
        if event.type == "DELETED":
            self.waiting.clear(key)
            return
        if has_pending_check(event.obj, self.ours) or key in self.waiting:
            self._add(key)

    def _on_admission_check(self, event: Event) -> None:
        checks = self.admission_checks.items()
        ours = ac.our_checks(checks, self.options.controller_name, self.options.check_names)
        for name, other in ac.misdirected(checks, self.options.controller_name, self.options.check_names).items():
            if name not in self._warned:
                self._warned.add(name)
                logger.warning(
                    "AdmissionCheck %s was named with --check-name but belongs to controller %s; it is left alone",
                    name,
                    other,
                    extra={"check": name, "controller_name": other},
                )
        if ours != self.ours:
            added = ours - self.ours
            self.ours = ours
            logger.info("our admission checks: %s", ", ".join(sorted(ours)) or "(none)", extra={"checks": sorted(ours)})
            if added:
                self._queue_candidates()
        self._poke_keeper.set()

    def _on_node(self, event: Event) -> None:
        name = v.name_of(event.obj)
        before = node_signature(event.old)
        after = node_signature(None if event.type == "DELETED" else event.obj)
        if before != after or event.type != "MODIFIED":
            for key in self.waiting.for_node(name):
                self._add(key)

    def _on_pod(self, event: Event) -> None:
        for key in self.waiting.for_pod(event.obj):
            self._add(key)

    def _recheck_waiting(self) -> None:
        for key in self.waiting.all():
            self._add(key)

    def _queue_candidates(self) -> None:
        for workload in self.workloads.items():
            if has_pending_check(workload, self.ours):
                self._add(object_key(workload))

    # --- work ------------------------------------------------------------------------------------------------

    async def _work(self) -> None:
        while True:
            key = await self.queue.get()
            if key is None:
                return
            try:
                outcome = await self._reconcile(key)
            finally:
                self.queue.done(key)
            self._schedule(key, outcome)

    async def _reconcile(self, key: Key) -> Outcome:
        self.reconciles += 1
        try:
            outcome = await self.reconciler.reconcile(key)
        except asyncio.CancelledError:
            raise
        except Exception:  # a bug must not stop the controller: log it and retry the Workload later
            logger.exception("reconcile of Workload %s/%s failed", *key, extra={"workload": "/".join(key)})
            self.metrics.failed("reconcile")
            return Outcome(Retry.TRANSIENT)
        if outcome.verdict is not None:
            self.metrics.checked(outcome.verdict, written=outcome.written, write_failed=outcome.write_failed)
        self.metrics.waiting_workloads = len(self.waiting.all())
        self._log(key, outcome)
        return outcome

    def _schedule(self, key: Key, outcome: Outcome) -> None:
        for retry, backoff in self._backoffs.items():
            if retry is not outcome.retry:
                backoff.forget(key)
        if outcome.retry is Retry.NONE:
            return
        settle = outcome.verdict.after if outcome.verdict is not None else None
        if outcome.retry is Retry.SETTLING and settle is not None:
            # the hold has settled after exactly this long on the API server's clock (evidence.py); a second
            # more covers its clock's one-second resolution
            self.queue.add_after(key, settle + 1.0)
            return
        delay = self._backoffs[outcome.retry].next_delay(key)
        self.queue.add_after(key, delay)

    def _log(self, key: Key, outcome: Outcome) -> None:
        verdict = outcome.verdict
        workload = "/".join(key)
        if verdict is None:
            logger.debug("Workload %s skipped: %s", workload, outcome.skipped, extra={"workload": workload})
            return
        extra: dict[str, Any] = {"workload": workload, "state": verdict.state, "retry": verdict.retry.value}
        if verdict.execution is not None:
            extra["admission"] = verdict.execution.admission
        if verdict.remaining:  # the first pods by name, as many as the admission check message could name
            ordered = by_name(verdict.remaining)
            extra["remaining"] = listed_pods(ordered, KUEUE_MESSAGE_LIMIT, pod_on_node)
            extra["remaining_count"] = len(ordered)
        if verdict.state is None:
            logger.info("Workload %s not checked yet: %s", workload, verdict.message, extra=extra)
        elif outcome.written:
            logger.info("Workload %s: check %s: %s", workload, verdict.state, verdict.message, extra=extra)

    # --- periodic ----------------------------------------------------------------------------------------------

    async def _resync(self) -> None:
        while True:
            await self.clock.sleep(self.options.resync_seconds)
            self._queue_candidates()
            self._recheck_waiting()
            self._poke_keeper.set()

    async def _keep_active(self) -> None:
        """Keep `Active=True` on each of our AdmissionChecks; retried with backoff when the write fails."""
        failures = 0
        while True:
            await self._poke_keeper.wait()
            self._poke_keeper.clear()
            try:
                for check in self.admission_checks.items():
                    if v.name_of(check) in self.ours and ac.needs_activation(check):
                        await self._activate(check)
                failures = 0
            except ApiCallError as error:
                delay = self.options.error_backoff.delay(failures, self.rng)
                failures += 1
                logger.warning(
                    "could not set an AdmissionCheck Active, retrying in %.1fs: %s",
                    delay,
                    error,
                    extra={"retry_in": round(delay, 3)},
                )
                await self.clock.sleep(delay)
                self._poke_keeper.set()

    async def _activate(self, check: dict[str, Any]) -> None:
        body = ac.active_status_body(check, self.options.controller_name, timestamp(self.clock.now()))
        await self.api.apply_status(ac.ADMISSION_CHECK, body, self.options.field_manager)
        logger.info("AdmissionCheck %s set Active", v.name_of(check), extra={"check": v.name_of(check)})


__all__ = ["FIELD_MANAGER", "AdmissionController", "ControllerOptions"]

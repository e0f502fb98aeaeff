"""Dispatch callers: the sync and the async adapter, each as its own identity, alone or several at once.

Airflow can run two tries of a task, or two triggers, at the same moment (anchors §0.6, §4.2), through either
client. A `Caller` is one adapter (`DispatchAdapter` on `kubernetes`, or `AsyncDispatchAdapter` on
`kubernetes_asyncio`, the latter on an event loop thread of its own) with its own bearer token, so the journal
tells its requests apart. `Callers.at_once` runs several operations in threads that start together and waits
for all of them; each result is an `Outcome`: what the caller was told, and which of its requests belong to it.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from airflow_provider_dispatch.dispatch import AsyncDispatchAdapter, DispatchAdapter
from airflow_provider_dispatch.dispatch.assessment import Execution
from airflow_provider_dispatch.dispatch.conflicts import ConflictRetry
from airflow_provider_dispatch.dispatch.errors import DispatchError, RefusedError, UnreachableError

from .harness import Call, ReliabilityLab

T = TypeVar("T")
WRITE_OPERATIONS = frozenset({"release", "hold", "open"})


class LoopThread:
    """An event loop on a thread of its own, for the async adapters (as a triggerer runs them)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="reliability-async", daemon=True)
        self._thread.start()

    def run(self, coroutine: Coroutine[Any, Any, T], timeout: float = 120.0) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()


@dataclass
class Outcome:
    """One operation by one caller: its result or its error, and the journal window of its requests."""

    caller: str
    kind: str
    operation: str
    target: str
    result: Any = None
    error: BaseException | None = None
    #: journal serials: the operation's requests arrived at start..end-1 (Journal.between)
    start: int = 0
    end: int = 0
    calls: list[Call] = field(default_factory=list)
    #: conflicts the operation met and retried inside itself (dispatch/conflicts.py)
    conflicts_retried: int = 0

    @property
    def execution(self) -> Execution | None:
        return self.result if isinstance(self.result, Execution) else None

    @property
    def family(self) -> str:
        """`ok`, `unreachable`, `refused`, or `unexpected` (an exception outside DESIGN §5: a bug)."""
        if self.error is None:
            return "ok"
        if isinstance(self.error, UnreachableError):
            return "unreachable"
        if isinstance(self.error, RefusedError):
            return "refused"
        return "unexpected"

    @property
    def label(self) -> str:
        return "ok" if self.error is None else type(self.error).__name__

    def describe(self) -> str:
        told = repr(self.result)[:240] if self.error is None else f"{self.label}: {str(self.error)[:160]}"
        return f"{self.caller}({self.kind}) {self.operation} {self.target} -> {told}"


@dataclass
class Caller:
    name: str
    kind: str
    adapter: DispatchAdapter | AsyncDispatchAdapter
    loop: LoopThread | None
    #: every conflict the adapter retried (its `on_conflict`); a caller runs one operation at a time
    retried: list[ConflictRetry] = field(default_factory=list)

    def _invoke(self, operation: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
        method = getattr(self.adapter, operation)
        if isinstance(self.adapter, DispatchAdapter):
            return method(*args, **kwargs)
        assert self.loop is not None
        return self.loop.run(method(*args, **kwargs))

    def invoke(self, rlab: ReliabilityLab, operation: str, *args: Any, target: str = "", **kwargs: Any) -> Outcome:
        """Run one adapter operation in this thread; never raises (the outcome carries the error)."""
        outcome = Outcome(self.name, self.kind, operation, target or (str(args[0]) if args else ""))
        outcome.start = rlab.journal.serial()
        retried = len(self.retried)
        try:
            outcome.result = self._invoke(operation, args, kwargs)
        except DispatchError as error:
            outcome.error = error
        except Exception as error:  # anything else is a finding, kept for the report
            outcome.error = error
        outcome.end = rlab.journal.serial()
        outcome.conflicts_retried = len(self.retried) - retried
        return outcome


PlannedCall = tuple[Caller, str, tuple[Any, ...], Mapping[str, Any]]


class Callers:
    """Caller identities `caller-0` ... with their adapters, built from `kinds` ("sync"/"async" per caller).

    `options` per caller name (e.g. `read_only`, `page_size`, `pod_read`, `request_timeout`) go to the adapter.
    """

    def __init__(
        self,
        rlab: ReliabilityLab,
        kinds: Sequence[str],
        options: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        self.rlab = rlab
        self.loop = LoopThread()
        self.callers: list[Caller] = []
        clock = rlab.lab.clock.now_datetime
        for index, kind in enumerate(kinds):
            name = f"caller-{index}"
            extra = dict((options or {}).get(name, {}))
            extra.setdefault("clock", clock)
            retried: list[ConflictRetry] = []
            extra.setdefault("on_conflict", retried.append)
            path = rlab.kubeconfig(name)
            adapter: DispatchAdapter | AsyncDispatchAdapter
            if kind == "sync":
                adapter = DispatchAdapter.from_kubeconfig(path, **extra)
            else:
                adapter = self.loop.run(AsyncDispatchAdapter.from_kubeconfig(path, **extra))
            self.callers.append(Caller(name, kind, adapter, self.loop, retried))
        self._pool = ThreadPoolExecutor(max_workers=max(len(self.callers), 1), thread_name_prefix="caller")

    def __getitem__(self, index: int) -> Caller:
        return self.callers[index]

    def __len__(self) -> int:
        return len(self.callers)

    def at_once(
        self,
        calls: Sequence[PlannedCall],
        on_done: Callable[[str], None] = lambda caller: None,
    ) -> list[Outcome]:
        """Run every (caller, operation, args, kwargs) in its own thread, released together by a barrier;
        `on_done(caller name)` is called as each one returns."""
        if len(calls) == 1:
            caller, operation, args, kwargs = calls[0]
            outcome = caller.invoke(self.rlab, operation, *args, **kwargs)
            on_done(caller.name)
            return [outcome]
        barrier = threading.Barrier(len(calls))

        def start(call: PlannedCall) -> Outcome:
            caller, operation, args, kwargs = call
            barrier.wait(30)
            try:
                return caller.invoke(self.rlab, operation, *args, **kwargs)
            finally:
                on_done(caller.name)

        return list(self._pool.map(start, calls))

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        for caller in self.callers:
            if isinstance(caller.adapter, DispatchAdapter):
                caller.adapter.close()
            else:
                self.loop.run(caller.adapter.close())
        self.loop.close()

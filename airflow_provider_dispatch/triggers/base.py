"""What dispatch's triggers have in common: kwargs, serialization, the shared connection, retries, error events.

A dispatch trigger waits for a condition on one TrainJob (`namespace`, `name`) and yields exactly one event. The
contract with the worker (the deferring operator or sensor):

* kwargs are JSON-only (strings, numbers, booleans, None, lists, dicts), so they survive `airflow.sdk.serde`,
  the Fernet-encrypted `Trigger.encrypted_kwargs` column, and a triggerer restart, which re-creates the trigger
  from them and starts `run()` over: nothing else survives (research airflow.md §3);
* `serialize()` omits every kwarg still at its default (the cncf convention: an older triggerer does not reject
  a kwarg it does not know yet), and the class path is the module's public one;
* the connection travels as `DispatchHook.trigger_connection_kwargs()` (conn id and the extras resolved on the
  worker), so the triggerer needs neither the connection nor the database;
* the event payload is a dict with `status`: the subclass's outcomes, `timeout` when `deadline` (epoch seconds)
  passed first, or `error` (`hooks.errors.error_event`: `error_class`, `retryable`, `message`, `ref`), which the
  worker maps with the one mapping (`hooks.errors.exception_for_event`). `run()` never raises for a failure,
  because an exception would reach the worker only as "Trigger failure";
* the trigger is read-only (a read-only adapter: it cannot write even by mistake), so two copies running at
  once (triggerer HA, a network partition: anchors §4.2) cannot interfere, and both give the same answer;
* `quiet_until` (epoch seconds, the deferral plus the deferring task's quiet period): until then a `progress`
  event is held back, only logged, and sent when the period is over if the change still stands; events that end
  the wait (an outcome, drained, ceased, running, timeout, error) are sent at once. Airflow 3.3's scheduler may
  fail a task whose trigger fires within seconds of its deferral, when the executor's report of the deferring
  run arrives after the resumed run started (apache/airflow#72716); progress changes no decision, so it never
  wakes the task inside that window;
* an `UnreachableError` (API server down, 5xx, 429, timeout) is retried with backoff and jitter for up to
  `unreachable_timeout` seconds in a row before it becomes the error event: a blip of the API server must not
  fail every waiting task at once;
* nothing blocks the event loop: all I/O is awaited on the shared client, kubeconfig files are read in a thread.

`cleanup()` needs nothing: the shared connection is released by `async with` when `run()` ends or is cancelled
(a triggerer shutting down cancels it, then calls `cleanup()`). There is no external work to cancel, so no
`on_kill()`.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import AsyncIterator, Callable
from typing import Any, ClassVar, Final, TypeVar

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_provider_dispatch.backoff import Backoff, BackoffSchedule, jittered
from airflow_provider_dispatch.dispatch.errors import DispatchError, UnreachableError
from airflow_provider_dispatch.dispatch.programs import Program
from airflow_provider_dispatch.dispatch.validation import parse_ref
from airflow_provider_dispatch.hooks.dispatch import DEFAULT_CONN_ID
from airflow_provider_dispatch.hooks.errors import error_event
from airflow_provider_dispatch.triggers.hub import SharedConnection, current_hub

_T = TypeVar("_T")

#: seconds between the safety-net re-checks (a consistent read even when no watch event came)
DEFAULT_RECHECK_INTERVAL: Final = 300.0
#: seconds of consecutive "API server unreachable" before the trigger gives up with an error event
DEFAULT_UNREACHABLE_TIMEOUT: Final = 120.0
#: the pauses between consistent re-checks the API server did not answer
UNREACHABLE_BACKOFF: Final = BackoffSchedule(initial=0.5, maximum=30.0)


class DispatchTrigger(BaseTrigger):
    """Base of dispatch's triggers; subclasses implement `wait(shared)` and `own_kwargs()`.

    :param namespace: the TrainJob's namespace.
    :param name: the TrainJob's name.
    :param deadline: epoch seconds after which the trigger yields `{"status": "timeout", ...}`; None: no limit.
    :param quiet_until: epoch seconds before which a `progress` event is held back (None: none is).
    :param recheck_interval: seconds between safety-net consistent re-checks (jittered by 10%).
    :param unreachable_timeout: seconds of consecutive unreachable API before the error event.
    :param kubernetes_conn_id, connection_extras, cluster_context, config_file, in_cluster: the connection, as
        `DispatchHook.trigger_connection_kwargs()` gives it.
    """

    #: the event statuses a subclass yields besides `timeout` and `error`
    outcomes: ClassVar[tuple[str, ...]] = ()

    def __init__(
        self,
        namespace: str,
        name: str,
        *,
        deadline: float | None = None,
        quiet_until: float | None = None,
        recheck_interval: float = DEFAULT_RECHECK_INTERVAL,
        unreachable_timeout: float = DEFAULT_UNREACHABLE_TIMEOUT,
        kubernetes_conn_id: str | None = DEFAULT_CONN_ID,
        connection_extras: dict[str, Any] | None = None,
        cluster_context: str | None = None,
        config_file: str | None = None,
        in_cluster: bool | None = None,
    ) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        if recheck_interval <= 0 or unreachable_timeout < 0:
            raise ValueError("recheck_interval must be > 0 and unreachable_timeout >= 0")
        self.namespace = namespace
        self.name = name
        self.deadline = deadline
        self.quiet_until = quiet_until
        self.recheck_interval = float(recheck_interval)
        self.unreachable_timeout = float(unreachable_timeout)
        self.kubernetes_conn_id = kubernetes_conn_id
        self.connection_extras = connection_extras
        self.cluster_context = cluster_context
        self.config_file = config_file
        self.in_cluster = in_cluster

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"

    # --- serialization -------------------------------------------------------------------------------------

    def connection_kwargs(self) -> dict[str, Any]:
        return {
            "kubernetes_conn_id": self.kubernetes_conn_id,
            "connection_extras": self.connection_extras,
            "cluster_context": self.cluster_context,
            "config_file": self.config_file,
            "in_cluster": self.in_cluster,
        }

    def own_kwargs(self) -> dict[str, Any]:
        """The subclass's kwargs (all of them; `serialize` drops the defaulted ones)."""
        return {}

    def all_kwargs(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "name": self.name,
            **self.own_kwargs(),
            "deadline": self.deadline,
            "quiet_until": self.quiet_until,
            "recheck_interval": self.recheck_interval,
            "unreachable_timeout": self.unreachable_timeout,
            **self.connection_kwargs(),
        }

    @classmethod
    def kwarg_defaults(cls) -> dict[str, Any]:
        """Every keyword's default, from the `__init__` signatures along the class hierarchy."""
        defaults: dict[str, Any] = {}
        for klass in reversed(cls.__mro__):
            init = klass.__dict__.get("__init__")
            if init is None or not issubclass(klass, DispatchTrigger):
                continue
            for parameter in inspect.signature(init).parameters.values():
                if parameter.default is not inspect.Parameter.empty:
                    defaults[parameter.name] = parameter.default
        return defaults

    def serialize(self) -> tuple[str, dict[str, Any]]:
        defaults = self.kwarg_defaults()
        kwargs = {
            key: value
            for key, value in self.all_kwargs().items()
            if key not in defaults or value != defaults[key] or type(value) is not type(defaults[key])
        }
        return f"{type(self).__module__}.{type(self).__qualname__}", kwargs

    # --- running -------------------------------------------------------------------------------------------

    async def run(self) -> AsyncIterator[TriggerEvent]:
        payload = await self.outcome()
        self.log.info("dispatch: %s for TrainJob %s", payload.get("status"), self.ref)
        yield TriggerEvent(payload)  # type: ignore[no-untyped-call]

    async def outcome(self) -> dict[str, Any]:
        """The one event's payload; every failure becomes an error payload (cancellation propagates)."""
        try:
            parse_ref(self.ref)  # refused before any name reaches a URL (a watch path is built from it)
            async with current_hub().connection(self.connection_kwargs()) as shared:
                return await self.wait(shared)
        except DispatchError as error:
            self.log.warning("dispatch: TrainJob %s: %s", self.ref, error)
            return error_event(error, ref=self.ref)
        except Exception as error:
            self.log.exception("dispatch: the trigger for TrainJob %s failed unexpectedly", self.ref)
            return error_event(error, ref=self.ref)

    async def wait(self, shared: SharedConnection) -> dict[str, Any]:
        """Wait for the subclass's condition; return the event payload."""
        raise NotImplementedError

    # --- helpers for `wait` ---------------------------------------------------------------------------------

    def remaining_time(self) -> float:
        """Seconds until `deadline` (infinite without one)."""
        return float("inf") if self.deadline is None else self.deadline - time.time()

    def quiet_left(self) -> float:
        """Seconds until a `progress` event may be sent (0 once the quiet period after the deferral is over)."""
        return 0.0 if self.quiet_until is None else max(0.0, self.quiet_until - time.time())

    def next_wait(self) -> float:
        """How long to wait for a change before the next safety-net re-check (never past the deadline)."""
        return max(0.0, min(jittered(self.recheck_interval), self.remaining_time()))

    async def checked(self, shared: SharedConnection, make_program: Callable[[], Program[_T]]) -> _T:
        """Run a read-only program; retry UnreachableError with backoff for up to `unreachable_timeout`."""
        backoff = Backoff(UNREACHABLE_BACKOFF)
        first_failure: float | None = None
        while True:
            try:
                return await shared.run(make_program())
            except UnreachableError as error:
                now = time.monotonic()
                first_failure = now if first_failure is None else first_failure
                delay = backoff.next_delay()
                if now - first_failure + delay > self.unreachable_timeout or delay > self.remaining_time():
                    raise
                self.log.warning("dispatch: %s; checking again in %.1fs", error, delay)
                await asyncio.sleep(delay)


__all__ = ["DEFAULT_RECHECK_INTERVAL", "DEFAULT_UNREACHABLE_TIMEOUT", "DispatchTrigger"]

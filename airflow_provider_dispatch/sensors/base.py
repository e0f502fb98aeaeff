"""What dispatch's sensors have in common: the hook, the wait reason, poke/reschedule/deferrable, the deadline.

The wait reason is visible in the Airflow 3 UI in three places (research airflow.md §4, the only ones that
work while a task waits; shown by `wait_reason.ShowsWaitReason`, which the restart operator shares):

* the task log: the full reason each time it changes, and one short line on every other poke;
* the rendered field `wait_reason` (`template_fields`, `overwrite_rtif_after_execution = True`): the worker
  sends rendered fields again after every run, including a run that deferred or was rescheduled;
* the XCom `wait_reason`, pushed on every poke and before every deferral (visible while deferred).

In deferrable mode the sensor checks once on the worker (the fast path), then defers to its trigger with a
deadline of the task's first start plus `timeout`: each re-deferral after a `progress` event keeps the original
deadline, so the sensor's `timeout` bounds the whole wait as in poke and reschedule mode (a deferral's own
timeout would restart with each deferral). The trigger yields `timeout` at the deadline with its last check, so
the timeout message can name what still blocks; the deferral's own timeout is a backstop a margin later.

`soft_fail` and `never_fail` keep Airflow's meaning in every mode: the fast path handles exceptions exactly as
`BaseSensorOperator.execute` does, and after a deferral `BaseSensorOperator.resume_execution` applies them.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from functools import cached_property
from typing import Any, Final, NoReturn

from airflow.providers.common.compat.sdk import (
    AirflowFailException,
    AirflowSensorTimeout,
    AirflowSkipException,
    AirflowTaskTimeout,
    conf,
)
from airflow.sdk import BaseSensorOperator, Context, PokeReturnValue
from airflow.triggers.base import BaseTrigger

from airflow_provider_dispatch.dispatch.sync_adapter import DispatchAdapter
from airflow_provider_dispatch.dispatch.validation import parse_ref
from airflow_provider_dispatch.hooks.dispatch import DEFAULT_CONN_ID, DispatchHook
from airflow_provider_dispatch.hooks.errors import airflow_errors
from airflow_provider_dispatch.triggers.base import DEFAULT_RECHECK_INTERVAL
from airflow_provider_dispatch.wait_reason import ShowsWaitReason

#: how long after the sensor's deadline the deferral itself times out (the trigger answers at the deadline)
DEFERRAL_MARGIN: Final = timedelta(minutes=5)
#: the prefix of the message BaseSensorOperator.execute raises on timeout
_BASE_TIMEOUT_PREFIX: Final = "Sensor has timed out"


class DispatchSensor(ShowsWaitReason, BaseSensorOperator):
    """Base of dispatch's sensors. Subclasses implement `poke`, `make_trigger`, `execute_complete` and
    `timeout_detail`.

    :param namespace: the TrainJob's namespace (templated).
    :param name: the TrainJob's name (templated).
    :param kubernetes_conn_id: a cncf-kubernetes `kubernetes` connection; `cluster_context`, `config_file` and
        `in_cluster` override its extras (see `DispatchHook`).
    :param deferrable: wait in the triggerer (default `[operators] default_deferrable`); overrides `mode`.
    :param recheck_interval: the trigger's safety-net re-check interval, seconds.

    Other parameters are `BaseSensorOperator`'s: `poke_interval`, `timeout`, `mode` (poke | reschedule),
    `soft_fail`, `never_fail`, `silent_fail`, `exponential_backoff`, `max_wait`, ...
    """

    #: the wait reason first: the Rendered Templates tab lists the fields in this order
    template_fields: Sequence[str] = ("wait_reason", "namespace", "name")
    overwrite_rtif_after_execution: bool = True
    ui_color = "#e4f0e8"

    def __init__(
        self,
        *,
        namespace: str,
        name: str,
        kubernetes_conn_id: str | None = DEFAULT_CONN_ID,
        cluster_context: str | None = None,
        config_file: str | None = None,
        in_cluster: bool | None = None,
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        recheck_interval: float = DEFAULT_RECHECK_INTERVAL,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.namespace = namespace
        self.name = name
        self.kubernetes_conn_id = kubernetes_conn_id
        self.cluster_context = cluster_context
        self.config_file = config_file
        self.in_cluster = in_cluster
        self.deferrable = deferrable
        self.recheck_interval = recheck_interval
        #: why the sensor is (or is no longer) waiting; a rendered field, refreshed after each run
        self.wait_reason = ""
        self._shown_reason: str | None = None

    # --- the cluster ---------------------------------------------------------------------------------------

    @property
    def ref(self) -> str:
        """`namespace/name`, validated (an invalid name is a refusal: AirflowFailException)."""
        with airflow_errors():
            return str(parse_ref(f"{self.namespace}/{self.name}"))

    @cached_property
    def hook(self) -> DispatchHook:
        return DispatchHook(
            self.kubernetes_conn_id,
            cluster_context=self.cluster_context,
            config_file=self.config_file,
            in_cluster=self.in_cluster,
        )

    def adapter(self) -> DispatchAdapter:
        """The read-only adapter: a sensor never writes."""
        return self.hook.get_adapter(read_only=True)

    # --- modes ---------------------------------------------------------------------------------------------

    def check_inputs(self) -> None:
        """Validate the parameters as rendered, before the connection is used or anything is read: a template that
        rendered `None` or nothing is a refusal (AirflowFailException, even with `soft_fail`: a typo in a DAG is
        not a skip). Subclasses add their own parameters."""
        self.ref  # noqa: B018 (the property validates)

    def execute(self, context: Context) -> Any:
        self.check_inputs()
        if self.deferrable:
            done = self._fast_path(context)
            if done:
                return done.xcom_value if isinstance(done, PokeReturnValue) else None
            self.defer_wait(context)
        try:
            return super().execute(context)
        except AirflowSensorTimeout as error:
            raise AirflowSensorTimeout(self.timeout_message(str(error))) from error
        except AirflowSkipException as error:
            if error.__cause__ is None and str(error).startswith(_BASE_TIMEOUT_PREFIX):
                self.log.warning("%s", self.timeout_message(str(error)))
            raise

    def _fast_path(self, context: Context) -> bool | PokeReturnValue:
        """One poke before deferring, with the exception handling of `BaseSensorOperator.execute`."""
        try:
            return self.poke(context)
        except (AirflowSensorTimeout, AirflowTaskTimeout, AirflowFailException) as error:
            if self.soft_fail:
                raise AirflowSkipException("Skipping due to soft_fail is set to True.") from error
            if self.never_fail:
                raise AirflowSkipException("Skipping due to never_fail is set to True.") from error
            raise
        except AirflowSkipException:
            raise
        except Exception as error:
            if self.silent_fail:
                self.log.exception("Sensor poke failed; deferring anyway")
                return False
            if self.never_fail:
                raise AirflowSkipException("Skipping due to never_fail is set to True.") from error
            raise

    def deadline(self, context: Context) -> float:
        """Epoch seconds at which the wait times out: the task's first start plus `timeout`."""
        start = getattr(context["ti"], "start_date", None)
        started = start.timestamp() if isinstance(start, datetime) else time.time()
        return started + float(self.timeout)

    def defer_wait(self, context: Context, **trigger_kwargs: Any) -> NoReturn:
        """Defer to the sensor's trigger until the deadline (the wait reason was pushed by the last poke)."""
        deadline = self.deadline(context)
        trigger = self.make_trigger(
            deadline=deadline,
            recheck_interval=self.recheck_interval,
            **self.hook.trigger_connection_kwargs(),
            **trigger_kwargs,
        )
        remaining = timedelta(seconds=max(0.0, deadline - time.time())) + DEFERRAL_MARGIN
        self.defer(trigger=trigger, method_name="execute_complete", timeout=remaining)
        raise AssertionError("defer() returns only by raising TaskDeferred")  # pragma: no cover

    def timeout_message(self, base: str) -> str:
        return f"{base.rstrip('.')}. {self.timeout_detail()}"

    # --- for subclasses ------------------------------------------------------------------------------------

    def make_trigger(self, **kwargs: Any) -> BaseTrigger:
        raise NotImplementedError

    def timeout_detail(self) -> str:
        """What the timeout message adds: what was not proven, and what would unblock the wait."""
        raise NotImplementedError

    def execute_complete(self, context: Context, event: Mapping[str, Any] | None = None) -> Any:
        raise NotImplementedError


__all__ = ["DEFERRAL_MARGIN", "DispatchSensor"]

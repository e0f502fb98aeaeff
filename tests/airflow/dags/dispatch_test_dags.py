"""Test-only DAGs for tests/airflow: one small DAG per behaviour, the TrainJob chosen by the run's conf.

Every DAG takes `namespace` and `name` from `dag_run.conf` (the operators' templated fields), so one DAG serves
every test namespace; what cannot be templated (mode, timeouts, retries) differs between DAGs. Timeouts and
intervals are short because the tests drive the cluster themselves; real DAGs keep the defaults.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any, NoReturn, TypedDict

from airflow.providers.common.compat.sdk import TaskDeferred
from airflow.sdk import DAG, Context
from airflow.sdk.serde import serialize

from airflow_provider_dispatch.operators.restarts import TrainJobRestartOperator
from airflow_provider_dispatch.operators.trainjob import (
    TrainJobHoldOperator,
    TrainJobOpenOperator,
    TrainJobReleaseOperator,
)
from airflow_provider_dispatch.sensors.pods_drained import PodsDrainedSensor
from airflow_provider_dispatch.sensors.trainjob_outcome import TrainJobOutcomeSensor

START = datetime(2026, 1, 1)
#: the trigger's safety-net re-check, far away: a test that passes shows the watch did the waking
NO_PERIODIC_RECHECK = 3600.0


class Target(TypedDict):
    """The templated fields that name the TrainJob: from the run's conf."""

    namespace: str
    name: str


class Deferred(TypedDict):
    """Deferred to the triggerer, whose periodic re-check is out of reach: only the watch can wake the task."""

    deferrable: bool
    recheck_interval: float


CONF_TRAINJOB = Target(namespace="{{ dag_run.conf['namespace'] }}", name="{{ dag_run.conf['name'] }}")
WATCH_ONLY = Deferred(deferrable=True, recheck_interval=NO_PERIODIC_RECHECK)


def _dag(dag_id: str, **kwargs: object) -> DAG:
    return DAG(dag_id, schedule=None, start_date=START, catchup=False, tags=["dispatch-tests"], **kwargs)


with _dag("dispatch_hold") as dispatch_hold:
    TrainJobHoldOperator(task_id="hold", **CONF_TRAINJOB)

# Issue 17 item 5: a connection that does not exist is refused (retries unused); None asks for the ambient one
with _dag("dispatch_hold_missing_connection") as dispatch_hold_missing_connection:
    TrainJobHoldOperator(task_id="hold", **CONF_TRAINJOB, kubernetes_conn_id="does_not_exist", retries=2)

# each run once per session: dag.test prints a task's log only on the first run of its DAG in a process
with _dag("dispatch_hold_logged") as dispatch_hold_logged:
    TrainJobHoldOperator(task_id="hold", **CONF_TRAINJOB)

with _dag("dispatch_hold_default_connection") as dispatch_hold_default_connection:
    TrainJobHoldOperator(task_id="hold", **CONF_TRAINJOB)

with _dag("dispatch_hold_ambient") as dispatch_hold_ambient:
    TrainJobHoldOperator(task_id="hold", **CONF_TRAINJOB, kubernetes_conn_id=None)

with _dag("dispatch_release_retry") as dispatch_release_retry:
    TrainJobReleaseOperator(
        task_id="release", **CONF_TRAINJOB, on_pods_remaining="retry", retries=2, retry_delay=timedelta(0)
    )

with _dag("dispatch_release_conflicts") as dispatch_release_conflicts:
    TrainJobReleaseOperator(
        task_id="release", **CONF_TRAINJOB, conflict_attempts=2, retries=1, retry_delay=timedelta(0)
    )

with _dag("dispatch_release_wait_deferrable") as dispatch_release_wait_deferrable:
    TrainJobReleaseOperator(
        task_id="release", **CONF_TRAINJOB, on_pods_remaining="wait", wait_timeout=120, **WATCH_ONLY
    )

with _dag("dispatch_release_wait_deferrable_rechecking") as dispatch_release_wait_deferrable_rechecking:
    # a wait only time ends (a deleted Node becomes proof grace + 60 s + the skew bound after it was first seen):
    # no watch event marks it, so the trigger's periodic re-check must (1 s of wall time, 100 s of lab time)
    TrainJobReleaseOperator(
        task_id="release",
        **CONF_TRAINJOB,
        on_pods_remaining="wait",
        wait_timeout=120,
        deferrable=True,
        recheck_interval=1.0,
    )

with _dag("dispatch_release_wait_polling") as dispatch_release_wait_polling:
    TrainJobReleaseOperator(
        task_id="release",
        **CONF_TRAINJOB,
        on_pods_remaining="wait",
        deferrable=False,
        poke_interval=0.2,
        wait_timeout=120,
    )

with _dag("dispatch_open", render_template_as_native_obj=True) as dispatch_open:
    TrainJobOpenOperator(
        task_id="open",
        manifest="{{ dag_run.conf['manifest'] }}",
        on_pods_remaining="wait",
        observe_timeout=60,
        **WATCH_ONLY,
    )

with _dag("dispatch_drained_poke_timeout") as dispatch_drained_poke_timeout:
    PodsDrainedSensor(task_id="drained", **CONF_TRAINJOB, mode="poke", poke_interval=0.2, timeout=1.5)

with _dag("dispatch_drained_soft_fail") as dispatch_drained_soft_fail:
    PodsDrainedSensor(task_id="drained", **CONF_TRAINJOB, mode="poke", poke_interval=0.2, timeout=0.5, soft_fail=True)

with _dag("dispatch_drained_poke") as dispatch_drained_poke:
    PodsDrainedSensor(task_id="drained", **CONF_TRAINJOB, mode="poke", poke_interval=0.2, timeout=120)

with _dag("dispatch_drained_reschedule") as dispatch_drained_reschedule:
    PodsDrainedSensor(task_id="drained", **CONF_TRAINJOB, mode="reschedule", poke_interval=0.5, timeout=120)

with _dag("dispatch_drained_deferrable") as dispatch_drained_deferrable:
    PodsDrainedSensor(task_id="drained", **CONF_TRAINJOB, timeout=120, **WATCH_ONLY)


class MeasuredPodsDrainedSensor(PodsDrainedSensor):
    """`PodsDrainedSensor`, unchanged, that also notes in XComs the size of what each deferral stores: the kwargs
    of its trigger as the worker sends them (`airflow.sdk.serde`, then JSON: `trigger_kwargs_sizes`) and every
    event it resumes with (`event_sizes`)."""

    def defer_wait(self, context: Context, **trigger_kwargs: Any) -> NoReturn:
        try:
            super().defer_wait(context, **trigger_kwargs)
        except TaskDeferred as deferral:
            _, kwargs = deferral.trigger.serialize()
            self._note(context, "trigger_kwargs_sizes", len(json.dumps(serialize(kwargs))))
            raise

    def execute_complete(self, context: Context, event: Mapping[str, Any] | None = None) -> Any:
        self._note(context, "event_sizes", len(json.dumps(event or {})))
        return super().execute_complete(context, event)

    @staticmethod
    def _note(context: Context, key: str, size: int) -> None:
        ti = context["ti"]
        sizes = ti.xcom_pull(task_ids=ti.task_id, key=key) or []
        ti.xcom_push(key=key, value=[*sizes, size])


with _dag("dispatch_drained_deferrable_measured") as dispatch_drained_deferrable_measured:
    MeasuredPodsDrainedSensor(task_id="drained", **CONF_TRAINJOB, timeout=300, **WATCH_ONLY)

with _dag("dispatch_outcome_deferrable") as dispatch_outcome_deferrable:
    TrainJobOutcomeSensor(task_id="outcome", **CONF_TRAINJOB, timeout=120, **WATCH_ONLY)

with _dag("dispatch_outcome_pinned_deferrable") as dispatch_outcome_pinned_deferrable:
    TrainJobOutcomeSensor(
        task_id="outcome", **CONF_TRAINJOB, admission="{{ dag_run.conf['admission'] }}", timeout=120, **WATCH_ONLY
    )

# Issue 17 item 4: templates that pull an XCom of a task that does not exist render None ("None" as text);
# each must be refused once rendered, on its first try (retries=2 unused), before anything is read or written.
TYPO = "{{ ti.xcom_pull(task_ids='typo') }}"

with _dag("dispatch_outcome_pin_typo") as dispatch_outcome_pin_typo:
    TrainJobOutcomeSensor(task_id="outcome", **CONF_TRAINJOB, admission=TYPO, retries=2, timeout=120, **WATCH_ONLY)

with _dag("dispatch_outcome_pin_typo_native", render_template_as_native_obj=True) as dispatch_outcome_pin_typo_native:
    TrainJobOutcomeSensor(task_id="outcome", **CONF_TRAINJOB, admission=TYPO, retries=2, timeout=120, **WATCH_ONLY)

with _dag("dispatch_release_name_typo") as dispatch_release_name_typo:
    TrainJobReleaseOperator(
        task_id="release", namespace="{{ dag_run.conf['namespace'] }}", name=TYPO, retries=2, **WATCH_ONLY
    )

with _dag("dispatch_hold_namespace_typo", render_template_as_native_obj=True) as dispatch_hold_namespace_typo:
    TrainJobHoldOperator(task_id="hold", namespace=TYPO, name="{{ dag_run.conf['name'] }}", retries=2)

with _dag("dispatch_open_manifest_typo", render_template_as_native_obj=True) as dispatch_open_manifest_typo:
    TrainJobOpenOperator(task_id="open", manifest=TYPO, retries=2)

# The restart operator on a manifest the test builds (a Kueue queue label, a runtime of its own): conf `manifest`
# (a dict, rendered natively) and `max_restarts`
with _dag("dispatch_restart", render_template_as_native_obj=True) as dispatch_restart:
    TrainJobRestartOperator(
        task_id="train",
        manifest="{{ dag_run.conf['manifest'] }}",
        max_restarts="{{ dag_run.conf['max_restarts'] }}",
        training_timeout=600,
        wait_timeout=300,
        retries=0,
        # dag.test() has no executor, so no stale executor event to wait out: progress is shown at once
        quiet_period=0,
    )

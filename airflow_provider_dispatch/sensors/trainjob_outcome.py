"""`TrainJobOutcomeSensor`: succeed when a TrainJob finished (condition `Complete` or `Failed` True).

A Failed TrainJob is a success of this sensor: the sensor reports the outcome, and the DAG decides (branch on
the XCom's `outcome`, hold, wait for the pods, release again: a chained restart). With `admission`, only the
outcome of that execution counts (`hooks.checks.outcome_decision`), so a chained restart that waits for the
new execution's outcome does not read the previous one's: pass the release's XCom, e.g.
`admission="{{ ti.xcom_pull(task_ids='release')['admission'] }}"` (rendered text is turned into an integer).

XCom (the return value)::

    {"outcome": "Complete" | "Failed", "reason": ..., "message": ..., "ref": "ns/name",
     "execution": {"job_id": ..., "submission": ..., "admission": A}, "admission": A, "resource_version": ...}
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from airflow.sdk import Context, PokeReturnValue
from airflow.sdk.exceptions import AirflowException, AirflowFailException, AirflowSensorTimeout

from airflow_provider_dispatch.dispatch.assessment import Execution
from airflow_provider_dispatch.hooks.checks import OutcomeCheck, outcome_check, outcome_decision, superseded_error
from airflow_provider_dispatch.hooks.errors import airflow_errors, airflow_exception, exception_for_event
from airflow_provider_dispatch.sensors.base import DispatchSensor
from airflow_provider_dispatch.triggers.trainjob_outcome import TrainJobOutcomeTrigger


def outcome_wait_reason(check: OutcomeCheck, admission: int | None) -> tuple[bool, str, str]:
    """Whether the wait for the outcome (of execution `admission`, or of whatever runs) is over, its wait reason,
    and the short line logged while the reason does not change; a superseded execution is a refusal (raised).
    The sensor and the restart operator (`operators.restarts`) both show this."""
    decision = outcome_decision(check, admission)
    if decision == "superseded" and admission is not None:
        raise airflow_exception(superseded_error(check, admission))
    if decision == "finished":
        reason = f"TrainJob {check.ref} execution {check.execution.admission} finished: {check.outcome}"
        if check.reason:
            reason += f" ({check.reason})"
        return True, reason, reason
    awaited = f"execution {admission}" if admission is not None else "its current execution"
    reason = (
        f"waiting for TrainJob {check.ref} to finish {awaited}: it runs execution "
        f"{check.execution.admission} and has neither Complete nor Failed"
    )
    return False, reason, f"still waiting for TrainJob {check.ref} to finish {awaited}"


class TrainJobOutcomeSensor(DispatchSensor):
    """Wait until TrainJob `namespace/name` has `Complete` or `Failed` (for execution `admission`, if given).

    :param admission: the admission number A whose outcome is awaited (templated; an int or its text). None:
        the outcome of whatever execution the TrainJob runs.

    Other parameters: `DispatchSensor` and `BaseSensorOperator`.
    """

    template_fields: Sequence[str] = ("namespace", "name", "admission", "wait_reason")

    def __init__(self, *, namespace: str, name: str, admission: int | str | None = None, **kwargs: Any) -> None:
        super().__init__(namespace=namespace, name=name, **kwargs)
        self.admission = admission
        self._last_check: OutcomeCheck | None = None

    def awaited_admission(self) -> int | None:
        """`admission` as rendered, as an integer; anything else is a refusal (the DAG is wrong)."""
        value = self.admission
        if value is None or (isinstance(value, str) and value.strip() in ("", "None")):
            return None
        try:
            number = int(value)
        except (TypeError, ValueError):
            number = 0
        if isinstance(value, bool) or number < 1:
            raise AirflowFailException(f"admission must be a positive integer (an admission number), not {value!r}")
        return number

    def poke(self, context: Context) -> PokeReturnValue:
        admission = self.awaited_admission()
        with airflow_errors():
            check = self.adapter().run(outcome_check(self.ref))
        return self.evaluate(context, check, admission)

    def evaluate(self, context: Context, check: OutcomeCheck, admission: int | None) -> PokeReturnValue:
        self._last_check = check
        finished, reason, short = outcome_wait_reason(check, admission)
        self.show_wait_reason(context, reason, short)
        return PokeReturnValue(is_done=finished, xcom_value=check.as_dict() if finished else None)

    def make_trigger(self, **kwargs: Any) -> TrainJobOutcomeTrigger:
        return TrainJobOutcomeTrigger(self.namespace, self.name, admission=self.awaited_admission(), **kwargs)

    def execute_complete(self, context: Context, event: Mapping[str, Any] | None = None) -> Any:
        event = event or {}
        status = event.get("status")
        if status == "error":
            raise exception_for_event(event)
        if status not in ("finished", "timeout"):
            raise AirflowException(f"TrainJobOutcomeTrigger sent an event this sensor does not know: {status!r}")
        check = outcome_from_event(event)
        result = self.evaluate(context, check, self.awaited_admission())
        if result.is_done:
            return result.xcom_value
        raise AirflowSensorTimeout(self.timeout_message(f"Sensor has timed out after {self.timeout:.0f}s"))

    def timeout_detail(self) -> str:
        if self._last_check is None:
            return f"TrainJob {self.ref} was never read successfully, so its outcome is unknown."
        return (
            f"TrainJob {self.ref} runs execution {self._last_check.execution.admission} and had not finished "
            "(neither Complete nor Failed)."
        )


def outcome_from_event(event: Mapping[str, Any]) -> OutcomeCheck:
    """The check a `finished`/`timeout` event carries (`OutcomeCheck.as_dict()`), back as the dataclass."""
    execution = event.get("execution") or {}
    return OutcomeCheck(
        ref=str(event.get("ref")),
        execution=Execution(
            str(execution.get("job_id")), str(execution.get("submission")), int(execution.get("admission", 0))
        ),
        outcome=event.get("outcome"),
        reason=str(event.get("reason") or ""),
        message=str(event.get("message") or ""),
        resource_version=event.get("resource_version"),
    )


__all__ = ["TrainJobOutcomeSensor", "outcome_from_event", "outcome_wait_reason"]

"""`TrainJobOutcomeSensor`: succeed when a TrainJob finished (condition `Complete` or `Failed` True).

A Failed TrainJob is a success of this sensor: the sensor reports the outcome, and the DAG decides (branch on
the XCom's `outcome`, hold, wait for the pods, release again: a chained restart). With `admission`, only the
outcome of that execution counts (`hooks.checks.outcome_decision`), so a chained restart that waits for the
new execution's outcome does not read the previous one's: pass the release's XCom, e.g.
`admission="{{ ti.xcom_pull(task_ids='release')['admission'] }}"` (rendered text is turned into an integer).
A pin is checked once rendered: if it renders to `None`, `"None"`, nothing or anything but a positive integer
(a typo in `task_ids` pulls nothing), the sensor refuses (AirflowFailException) before reading anything, never
falling back to whatever execution runs. Only `admission=None` in the DAG itself means "no pin".

While it waits, the wait reason says what keeps the TrainJob from finishing (`unfinished.explain_unfinished`,
the drain check's explanations and remedies): its first line is short and complete (the pods, their node and its
state, the one-line remedy; or the suspended TrainJob, the Workload not admitted or evicted, the Pending pods and
why), the details follow on their own lines. Deferred, the trigger reports `progress` whenever that changes, and
the sensor shows the new reason (log, rendered field, XCom `wait_reason`) before it defers again.

XCom (the return value)::

    {"outcome": "Complete" | "Failed", "reason": ..., "message": ..., "ref": "ns/name",
     "execution": {"job_id": ..., "submission": ..., "admission": A}, "admission": A, "resource_version": ...}
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from airflow.providers.common.compat.sdk import AirflowException, AirflowSensorTimeout
from airflow.sdk import Context, PokeReturnValue

from airflow_provider_dispatch.dispatch.assessment import Execution
from airflow_provider_dispatch.dispatch.reasons import WaitReason, compose, outcome_line
from airflow_provider_dispatch.dispatch.validation import rendered_integer
from airflow_provider_dispatch.hooks.checks import OutcomeCheck, outcome_check, outcome_decision, superseded_error
from airflow_provider_dispatch.hooks.errors import airflow_errors, airflow_exception, exception_for_event
from airflow_provider_dispatch.sensors.base import DispatchSensor
from airflow_provider_dispatch.triggers.trainjob_outcome import TrainJobOutcomeTrigger, waiting_fingerprint


def outcome_wait_reason(check: OutcomeCheck, admission: int | None) -> tuple[bool, WaitReason]:
    """Whether the wait for the outcome (of execution `admission`, or of whatever runs) is over, and its wait
    reason (`reasons.WaitReason`; its first line is what is logged while the reason does not change); a
    superseded execution is a refusal (raised). The sensor and the restart operator (`operators.restarts`) both
    show this.

    While it waits, the reason is composed as every wait reason (`dispatch.reasons`): what keeps the TrainJob
    from finishing and what to do about it, or that the training runs and nothing blocks it
    (`unfinished.Unfinished.first_line`), the lines that say how, then whose outcome is awaited, then the
    details. The explanation is within `hooks.checks.UNFINISHED_LIMIT`, so the reason is within
    `payloads.WAIT_REASON_LIMIT`."""
    decision = outcome_decision(check, admission)
    if decision == "superseded" and admission is not None:
        raise airflow_exception(superseded_error(check, admission))
    if decision == "finished":
        first = f"TrainJob {check.ref} execution {check.execution.admission} finished: {check.outcome}"
        if check.reason:
            first += f" ({check.reason})"
        return True, compose(first)
    waiting = check.waiting or {}
    about = outcome_line(check.ref, check.execution.admission, admission)
    detail = str(waiting.get("detail") or "")
    first = (
        str(waiting.get("headline") or "") or "Waiting for the TrainJob to finish: it has neither Complete nor Failed"
    )
    how = [str(line) for line in waiting.get("how") or ()]
    return False, compose(first, how, (about,), detail)


class TrainJobOutcomeSensor(DispatchSensor):
    """Wait until TrainJob `namespace/name` has `Complete` or `Failed` (for execution `admission`, if given).

    :param admission: the admission number A whose outcome is awaited (templated; an int or its text). None:
        the outcome of whatever execution the TrainJob runs.

    Other parameters: `DispatchSensor` and `BaseSensorOperator`.
    """

    template_fields: Sequence[str] = ("wait_reason", "namespace", "name", "admission")

    def __init__(self, *, namespace: str, name: str, admission: int | str | None = None, **kwargs: Any) -> None:
        super().__init__(namespace=namespace, name=name, **kwargs)
        self.admission = admission
        #: a pin was asked for (a number or a template): once rendered it must be an admission number
        self.admission_pinned = admission is not None
        self._last_check: OutcomeCheck | None = None

    def awaited_admission(self) -> int | None:
        """`admission` as rendered, as an integer; None only when no pin was asked for. Anything else, including
        a template that rendered None or nothing, is a refusal (the DAG is wrong)."""
        if not self.admission_pinned:
            return None
        with airflow_errors():
            return rendered_integer(
                self.admission, "admission (the awaited execution's admission number)", minimum=1, ref=self.ref
            )

    def check_inputs(self) -> None:
        super().check_inputs()
        self.awaited_admission()

    def poke(self, context: Context) -> PokeReturnValue:
        admission = self.awaited_admission()
        adapter = self.adapter()
        with airflow_errors():
            check = adapter.run(outcome_check(self.ref, adapter.operations))
        return self.evaluate(context, check, admission)

    def evaluate(self, context: Context, check: OutcomeCheck, admission: int | None) -> PokeReturnValue:
        self._last_check = check
        finished, reason = outcome_wait_reason(check, admission)
        self.show_wait_reason(context, reason)
        return PokeReturnValue(is_done=finished, xcom_value=check.as_dict() if finished else None)

    def make_trigger(self, **kwargs: Any) -> TrainJobOutcomeTrigger:
        known = waiting_fingerprint(self._last_check) if self._last_check is not None else None
        kwargs.setdefault("known_fingerprint", known)
        return TrainJobOutcomeTrigger(self.namespace, self.name, admission=self.awaited_admission(), **kwargs)

    def execute_complete(self, context: Context, event: Mapping[str, Any] | None = None) -> Any:
        event = event or {}
        status = event.get("status")
        if status == "error":
            raise exception_for_event(event)
        if status not in ("finished", "timeout", "progress"):
            raise AirflowException(f"TrainJobOutcomeTrigger sent an event this sensor does not know: {status!r}")
        check = outcome_from_event(event)
        result = self.evaluate(context, check, self.awaited_admission())
        if result.is_done:
            return result.xcom_value
        if status == "progress":
            self.defer_wait(context, known_fingerprint=waiting_fingerprint(check))
        raise AirflowSensorTimeout(self.timeout_message(f"Sensor has timed out after {self.timeout:.0f}s"))

    def timeout_detail(self) -> str:
        if self._last_check is None:
            return f"TrainJob {self.ref} was never read successfully, so its outcome is unknown."
        detail = str((self._last_check.waiting or {}).get("detail") or "")
        said = "".join(f" {line.strip().rstrip('.')}." for line in detail.splitlines() if line.strip())
        return (
            f"TrainJob {self.ref} runs execution {self._last_check.execution.admission} and had not finished "
            f"(neither Complete nor Failed).{said}"
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
        waiting=event.get("waiting") if isinstance(event.get("waiting"), Mapping) else None,
    )


__all__ = ["TrainJobOutcomeSensor", "outcome_from_event", "outcome_wait_reason"]
